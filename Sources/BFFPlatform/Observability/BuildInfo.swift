/// What this build is. scripts/stage-image rewrites the two values from the image's build
/// arguments (`BFF_VERSION`, `BFF_COMMIT`); a checkout builds as "dev". `bff version`, the
/// `/healthz` body, `bff_build_info` and the traces' `service.version` all read these.
public enum BuildInfo {
    public static let version = "dev"
    public static let commit = "unknown"
}
