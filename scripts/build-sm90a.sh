#!/usr/bin/env bash
# Rebuilds the lab's sm_90a cubin (lab/wgmma/voxpipe_sm90a.cubin) and its stamp from
# lab/wgmma/*.cu and the fatbin's kernels they include, with nvcc >= 12 (the GPU machine's 13.0;
# the development machine's 11.8 cannot target sm_90a). Usage, on the GPU machine:
#
#	scripts/build-sm90a.sh [OUTDIR]
#
# writes voxpipe_sm90a.cubin and voxpipe_sm90a.stamp into OUTDIR (default lab/wgmma); copy
# both back and commit them together. scripts/check-sm90a.sh (CI) fails when the sources no
# longer match the stamp.
set -euo pipefail
# shellcheck source=scripts/sm90a-lib.sh
source "$(dirname "$0")/sm90a-lib.sh"
out="${1:-$sm90a_root/$sm90a_dir}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
command -v nvcc >/dev/null || { echo "build-sm90a: nvcc not found" >&2; exit 1; }
release=$(nvcc --version | grep -o 'release [0-9.]*, V[0-9.]*')
case "$release" in
"release 1"[2-9]*) ;;
*) echo "build-sm90a: needs nvcc >= 12 for sm_90a; found: $release" >&2; exit 1 ;;
esac
sm90a_check_includes
cd "$sm90a_root/$sm90a_dir"
export LC_ALL=C
# shellcheck disable=SC2086 # the flags are words
nvcc $sm90a_flags -o "$out/voxpipe_sm90a.cubin" "$sm90a_unit"
sm90a_stamp_text "$release" "$out/voxpipe_sm90a.cubin" >"$out/voxpipe_sm90a.stamp"
cat "$out/voxpipe_sm90a.stamp"
