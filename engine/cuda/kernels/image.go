package kernels

import (
	_ "embed"
	"fmt"
	"os"
	"strings"
)

// A kernel image is what a module is loaded from: the fatbin (every GPU from sm_80 on) or the
// sm_90a cubin (Hopper only). Choosing one needs no GPU, so it lives outside the cuda build.

// EnvKernels is the environment variable that overrides which kernel image LoadModuleFor
// loads: "fatbin", "sm90a", or the path of a cubin or fatbin file (kernel development: time a
// freshly built cubin before committing it). Empty or "auto": by device (ChooseImage).
const EnvKernels = "VOXPIPE_KERNELS"

// Image is a kernel image a module can be loaded from, and what the driver runs of it.
type Image struct {
	Name string // "sm_90a cubin", "fatbin", or a file's path
	Code string // what runs on the device: "sm_90a SASS, nvcc 13.0.88", "compute_80 PTX (JIT), nvcc 11.8"
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

func sm90aImage() Image {
	return Image{Name: "sm_90a cubin", Code: "sm_90a SASS, " + SM90aCompiler(), data: CubinSM90a}
}

// SM90aByDefault says whether a device of compute capability 9.0 loads the sm_90a cubin when
// EnvKernels does not say otherwise. The engine runs the same fused mma.sync kernel from either
// image (the cubin's wgmma convolutions are not faster as layers), and nvcc 11.8's sm_90 build of
// it measured 0.4-0.9 % faster than nvcc 13.0's sm_90a build, with identical labels, and loads no
// slower (docs/perf.md, issue 23): so Hopper, too, runs the fatbin until the cubin holds a faster
// kernel set.
const SM90aByDefault = false

// ChooseImage picks the kernel image for a device of compute capability major.minor: the
// sm_90a cubin on 9.0 (Hopper) when SM90aByDefault, the fatbin elsewhere. env (EnvKernels'
// value) overrides it: "fatbin", "sm90a" (refused on other devices), or a file to read. auto
// reports a choice made by device, which LoadModuleFor may still fall back from.
func ChooseImage(major, minor int, env string) (img Image, auto bool, err error) {
	switch env {
	case "", "auto":
		if major == 9 && minor == 0 && SM90aByDefault && len(CubinSM90a) > 0 {
			return sm90aImage(), true, nil
		}
		return fatbinImage(major, minor), true, nil
	case "fatbin":
		return fatbinImage(major, minor), false, nil
	case "sm90a":
		if major != 9 || minor != 0 {
			return Image{}, false, fmt.Errorf("%w: %s=sm90a on a device of compute capability %d.%d (sm_90a code runs on 9.0 only)",
				ErrUnsupported, EnvKernels, major, minor)
		}
		return sm90aImage(), false, nil
	}
	data, err := os.ReadFile(env)
	if err != nil {
		return Image{}, false, fmt.Errorf("kernels: %s: %w", EnvKernels, err)
	}
	return Image{Name: env, Code: "from " + EnvKernels, data: data}, false, nil
}

// CubinSM90a is kernels/sm90a/voxpipe_sm90a.cubin: every kernel of the fatbin, and the wgmma
// convolutions (kernels/sm90a/conv_wgmma.cu), compiled for sm_90a (Hopper) by the GPU machine's
// nvcc, which is newer than the fatbin's 11.8 (scripts/build-sm90a.sh). Its stamp, checked in CI
// (scripts/check-sm90a.sh), ties it to the sources.
//
//go:embed sm90a/voxpipe_sm90a.cubin
var CubinSM90a []byte

//go:embed sm90a/voxpipe_sm90a.stamp
var stampSM90a string

// SM90aCompiler is the nvcc that built CubinSM90a, from its stamp ("nvcc 13.0.88"), or "nvcc
// unknown" when the stamp has no such line.
func SM90aCompiler() string {
	for _, line := range strings.Split(stampSM90a, "\n") {
		rel, ok := strings.CutPrefix(line, "nvcc: ")
		if !ok {
			continue
		}
		// "release 13.0, V13.0.88"
		if i := strings.LastIndex(rel, ", V"); i >= 0 {
			return "nvcc " + rel[i+3:]
		}
		return "nvcc " + strings.TrimPrefix(rel, "release ")
	}
	return "nvcc unknown"
}
