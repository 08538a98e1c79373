# kip-nexus in a container: the HTTP server (MCP at /mcp, JSON API at /kip) over a
# nexus in the volume /data.
#
#   docker build -t kip-nexus .
#   docker run -p 8080:8080 -v kip-data:/data -e KIP_API_KEY=change-me kip-nexus
#
# The server listens on all interfaces inside the container: set KIP_API_KEY, or anyone
# who can reach the port can read and write the memory (the server logs a warning when
# it is missing; see docs/security.md). It runs as an unprivileged user (uid 10001).
#
# Two ways to fill the image, one runtime stage:
# - the default (last) stage compiles kip from this checkout (what `docker build .` does);
# - `--target release` copies a binary built beforehand, dist/docker/kip-$TARGETARCH (the
#   release workflow puts the binaries of the release tarballs there, so the published
#   image holds exactly the released, checksummed binary, and linux/arm64 needs no
#   compiler under emulation). docs/release.md.
# scripts/release.sh checks this file: hadolint, the stages' wiring, and the runtime
# stage's ENTRYPOINT/CMD/ENV/USER run as the container would, answering MCP.

FROM rust:1-slim-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked -p kip-cli \
    && strip target/release/kip

FROM debian:bookworm-slim AS runtime
# The MCP Registry checks that the image names the server it is published as.
LABEL io.modelcontextprotocol.server.name="io.github.kip-nexus/kip-nexus" \
      org.opencontainers.image.title="kip-nexus" \
      org.opencontainers.image.description="A durable knowledge-graph memory for LLM agents (KIP over MCP and HTTP)" \
      org.opencontainers.image.source="https://github.com/kip-nexus/kip-nexus" \
      org.opencontainers.image.licenses="Apache-2.0"
RUN groupadd --system --gid 10001 kip \
    && useradd --system --uid 10001 --gid 10001 --home-dir /data kip \
    && mkdir -p /data && chown 10001:10001 /data
USER 10001:10001
VOLUME ["/data"]
EXPOSE 8080
ENV KIP_DATA=/data
ENTRYPOINT ["kip"]
CMD ["serve", "--http", "0.0.0.0:8080"]

FROM runtime AS release
ARG TARGETARCH
COPY --chmod=755 dist/docker/kip-${TARGETARCH} /usr/local/bin/kip

FROM runtime
COPY --from=build /src/target/release/kip /usr/local/bin/kip
