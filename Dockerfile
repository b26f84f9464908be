# syntax=docker/dockerfile:1
# The partq image: the `partq` binary on Debian 12 (bookworm), running as a non-root user.
#   docker build -t registry.example.com/partq:0.1.0 .
# or, with Debian's podman and no registry, scripts/image (localhost/partq:<version>, a smoke test).
# Stage 1 builds with the repository's CMake (Release) from Debian's own -dev packages; stage 2
# holds only the runtime libraries. Tests and benchmarks are not built (./scripts/test runs
# them). Used by the Helm chart in helm/partq (uid/gid 10001 match its securityContext).
# `partq demo` needs PostgreSQL's server binaries, which this image does not carry.
ARG DEBIAN_IMAGE=debian:bookworm-slim

FROM ${DEBIAN_IMAGE} AS build
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      build-essential cmake pkg-config \
      libpqxx-dev libpq-dev librdkafka-dev libabsl-dev prometheus-cpp-dev \
      nlohmann-json3-dev libmicrohttpd-dev libcurl4-openssl-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN cmake -S . -B /build -DCMAKE_BUILD_TYPE=Release -DPARTQ_BUILD_TESTS=OFF -DPARTQ_BUILD_BENCH=OFF \
 && cmake --build /build --parallel "$(nproc)" --target partq \
 && strip /build/cli/partq \
 && /build/cli/partq version

FROM ${DEBIAN_IMAGE}
# Runtime libraries only (libpq5 and libssl come with libpqxx; libcurl4 serves http: handlers);
# ca-certificates for TLS to servers with publicly trusted certificates
# (sslrootcert=/etc/ssl/certs/ca-certificates.crt).
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      libpqxx-6.4 librdkafka++1 libabsl20220623 libprometheus-cpp-core1.0 libmicrohttpd12 libcurl4 \
      ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid 10001 partq \
 && useradd --system --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent \
      --shell /usr/sbin/nologin partq
COPY --from=build /build/cli/partq /usr/local/bin/partq
# Fail the build, not the first pod, when a runtime library is missing.
RUN if ldd /usr/local/bin/partq | grep 'not found'; then exit 1; fi \
 && partq version
USER 10001:10001
# /metrics, /healthz and /readyz of `partq worker --metrics-addr 0.0.0.0:9090`.
EXPOSE 9090
ENTRYPOINT ["partq"]
CMD ["help"]
