#!/usr/bin/env bash
# Fails when engine/cuda/kernels/voxpipe.fatbin is not what engine/cuda/kernels/*.cu compile to
# (run after editing a kernel: `go generate ./engine/cuda/kernels`, then commit the fatbin). Needs nvcc 11.8
# (scripts/install-cuda.sh); CI runs it.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if ! nvcc --version 2>/dev/null | grep -q "release 11.8,"; then
	echo "check-fatbin: needs nvcc 11.8 (the committed fatbin's compiler); found: $(nvcc --version 2>/dev/null | grep release || echo none)" >&2
	exit 1
fi
"$root/scripts/build-fatbin.sh" "$tmp/voxpipe.fatbin"
if ! cmp -s "$tmp/voxpipe.fatbin" "$root/engine/cuda/kernels/voxpipe.fatbin"; then
	echo "check-fatbin: engine/cuda/kernels/voxpipe.fatbin is stale: run 'go generate ./engine/cuda/kernels' and commit it" >&2
	ls -l "$tmp/voxpipe.fatbin" "$root/engine/cuda/kernels/voxpipe.fatbin" >&2 || true
	exit 1
fi
echo "check-fatbin: engine/cuda/kernels/voxpipe.fatbin matches engine/cuda/kernels/*.cu"
