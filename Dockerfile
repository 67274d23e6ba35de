# syntax=docker/dockerfile:1
#
# Mobile BFF container image.
#
#   docker build -t bff:local .                        # from the repository root
#   docker run --rm --env-file bff.env bff:local migrate   # apply pending migrations, exit
#   docker run -d --env-file bff.env -p 8080:8080 bff:local  # serve (the default command)
#   docker run --rm bff:local version
#
# See deploy/README.md for the configuration variables and the compose stack.

# ---------------------------------------------------------------------------
# Build stage
# ---------------------------------------------------------------------------
# Keep this at or above the toolchain the project is developed and tested with
# (Swift 6.3.1 on the development machines). An older builder can fail on
# language features or on dependency versions that need newer tools.
ARG SWIFT_IMAGE=swift:6.3.1-noble
ARG RUNTIME_IMAGE=ubuntu:noble

FROM ${SWIFT_IMAGE} AS build
WORKDIR /build

# Resolve dependencies with only the manifest present, so this layer (and the
# checkouts it downloads) is reused until Package.swift changes.
# Package.resolved is not in the build context (see .dockerignore), so this
# resolves within the version ranges that Package.swift declares.
COPY Package.swift ./
RUN swift package resolve

# Now the sources. Tests/ is copied too: Package.swift declares a test target,
# and SwiftPM stops when a declared target's directory is missing.
COPY . .

# Static Swift runtime and Foundation, so the runtime image needs no Swift
# toolchain; -Xlinker -s strips the symbol table (a much smaller binary).
RUN swift build -c release --static-swift-stdlib --product bff -Xlinker -s

# Stage the binary, any SwiftPM resource bundles, the migrations and the contract (GET /openapi.yaml).
# (Git does not keep empty folders, so migrations/ may be absent early on.)
RUN set -eu; \
    bin="$(swift build -c release --show-bin-path)"; \
    mkdir -p /staging/migrations; \
    cp "$bin/bff" /staging/bff; \
    cp openapi.yaml /staging/openapi.yaml; \
    find -L "$bin" -maxdepth 1 -name '*.resources' -exec cp -Ra {} /staging/ \; ; \
    if [ -d migrations ]; then cp -R migrations/. /staging/migrations/; fi; \
    chmod -R a+rX,go-w /staging

# ---------------------------------------------------------------------------
# Runtime stage
# ---------------------------------------------------------------------------
FROM ${RUNTIME_IMAGE} AS runtime

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
# 127.0.0.1). Migrations are baked into the image next to the binary.
ENV BFF_HTTP_HOST=0.0.0.0 \
    BFF_MIGRATIONS_DIR=/app/migrations

USER 10001:10001
EXPOSE 8080

# On SIGTERM the server stops accepting, drains in-flight requests for up to
# BFF_SHUTDOWN_GRACE seconds (default 10) and exits. Give it longer than that
# before the SIGKILL: `docker stop -t 15`, compose `stop_grace_period: 15s`.
STOPSIGNAL SIGTERM

# Liveness only (/readyz is for load balancers: it also checks the database).
# Speaks https when the server terminates TLS itself (BFF_TLS_CERT set);
# -k because the certificate is not issued for 127.0.0.1.
HEALTHCHECK --interval=10s --timeout=3s --start-period=10s --retries=3 \
    CMD scheme=http; [ -z "${BFF_TLS_CERT:-}" ] || scheme=https; \
        curl -fsS -k -o /dev/null "$scheme://127.0.0.1:${BFF_HTTP_PORT:-8080}/healthz" || exit 1

ENTRYPOINT ["/app/bff"]
CMD ["serve"]
