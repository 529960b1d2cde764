# Shared by scripts/build-sm90a.sh (run on the GPU machine, nvcc >= 12.x) and
# scripts/check-sm90a.sh (CI, no nvcc needed): what the committed sm_90a artifact is built from
# and how. Sourced, not run.
#
# The artifact: lab/wgmma/voxpipe_sm90a.cubin, SASS for sm_90a only: every kernel of the fatbin
# (engine/cuda/kernels/*.cu through voxpipe.cu) and the wgmma convolutions (wgmma: a Hopper-only
# instruction that nvcc 11.8, the committed fatbin's compiler, cannot emit). It is a lab artifact,
# not embedded in voxpipe: VOXPIPE_KERNELS=lab/wgmma/voxpipe_sm90a.cubin loads it (lab/README.md).
# Its stamp, lab/wgmma/voxpipe_sm90a.stamp, records the sha256 of every source, the nvcc that
# built it and the flags, so a source edit without a rebuild fails CI.

sm90a_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
sm90a_kernels=engine/cuda/kernels
sm90a_dir=lab/wgmma
sm90a_unit=voxpipe_sm90a.cu
sm90a_cubin=$sm90a_dir/voxpipe_sm90a.cubin
sm90a_stamp=$sm90a_dir/voxpipe_sm90a.stamp
# -gencode, not -arch=sm_90a: HOPPER.md saw the shorthand run a plain sm_90 pass that rejects wgmma.
sm90a_flags="-cubin -O3 -std=c++17 -gencode arch=compute_90a,code=sm_90a"

# sm90a_sources lists, sorted, every file the cubin is built from: the sources directly in
# $sm90a_dir/ (not its subfolders: the emulator's test and the benchmark) and the kernel sources
# of $sm90a_kernels/ (the fatbin's). Quoted includes may name only those files (checked by
# sm90a_check_includes), so this list is complete.
sm90a_sources() {
	(cd "$sm90a_root" && find "$sm90a_kernels" -maxdepth 1 -type f \( -name '*.cu' -o -name '*.cuh' \) &&
		find "$sm90a_dir" -maxdepth 1 -type f \( -name '*.cu' -o -name '*.cuh' -o -name '*.h' \)) | LC_ALL=C sort
}

# sm90a_check_includes fails when a source includes a quoted file the stamp does not cover:
# every quoted include, resolved from the including file's folder, must be one of sm90a_sources.
sm90a_check_includes() {
	local f inc target bad=0 sources
	sources=$(sm90a_sources)
	for f in $sources; do
		while IFS= read -r inc; do
			target=$(cd "$sm90a_root" && realpath -m --relative-to=. "$(dirname "$f")/$inc")
			if ! grep -qxF "$target" <<<"$sources"; then
				echo "sm90a: $f includes \"$inc\" ($target), a file the stamp does not cover (only $sm90a_kernels/ and $sm90a_dir/ files are hashed)" >&2
				bad=1
			fi
		done < <(sed -nE 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"([^"]*)".*/\1/p' "$sm90a_root/$f")
	done
	return $bad
}

# sm90a_stamp_text prints the stamp for the current sources, given nvcc's release line and the
# cubin's path.
sm90a_stamp_text() {
	local nvcc_release=$1 cubin=$2 f
	echo "# $sm90a_cubin: rebuild with scripts/build-sm90a.sh on the GPU machine"
	echo "nvcc: $nvcc_release"
	echo "flags: $sm90a_flags $sm90a_unit"
	for f in $(sm90a_sources); do
		echo "source: $(cd "$sm90a_root" && sha256sum "$f" | cut -d' ' -f1) $f"
	done
	echo "cubin: $(sha256sum "$cubin" | cut -d' ' -f1)"
}
