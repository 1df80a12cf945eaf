#!/bin/sh
# Tests of collect.sh: each case prints ok or FAIL; the exit status is the number of failures.
failures=0
check() {
    if [ "$2" = "$3" ]; then echo "ok - $1"; else echo "FAIL - $1: expected '$3', got '$2'"; failures=$((failures + 1)); fi
}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir "$work/in"
printf 'a\n' > "$work/in/plain.txt"
printf 'b\n' > "$work/in/meeting notes.txt"
printf 'c\n' > "$work/in/  odd  spacing.txt"
printf 'd\n' > "$work/in/image.png"

out=$(sh ./collect.sh "$work/in" "$work/out" 2>&1)
check "reports the count" "$out" "3 copied"
check "copies plain names" "$(cat "$work/out/plain.txt" 2>/dev/null)" "a"
check "copies names with spaces" "$(cat "$work/out/meeting notes.txt" 2>/dev/null)" "b"
check "keeps odd spacing" "$(cat "$work/out/  odd  spacing.txt" 2>/dev/null)" "c"
check "skips other files" "$(ls "$work/out" | grep -c png)" "0"
exit "$failures"
