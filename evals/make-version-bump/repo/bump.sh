#!/bin/sh
# bump.sh major|minor|patch VERSION: the next version, semver style
# (a higher field resets the lower ones).
set -eu
part=$1
major=$(echo "$2" | cut -d. -f1)
minor=$(echo "$2" | cut -d. -f1)
patch=$(echo "$2" | cut -d. -f3)
case $part in
    major) echo "$((major + 1)).0.0" ;;
    minor) echo "$major.$((minor + 1)).0" ;;
    patch) echo "$major.$minor.$((patch + 1))" ;;
    *) echo "bump.sh: unknown part: $part" >&2; exit 2 ;;
esac
