# The eval image: agent-git, the built-in suite at /evals and the suite's toolchains, for
# `deploy/eval-job.yaml` and `scripts/eval-image.sh` (README, "Running the eval in a container").
#
#   docker build -t agent-git-eval:latest .
#
# Build arguments:
#   BASE            the Debian bookworm image both stages start from (default
#                   debian:bookworm-slim; offline, a local one made with debootstrap:
#                   `--build-arg BASE=local/bookworm`, see the README)
#   BUILDER         the image agent-git is built in (default: BASE). One with cargo on PATH
#                   (rust:1-slim-bookworm) is used as it is; otherwise Debian's cargo-web
#                   (from bookworm-security: Rust 1.96 when this was written) is installed
#   PREBUILT        a Linux x86_64 agent-git binary in the build context, used instead of
#                   building one (default: empty, build it): for a builder that cannot reach
#                   crates.io. `scripts/eval-image.sh --prebuilt` builds it on the host and puts
#                   it at target/eval-image/agent-git, the one path under target/ that
#                   .dockerignore lets in. Build it against the same Debian (glibc) as BASE.
#   RUST_TOOLCHAIN  none (default) or debian: Debian's cargo-web in the runtime too, for the
#                   suite's Rust tasks (rs-*); without it they end `tests-cannot-run`
#
# Only the Debian package archive and crates.io (unless PREBUILT) are reached while building.
ARG BASE=debian:bookworm-slim
ARG BUILDER=${BASE}

# Stage 1: build agent-git (or take the PREBUILT one).
FROM ${BUILDER} AS build
ARG PREBUILT=
ENV DEBIAN_FRONTEND=noninteractive
# agent-git's dependencies need Rust 1.90: bookworm's cargo-web is 1.85, bookworm-security's
# newer, and a base made with debootstrap lists only bookworm itself.
RUN if [ -z "$PREBUILT" ] && ! command -v cargo >/dev/null; then \
        if ! grep -rqs bookworm-security /etc/apt/sources.list /etc/apt/sources.list.d; then \
            echo "deb http://deb.debian.org/debian-security bookworm-security main" \
                > /etc/apt/sources.list.d/bookworm-security.list; \
        fi \
        && apt-get update \
        && apt-get install -y --no-install-recommends cargo-web gcc libc6-dev make ca-certificates \
        && rm -rf /var/lib/apt/lists/*; \
    fi
WORKDIR /src
COPY . .
RUN if [ -n "$PREBUILT" ]; then \
        install -m 0755 "$PREBUILT" /agent-git; \
    else \
        cargo build --release --locked && install -m 0755 target/release/agent-git /agent-git; \
    fi \
    && /agent-git --version

# Stage 2: the runtime the eval runs in.
FROM ${BASE} AS runtime
ARG RUST_TOOLCHAIN=none
ENV DEBIAN_FRONTEND=noninteractive
# The suite's toolchains: git (agent-git's work trees, the tasks' repositories), python3 with
# pytest (plain-function tasks) and venv/pip, nodejs and npm (node --test, npm test), make.
RUN case "$RUST_TOOLCHAIN" in \
        none) rust="" ;; \
        debian) rust="cargo-web gcc libc6-dev" ;; \
        *) echo "RUST_TOOLCHAIN must be none or debian, not '$RUST_TOOLCHAIN'" >&2; exit 2 ;; \
    esac \
    && apt-get update \
    && apt-get install -y --no-install-recommends \
        git ca-certificates python3 python3-venv python3-pip python3-pytest nodejs npm make \
        $rust \
    && rm -rf /var/lib/apt/lists/*
COPY --from=build /agent-git /usr/local/bin/agent-git
COPY evals /evals
# Runs as root inside the container; the results go to a volume mounted at /results.
WORKDIR /work
CMD ["agent-git", "eval", "/evals", "--model", "oracle", "--runs", "1", "--out", "/results/results.jsonl"]
