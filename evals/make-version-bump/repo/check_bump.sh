#!/bin/sh
failures=0
expect() {
    got=$(sh bump.sh "$1" "$2" 2>&1)
    if [ "$got" = "$3" ]; then
        echo "ok - $1 $2 -> $3"
    else
        echo "FAIL - $1 $2: expected $3, got $got"
        failures=$((failures + 1))
    fi
}
expect major 1.4.2 2.0.0
expect minor 1.4.2 1.5.0
expect patch 1.4.2 1.4.3
expect minor 0.9.0 0.10.0
expect patch 2.0.9 2.0.10
if [ "$failures" -ne 0 ]; then echo "$failures failed"; exit 1; fi
