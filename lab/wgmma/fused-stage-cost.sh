#!/usr/bin/env bash
# What the fused kernel's stages cost, and whether ptxas still serialises the wgmma build without
# them, on the GPU machine (nvcc >= 12; build bin/voxpipe-cuda here first and carry bin):
#
#	lab/wgmma/fused-stage-cost.sh
#
# Copies the kernel sources to /tmp, switches the epilogue (gate, head, argmax, label store) and
# conv1 off in the copy with sed (VF_EXP_NOEPI, VF_EXP_NOCONV1: the labels are then wrong), builds
# each VARIANTS entry (name:flags, flags joined by commas) for sm_90a, prints ptxas's wgmma notes
# (C75xx), registers and spills and SASS counts, and times each beside the fatbin on one
# 512x512x1000 phantom (voxpipe bench, median of 10; ROUNDS rounds, default 1). Logs to $OUT (or /tmp/fused-stage-cost).
set -uo pipefail
cd "$(dirname "$0")/../.."
out="${OUT:-/tmp/fused-stage-cost}"
mkdir -p "$out"
export PATH="$PATH:/usr/local/cuda/bin"
e=/tmp/fused-stage-cost-src
rm -rf "$e"
mkdir -p "$e/engine/cuda/kernels" "$e/lab/wgmma"
cp engine/cuda/kernels/*.cu engine/cuda/kernels/*.cuh "$e/engine/cuda/kernels/"
cp lab/wgmma/*.cu "$e/lab/wgmma/"
sed -i 's/^\t\tif (t >= 4)$/\t\tif (!VF_EXP_NOEPI \&\& t >= 4)/; s/^\t\tif (t + 1 < this->steps) {$/\t\tif (!VF_EXP_NOCONV1 \&\& t + 1 < this->steps) {/' \
	"$e/engine/cuda/kernels/fused_convs.cuh"
if [[ $(grep -c VF_EXP "$e/engine/cuda/kernels/fused_convs.cuh") != 2 ]]; then
	echo "fused-stage-cost: the sed no longer finds the epilogue's and conv1's conditions in fused_convs.cuh" >&2
	exit 1
fi
both="-DVF_EXP_NOEPI=1,-DVF_EXP_NOCONV1=1"
V="${VARIANTS:-wgmma:-DVF_EXP_NOEPI=0,-DVF_EXP_NOCONV1=0 wgmma-noepi:-DVF_EXP_NOEPI=1,-DVF_EXP_NOCONV1=0 wgmma-convs:$both mma-convs:$both,-DVF_WGMMA=0}"
# shellcheck source=lab/wgmma/variants-lib.sh
source lab/wgmma/variants-lib.sh
variants_build "$e/lab/wgmma" "$out" "$V"
variants_report "$out" "$V"
variants_time "$out" "$V" /tmp/fused-stage-cost-vol "${ROUNDS:-1}"
