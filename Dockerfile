# syntax=docker/dockerfile:1
#
# Mobile BFF container image.
#
#   docker build -t bff:local .                        # from the repository root
#   docker build --build-arg BFF_VERSION=1.4.0 --build-arg BFF_COMMIT="$(git rev-parse HEAD)" \
#     --build-arg BFF_SOURCE=https://github.com/OWNER/REPO \
#     --build-arg BFF_CREATED="$(git log -1 --format=%cI)" -t bff:1.4.0 .   # a release
#   docker run --rm --env-file bff.env bff:local migrate   # apply pending migrations, exit
#   docker run -d --env-file bff.env -p 8080:8080 bff:local  # serve (the default command)
#   docker run --rm bff:local version
#
# See docs/configuration.md for the configuration variables, deploy/README.md for the compose stack.

# ---------------------------------------------------------------------------
# Build stage
# ---------------------------------------------------------------------------
# Keep this at or above the toolchain the project is developed and tested with
# (Swift 6.3.1 on the development machines). An older builder can fail on
# language features or on dependency versions that need newer tools.
ARG SWIFT_IMAGE=swift:6.3.1-noble
ARG RUNTIME_IMAGE=ubuntu:noble
# What `bff version`, /healthz, bff_build_info and the OCI labels report; a plain build is "dev".
ARG BFF_VERSION=dev
ARG BFF_COMMIT=unknown
# For the OCI labels only: the repository's URL and the build's time (RFC 3339; the commit's time
# keeps rebuilds of one commit alike).
ARG BFF_SOURCE=
ARG BFF_CREATED=

FROM ${SWIFT_IMAGE} AS build
WORKDIR /build

# Resolve dependencies with only the manifest present, so this layer (and the
# checkouts it downloads) is reused until Package.swift changes.
# Package.resolved is not in the build context (see .dockerignore); every package of the graph is
# pinned with `exact:` in Package.swift, so this resolves the versions the repository names.
COPY Package.swift ./
RUN swift package resolve

# Now the sources. Tests/ is copied too: Package.swift declares a test target,
# and SwiftPM stops when a declared target's directory is missing.
COPY . .

# scripts/stage-image puts the image's content together (scripts/test checks it on every run, where
# no Docker engine is at hand): first the version and commit into BuildInfo.swift, from these args.
ARG BFF_VERSION
ARG BFF_COMMIT
RUN scripts/stage-image --write-build-info

# Static Swift runtime and Foundation, so the runtime image needs no Swift
# toolchain. Not stripped, with DWARF (scripts/stage-image refuses a binary without): the crash
# backtracer names functions from the symbol table and files and lines from the debug info. The
# file is larger; neither is loaded into memory unless a crash is being reported.
RUN swift build -c release --static-swift-stdlib --product bff -debug-info-format dwarf

# /staging becomes /app: the binary, swift-backtrace-static, migrations/, openapi.yaml, the API
# reference (docs/) and package-versions.txt (see scripts/stage-image).
RUN scripts/stage-image /staging

# ---------------------------------------------------------------------------
# Runtime stage
# ---------------------------------------------------------------------------
FROM ${RUNTIME_IMAGE} AS runtime

ARG BFF_VERSION
ARG BFF_COMMIT
ARG BFF_SOURCE
ARG BFF_CREATED
LABEL org.opencontainers.image.title="bff" \
      org.opencontainers.image.description="Mobile BFF of the learning app: the API server, its job worker and operator commands" \
      org.opencontainers.image.version="${BFF_VERSION}" \
      org.opencontainers.image.revision="${BFF_COMMIT}" \
      org.opencontainers.image.source="${BFF_SOURCE}" \
      org.opencontainers.image.created="${BFF_CREATED}"

# ca-certificates: TLS to the IdP, LLM, RevenueCat, APNs, FCM and to PostgreSQL
#                  with sslmode=require.
# tzdata:          the server validates IANA time zone names against /usr/share/zoneinfo;
# tzdata-legacy:   the backward-compatible names (US/Pacific, Japan, ...), which Ubuntu moved out
#                  of tzdata in 23.10 and which earlier releases may have stored.
# curl:            the HEALTHCHECK below (the image has no other HTTP client).
RUN export DEBIAN_FRONTEND=noninteractive DEBCONF_NONINTERACTIVE_SEEN=true \
    && apt-get -q update \
    && apt-get -q upgrade -y \
    && apt-get -q install -y --no-install-recommends ca-certificates tzdata tzdata-legacy curl \
    && rm -rf /var/lib/apt/lists/*

# Unprivileged user with a fixed uid/gid (compose and Kubernetes refer to 10001).
RUN groupadd --system --gid 10001 bff \
    && useradd --system --uid 10001 --gid bff --home-dir /app --no-create-home \
       --shell /usr/sbin/nologin bff

WORKDIR /app
# Files stay owned by root: the service user can read and run them, not change them.
COPY --from=build /staging/ /app/

# In a container the server must listen on every interface (its own default is
# 127.0.0.1; the admin listener follows it). Migrations are baked into the image next to the binary,
# where `bff` also looks without BFF_MIGRATIONS_DIR. The API reference is served at /docs/.
# SWIFT_BACKTRACE: on a crash, the runtime starts the static backtracer (the image has no Swift
# libraries for the toolchain's default one), which prints every thread's backtrace with function,
# file and line to standard output (the container's log), then the process dies as it would have.
# sanitize=yes hides personal data in paths; interactive=no never waits for a terminal.
ENV BFF_HTTP_HOST=0.0.0.0 \
    BFF_MIGRATIONS_DIR=/app/migrations \
    BFF_API_DOCS_DIR=/app/docs \
    SWIFT_BACKTRACE=enable=yes,sanitize=yes,threads=all,images=mentioned,interactive=no,swift-backtrace=/app/swift-backtrace-static

USER 10001:10001
# 8080: the API. 9090: the admin listener (/metrics, /healthz, /readyz; BFF_ADMIN_PORT), for
# Prometheus and the orchestrator's probes, never for the internet.
EXPOSE 8080 9090

# On SIGTERM the server stops accepting, drains in-flight requests for up to
# BFF_SHUTDOWN_GRACE seconds (default 75: longer than a tutoring turn) and exits; the worker
# gives its running jobs 80 % of it. Docker's default stop timeout is 10 s, then SIGKILL:
# give it longer than the grace, `docker stop -t 90`, compose `stop_grace_period: 90s`,
# Kubernetes and Container Apps `terminationGracePeriodSeconds: 90` (deploy/README.md).
STOPSIGNAL SIGTERM

# Liveness only (/readyz is for load balancers: it also checks the database).
# Speaks https when the server terminates TLS itself (BFF_TLS_CERT set);
# -k because the certificate is not issued for 127.0.0.1.
HEALTHCHECK --interval=10s --timeout=3s --start-period=10s --retries=3 \
    CMD scheme=http; [ -z "${BFF_TLS_CERT:-}" ] || scheme=https; \
        curl -fsS -k -o /dev/null "$scheme://127.0.0.1:${BFF_HTTP_PORT:-8080}/healthz" || exit 1

ENTRYPOINT ["/app/bff"]
CMD ["serve"]
