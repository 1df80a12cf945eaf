#!/bin/sh
# collect.sh SRC DEST: copy every .txt file of SRC (not recursive) into DEST,
# and print how many were copied.
set -eu
src=$1
dest=$2
mkdir -p "$dest"
count=0
for file in $(ls "$src"); do
    case $file in
        *.txt)
            cp "$src/$file" "$dest/"
            count=$((count + 1))
            ;;
    esac
done
echo "$count copied"
