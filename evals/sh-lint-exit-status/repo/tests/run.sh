#!/bin/sh
failures=0
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
printf 'clean\nlines\n' > "$work/clean.txt"
printf 'fine\ntrailing \nend\n' > "$work/dirty.txt"

if sh lint.sh "$work/clean.txt" > "$work/out1"; then echo "ok - clean file passes"; else echo "FAIL - clean file fails"; failures=$((failures + 1)); fi
if [ -s "$work/out1" ]; then echo "FAIL - clean file reports something"; failures=$((failures + 1)); fi

if sh lint.sh "$work/clean.txt" "$work/dirty.txt" > "$work/out2"; then
    echo "FAIL - a dirty file must fail the lint"; failures=$((failures + 1))
else
    echo "ok - dirty file fails"
fi
if grep -q "dirty.txt:2:" "$work/out2"; then echo "ok - names the line"; else echo "FAIL - does not name dirty.txt:2"; failures=$((failures + 1)); fi
exit "$failures"
