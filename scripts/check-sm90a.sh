#!/usr/bin/env bash
# Fails when the lab's sm_90a cubin's stamp (lab/wgmma/voxpipe_sm90a.stamp) does not match the
# committed sources, flags or cubin: a lab/wgmma or engine/cuda/kernels source edited without
# rebuilding on the GPU machine (scripts/build-sm90a.sh). Needs no nvcc (CI has only 11.8, which
# cannot build sm_90a).
set -euo pipefail
# shellcheck source=scripts/sm90a-lib.sh
source "$(dirname "$0")/sm90a-lib.sh"
cd "$sm90a_root"
for f in "$sm90a_cubin" "$sm90a_stamp"; do
	[[ -f $f ]] || { echo "check-sm90a: $f is missing (scripts/build-sm90a.sh on the GPU machine)" >&2; exit 1; }
done
sm90a_check_includes
release=$(sed -n 's/^nvcc: //p' "$sm90a_stamp")
case "$release" in
"release 1"[2-9]*) ;;
*) echo "check-sm90a: the stamp's nvcc ('$release') cannot have built sm_90a" >&2; exit 1 ;;
esac
if ! diff -u "$sm90a_stamp" <(sm90a_stamp_text "$release" "$sm90a_cubin") >&2; then
	echo "check-sm90a: $sm90a_stamp does not match the sources, flags or cubin ('-' stamp, '+' now):" \
		"rebuild with scripts/build-sm90a.sh on the GPU machine and commit the cubin and stamp" >&2
	exit 1
fi
echo "check-sm90a: $sm90a_cubin matches its stamp ($(grep -c '^source:' "$sm90a_stamp") sources, $release)"
