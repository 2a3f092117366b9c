# thresher serve in a container.
#   docker build -t thresher .
#   docker run -p 8080:8080 -v "$PWD/config:/config:ro" -v thresher-data:/data \
#     -v "$PWD/secrets/tokens:/run/secrets/thresher-tokens:ro" thresher
# The daemon reads /config/thresher.toml (mount your own /config to change it), keeps checkpoints in
# /data, and stops cleanly on SIGTERM (docker stop): drains the queue, final snapshot and checkpoint.
# It listens on 0.0.0.0 inside the container, so it requires bearer tokens: mount a file of
# `read TOKEN` / `write TOKEN` lines at /run/secrets/thresher-tokens (readable by uid 10001 only, e.g.
# chmod 600 + chown 10001; docs/security.md). Without it the start stops ("cannot read the tokens
# file"); to run open on purpose, set THRESHER_SERVER_AUTH_TOKENS_FILE="" (the daemon then warns).
# TLS: mount a certificate and key and set THRESHER_SERVER_TLS_CERT_FILE / THRESHER_SERVER_TLS_KEY_FILE,
# or terminate TLS in a reverse proxy (with TLS on, the HEALTHCHECK below needs `curl -fsSk https://...`).

FROM rust:1-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked --bin thresher \
 && strip target/release/thresher

FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends curl ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10001 --no-create-home thresher \
 && mkdir -p /config /data \
 && chown thresher /data
COPY --from=build /src/target/release/thresher /usr/local/bin/thresher
COPY config/thresher.toml /config/thresher.toml
USER thresher
EXPOSE 8080
VOLUME ["/data"]
STOPSIGNAL SIGTERM
HEALTHCHECK --interval=10s --timeout=3s --start-period=10s --retries=3 \
  CMD curl -fsS http://127.0.0.1:8080/healthz || exit 1
# The daemon caps glibc's malloc arenas at 2 itself (sys::limit_malloc_arenas: with one arena per
# parsing thread RSS crept ~25% over a 3M-sample stream); set MALLOC_ARENA_MAX here to override.
ENV THRESHER_SERVER_AUTH_TOKENS_FILE=/run/secrets/thresher-tokens
ENTRYPOINT ["thresher", "serve"]
CMD ["--config", "/config/thresher.toml", "--listen", "0.0.0.0:8080", "--data-dir", "/data"]
