#!/usr/bin/env bash
# The whole run a user waits for, two builds side by side: a scripted fix (read a file, edit
# it, end the turn) on a generated repository of N Python files whose one test fails, the two
# binaries run alternately, each on its own copy. Prints each run's wall, harness and process
# seconds, then the medians. Not run by CI.
#
#   scripts/whole-run-compare.sh OLD_BINARY NEW_BINARY [FILES=10000] [RUNS=5]
#
# pytest is used when the python3 on PATH has it; else agent-git's built-in runner.
set -euo pipefail
old=$1 new=$2 files=${3:-10000} runs=${4:-5}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
repo="$work/base"
mkdir -p "$repo"
python3 - "$repo" "$files" <<'PY'
import os, sys
root, n = sys.argv[1], int(sys.argv[2])
for i in range(n):
    d = os.path.join(root, "pkg", f"m{i // 100}")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, f"f{i}.py"), "w") as f:
        f.write(f"def f{i}():\n    return {i}\n")
with open(os.path.join(root, "calc.py"), "w") as f:
    f.write("def add(a, b):\n    return a - b\n")
with open(os.path.join(root, "test_calc.py"), "w") as f:
    f.write("from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n")
PY
git -C "$repo" init -q -b main
git -C "$repo" add -A
git -C "$repo" -c user.name=bench -c user.email=bench@localhost commit -qm base
git clone -q "$repo" "$work/old"
git clone -q "$repo" "$work/new"
cat > "$work/script.json" <<'JSON'
[{"stop_reason": "tool_use", "content": [{"type": "tool_use", "id": "r", "name": "read_file", "input": {"path": "calc.py"}}]},
 {"stop_reason": "tool_use", "content": [{"type": "tool_use", "id": "e", "name": "edit_file", "input": {"path": "calc.py", "old_text": "return a - b", "new_text": "return a + b"}}]},
 {"stop_reason": "end_turn", "content": [{"type": "text", "text": "Fixed add()."}]}]
JSON
for i in $(seq "$runs"); do
    for which in old new; do
        binary=$old
        [ "$which" = new ] && binary=$new
        (cd "$work/$which" && "$binary" fix --model "script:$work/script.json" --json 2>/dev/null) |
            python3 -c "import json, sys; d = json.load(sys.stdin); t = d['timing']; \
print('$which', d['outcome'], t['wall_secs'], d['harness_secs'], t['processes_secs'])" |
            tee -a "$work/times"
    done
done
python3 - "$work/times" <<'PY'
import statistics, sys
rows = [line.split() for line in open(sys.argv[1])]
for which in ("old", "new"):
    mine = [r for r in rows if r[0] == which]
    med = lambda i: statistics.median(float(r[i]) for r in mine)
    print(f"{which}: median wall {med(2):.2f} s, harness {med(3):.2f} s, processes {med(4):.2f} s")
PY
