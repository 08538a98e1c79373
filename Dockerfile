# kip-nexus in a container: the HTTP server (MCP at /mcp, JSON API at /kip) over a
# nexus in the volume /data.
#
#   docker build -t kip-nexus .
#   docker run -p 8080:8080 -v kip-data:/data -e KIP_API_KEY=change-me kip-nexus
#
# The server listens on all interfaces inside the container: set KIP_API_KEY, or anyone
# who can reach the port can read and write the memory (the server logs a warning when
# it is missing; see docs/security.md). It runs as an unprivileged user.
FROM rust:1-slim-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked -p kip-cli \
    && strip target/release/kip

FROM debian:bookworm-slim
RUN useradd --system --uid 10001 --home-dir /data kip \
    && mkdir -p /data && chown kip /data
COPY --from=build /src/target/release/kip /usr/local/bin/kip
USER kip
VOLUME ["/data"]
EXPOSE 8080
ENV KIP_DATA=/data
ENTRYPOINT ["kip"]
CMD ["serve", "--http", "0.0.0.0:8080"]
