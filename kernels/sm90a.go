package kernels

import (
	_ "embed"
	"strings"
)

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
