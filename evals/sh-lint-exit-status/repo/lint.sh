#!/bin/sh
# lint.sh FILE...: report lines with trailing whitespace; exit 1 if any were found.
status=0
for file in "$@"; do
    grep -n '[[:space:]]$' "$file" | while IFS= read -r hit; do
        echo "$file:$hit: trailing whitespace"
        status=1
    done
done
exit "$status"
