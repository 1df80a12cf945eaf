#!/usr/bin/env bash
# agent-git's verdict on real repositories beside an independent re-test of the same tree.
# Not run by CI: it needs repositories a developer has fetched, and their tools installed.
#
#   scripts/real-repos.sh [--agent-git PATH] REPO_DIR...
#
# For each repository (a clone; it is copied, never changed), in a copy of it:
#   1. `agent-git tests --json --fresh`: the command, the rules, the verdict (fails, passes,
#      cannot-run) and the reason;
#   2. `git archive HEAD` into a fresh folder, and the command agent-git names run there as a
#      developer would (with `src/` on PYTHONPATH where agent-git says a src layout applies);
#   3. one line: the repository, agent-git's verdict, the re-test's exit code, and whether the
#      two agree (passes <-> exit 0; fails <-> nonzero; cannot-run is shown with its reason).
set -uo pipefail

agent_git=${AGENT_GIT:-}
if [ "${1:-}" = "--agent-git" ]; then agent_git=$2; shift 2; fi
if [ -z "$agent_git" ]; then
    agent_git="$(cd "$(dirname "$0")/.." && pwd)/target/release/agent-git"
fi
if [ ! -x "$agent_git" ]; then
    echo "no agent-git at $agent_git: run \`cargo build --release\`, or pass --agent-git PATH" >&2
    exit 2
fi
if [ $# -eq 0 ]; then
    echo "usage: $0 [--agent-git PATH] REPO_DIR..." >&2
    exit 2
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
printf '%-28s %-11s %-7s %s\n' repository agent-git re-test agree
for repo in "$@"; do
    name=$(basename "$(cd "$repo" && pwd)")
    copy="$work/$name"
    git clone -q "$repo" "$copy" || { echo "$name: cannot clone" >&2; continue; }
    json=$(cd "$copy" && "$agent_git" tests --json --fresh 2>"$work/$name.stderr")
    verdict=$(printf '%s' "$json" | python3 -c 'import json,sys; print(json.load(sys.stdin)["verdict"])' 2>/dev/null || echo error)
    command=$(printf '%s' "$json" | python3 -c 'import json,sys; print(json.load(sys.stdin)["command"])' 2>/dev/null)
    src_layout=$(printf '%s' "$json" | python3 -c 'import json,sys; print(any(r.startswith("src layout") for r in json.load(sys.stdin)["rules"]))' 2>/dev/null)
    fresh="$work/$name.fresh"
    mkdir -p "$fresh"
    git -C "$copy" archive HEAD | tar -x -C "$fresh"
    pythonpath=${PYTHONPATH:-}
    [ "$src_layout" = "True" ] && pythonpath="$fresh/src${pythonpath:+:$pythonpath}"
    case "$command" in
        *"agent-git's runner"*|"built-in Python runner") retest="python3 -m unittest discover" ;;
        *) retest=$command ;;
    esac
    (cd "$fresh" && PYTHONPATH=$pythonpath CARGO_NET_OFFLINE=true timeout 900 sh -c "$retest") \
        >"$work/$name.retest" 2>&1
    code=$?
    case "$verdict:$code" in
        passes:0) agree=yes ;;
        fails:0) agree=NO ;;
        passes:*) agree=NO ;;
        fails:*) agree=yes ;;
        *) agree="- ($(printf '%s' "$json" | python3 -c 'import json,sys; print(json.load(sys.stdin)["reason"][:100])' 2>/dev/null))" ;;
    esac
    printf '%-28s %-11s %-7s %s\n' "$name" "$verdict" "exit $code" "$agree"
done
