package kernels

import (
	"fmt"
	"os"
)

// A kernel image is what a module is loaded from: the embedded fatbin (every GPU from sm_80 on),
// or a cubin or fatbin file named by EnvKernels (kernel development, and the lab's sm_90a cubin,
// lab/wgmma, which is not embedded). Choosing one needs no GPU, so it lives outside the cuda
// build.

// EnvKernels is the environment variable that overrides which kernel image LoadModuleFor
// loads: "fatbin", or the path of a cubin or fatbin file (time a freshly built cubin before
// committing it; try the Hopper kernels: lab/wgmma/voxpipe_sm90a.cubin). Empty or "auto": by
// device (ChooseImage), which is the fatbin.
const EnvKernels = "VOXPIPE_KERNELS"

// Image is a kernel image a module can be loaded from, and what the driver runs of it.
type Image struct {
	Name string // "fatbin", or a file's path
	Code string // what runs on the device: "sm_90 SASS, nvcc 11.8", "compute_80 PTX (JIT), nvcc 11.8"
	data []byte
}

func (i Image) String() string { return i.Name + " (" + i.Code + ")" }

// fatbinCompiler is the nvcc the committed fatbin is built with (scripts/check-fatbin.sh).
const fatbinCompiler = "nvcc 11.8"

// fatbinSASS are the architectures the fatbin has SASS for (scripts/build-fatbin.sh), newest
// first. SASS for sm_XY runs on sm_XZ with Z >= Y; other GPUs JIT-compile its compute_80 PTX.
var fatbinSASS = []int{90, 89, 86, 80}

func fatbinImage(ccMajor, ccMinor int) Image {
	code := fmt.Sprintf("compute_80 PTX (JIT), %s", fatbinCompiler)
	for _, sm := range fatbinSASS {
		if sm/10 == ccMajor && sm%10 <= ccMinor {
			code = fmt.Sprintf("sm_%d SASS, %s", sm, fatbinCompiler)
			break
		}
	}
	return Image{Name: "fatbin", Code: code, data: Fatbin}
}

// sm90aKeyword was EnvKernels' name for the sm_90a cubin when it was embedded; it now says
// where the lab's cubin is.
const sm90aKeyword = "sm90a"

// ChooseImage picks the kernel image for a device of compute capability major.minor: the
// fatbin, with the SASS that runs there, or its PTX. env (EnvKernels' value) overrides it:
// "fatbin", or a file to read. auto reports a choice made by device.
func ChooseImage(major, minor int, env string) (img Image, auto bool, err error) {
	switch env {
	case "", "auto":
		return fatbinImage(major, minor), true, nil
	case "fatbin":
		return fatbinImage(major, minor), false, nil
	case sm90aKeyword:
		return Image{}, false, fmt.Errorf("%w: %s=sm90a: the sm_90a cubin is not built into voxpipe; set %s to its path (lab/wgmma/voxpipe_sm90a.cubin)",
			ErrUnsupported, EnvKernels, EnvKernels)
	}
	data, err := os.ReadFile(env)
	if err != nil {
		return Image{}, false, fmt.Errorf("kernels: %s: %w", EnvKernels, err)
	}
	return Image{Name: env, Code: "from " + EnvKernels, data: data}, false, nil
}
