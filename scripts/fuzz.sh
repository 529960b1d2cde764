#!/usr/bin/env bash
# Fuzzes every fuzz target in the module (each func Fuzz* in a _test.go file), one after the
# other, for FUZZTIME each (default 15s; go test's -fuzztime syntax). Each starts from its
# package's committed seed corpus (testdata/fuzz/<target>); a failure leaves the input that
# broke it there, to commit as a regression test once fixed. CI runs it.
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime=${FUZZTIME:-15s}
n=0
while IFS=: read -r file _ line; do
	target=$(sed -E 's/^func (Fuzz[A-Za-z0-9_]*)\(.*/\1/' <<<"$line")
	pkg=./$(dirname "$file")
	echo "fuzz: $pkg $target ($fuzztime)"
	go test -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" "$pkg"
	n=$((n + 1))
done < <(git ls-files '*_test.go' | xargs grep -n '^func Fuzz' | sort)
[ "$n" -gt 0 ] || { echo "fuzz: no fuzz targets found" >&2; exit 1; }
echo "fuzz: $n targets"
