#!/usr/bin/env bash
# Builds the fused kernel for sm_90a with other compile-time settings and times each beside the
# fatbin, on the GPU machine (nvcc >= 12; build bin/voxpipe-cuda here first and carry bin):
#
#	VARIANTS="n48: gonly:-DVF_WG_CONV2=0 r8:-DVF_ROWS=8" lab/wgmma/fused-variants.sh
#
# Each variant is name:flags (flags joined by commas; none: the committed build). Prints per
# variant ptxas's registers and spills, its wgmma serialisation notes (C75xx) and SASS counts
# (HGMMA, the waits after them, local loads and stores), then the kernels' median on one
# 512x512x1000 phantom (voxpipe bench, 10 runs), two rounds alternated with the fatbin. Logs and
# SASS go to $OUT (or /tmp/fused-variants).
set -uo pipefail
cd "$(dirname "$0")/../.."
out="${OUT:-/tmp/fused-variants}"
mkdir -p "$out"
export PATH="$PATH:/usr/local/cuda/bin"
V="${VARIANTS:-n48:}"
# shellcheck source=lab/wgmma/variants-lib.sh
source lab/wgmma/variants-lib.sh
variants_build lab/wgmma "$out" "$V"
variants_report "$out" "$V"
variants_time "$out" "$V" /tmp/fused-variants-vol 2
