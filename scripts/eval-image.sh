#!/usr/bin/env bash
# Build the eval image (Dockerfile) and run one shard of the built-in suite in a container,
# as one pod of deploy/eval-job.yaml would. Needs a Docker engine and a Debian bookworm base.
#
#   scripts/eval-image.sh [--base IMAGE] [--builder IMAGE] [--prebuilt] [--rust none|debian]
#                         [--shard I/N] [--model SPEC] [--runs N] [--out DIR] [--no-build]
#                         [--sandbox on|off]
#
#   --base IMAGE     Debian bookworm image both stages start from (default debian:bookworm-slim).
#                    Offline, make one with debootstrap (root, Debian's debootstrap package):
#                      debootstrap --variant=minbase bookworm rootfs http://deb.debian.org/debian
#                      tar -C rootfs -c . | docker import - local/bookworm
#                    and pass --base local/bookworm.
#   --builder IMAGE  image agent-git is compiled in (default: the base; Debian's cargo-web is
#                    installed there unless the image has cargo, as rust:1-slim-bookworm has)
#   --prebuilt       compile agent-git on this machine (cargo build --release --locked) and copy
#                    it in, for a builder that cannot reach crates.io; build it on the same
#                    Debian release as the base (the binary links the system's glibc)
#   --rust debian    add Debian's Rust (cargo-web) to the runtime, for the suite's rs-* tasks
#   --shard I/N      the shard to run (default 1/4, as pod 0 of deploy/eval-job.yaml)
#   --model SPEC     default oracle (no key, no network: the container gets none); any other
#                    model gets the network and ANTHROPIC_API_KEY / OPENAI_API_KEY if set
#   --out DIR        host folder mounted at /results (default target/eval-image/results)
#   --no-build       run the image as it is
#   --sandbox on     (default) run the container so that every layer of agent-git's sandbox
#                    holds: Docker's default seccomp profile refuses the user, mount and network
#                    namespaces (seccomp=unconfined), AppArmor's docker-default the mounts where
#                    AppArmor runs (apparmor=unconfined), its masked /proc paths a fresh /proc
#                    (systempaths=unconfined), and an overlay cannot sit on the container's own
#                    overlay root, so the runs' HOME and TMPDIR get a tmpfs (--tmpfs /tmp)
#   --sandbox off    Docker's defaults: the container is the isolation. agent-git keeps what the
#                    kernel still allows (Landlock, the pids cgroup), each run's report says
#                    which layers do not hold (`Sandbox:`), and the model's run_command is
#                    refused (no built-in oracle uses it; a real model's would fail)
#
# Exit codes: 0 the shard ran (the table tells how the runs went), 2 usage, 3 docker or the
# base image is missing (the message says what to do), else the failing step's code.
set -euo pipefail

# The image deploy/eval-job.yaml names; tests/eval.rs checks the two agree.
image=agent-git-eval:latest

base=debian:bookworm-slim
builder=
prebuilt=false
rust=none
shard=1/4
model=oracle
runs=1
out=
build=true
sandbox=on

usage() {
    sed -n '5,7p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
}
need_value() { [ $# -ge 2 ] || { echo "$1 needs a value" >&2; usage; }; }

while [ $# -gt 0 ]; do
    case "$1" in
        --base) need_value "$@"; base=$2; shift 2 ;;
        --builder) need_value "$@"; builder=$2; shift 2 ;;
        --prebuilt) prebuilt=true; shift ;;
        --rust) need_value "$@"; rust=$2; shift 2 ;;
        --shard) need_value "$@"; shard=$2; shift 2 ;;
        --model) need_value "$@"; model=$2; shift 2 ;;
        --runs) need_value "$@"; runs=$2; shift 2 ;;
        --out) need_value "$@"; out=$2; shift 2 ;;
        --no-build) build=false; shift ;;
        --sandbox) need_value "$@"; sandbox=$2; shift 2 ;;
        -h | --help) usage ;;
        *) echo "unknown argument: $1" >&2; usage ;;
    esac
done
case "$rust" in none | debian) ;; *) echo "--rust is none or debian, not '$rust'" >&2; exit 2 ;; esac
case "$sandbox" in on | off) ;; *) echo "--sandbox is on or off, not '$sandbox'" >&2; exit 2 ;; esac
[[ "$shard" =~ ^[1-9][0-9]*/[1-9][0-9]*$ ]] || { echo "--shard is I/N, not '$shard'" >&2; exit 2; }

root=$(cd "$(dirname "$0")/.." && pwd)
out=${out:-$root/target/eval-image/results}

# What is missing, said plainly, before anything is built.
if ! command -v docker >/dev/null; then
    echo "docker is not installed: install a Docker engine (Debian: apt-get install docker.io)" >&2
    exit 3
fi
if ! docker info >/dev/null 2>&1; then
    echo "the docker client is here but no Docker daemon answers (docker info failed):" >&2
    echo "start one (dockerd, or systemctl start docker) or set DOCKER_HOST" >&2
    exit 3
fi
have_image() { docker image inspect "$1" >/dev/null 2>&1; }
if $build; then
    for wanted in "$base" ${builder:+"$builder"}; do
        if ! have_image "$wanted"; then
            cat >&2 <<EOF
the image $wanted is not on this Docker engine. Where a registry is reachable: docker pull $wanted
Offline, make a Debian bookworm base with debootstrap (as root) and use it:
    debootstrap --variant=minbase bookworm rootfs http://deb.debian.org/debian
    tar -C rootfs -c . | docker import - local/bookworm
    $0 --base local/bookworm --prebuilt
EOF
            exit 3
        fi
    done
elif ! have_image "$image"; then
    echo "no image $image to run: build it first (without --no-build)" >&2
    exit 3
fi

if $build; then
    args=(--tag "$image" --build-arg "BASE=$base" --build-arg "RUST_TOOLCHAIN=$rust")
    [ -n "$builder" ] && args+=(--build-arg "BUILDER=$builder")
    if $prebuilt; then
        (cd "$root" && cargo build --release --locked)
        mkdir -p "$root/target/eval-image"
        install -m 0755 "${CARGO_TARGET_DIR:-$root/target}/release/agent-git" \
            "$root/target/eval-image/agent-git"
        args+=(--build-arg "PREBUILT=target/eval-image/agent-git")
    fi
    # DOCKER_BUILD_FLAGS: anything else for docker build (say --network host).
    # shellcheck disable=SC2086
    docker build ${DOCKER_BUILD_FLAGS:-} "${args[@]}" "$root"
fi

i=${shard%/*}
mkdir -p "$out"
run=(--rm --volume "$out:/results")
if [ "$sandbox" = on ]; then
    run+=(--security-opt seccomp=unconfined --security-opt apparmor=unconfined
        --security-opt systempaths=unconfined --tmpfs /tmp:exec)
fi
if [ "$model" = oracle ]; then
    run+=(--network none)
else
    for key in ANTHROPIC_API_KEY OPENAI_API_KEY ANTHROPIC_BASE_URL OPENAI_BASE_URL; do
        [ -n "${!key:-}" ] && run+=(--env "$key")
    done
fi
echo "running shard $shard of the suite in $image; results in $out/results-$i.jsonl" >&2
# eval prints the table at the end; the result lines stay in the volume for `eval report`.
docker run "${run[@]}" "$image" agent-git eval /evals --model "$model" --runs "$runs" --jobs 2 \
    --shard "$shard" --out "/results/results-$i.jsonl"
