package kernels

import (
	"bytes"
	"testing"
)

func TestSM90aEmbedded(t *testing.T) {
	// A cubin is an ELF file; the check script ties its hash to the sources.
	if !bytes.HasPrefix(CubinSM90a, []byte("\x7fELF")) {
		t.Fatalf("CubinSM90a is not an ELF cubin (%d bytes)", len(CubinSM90a))
	}
	got := SM90aCompiler()
	if got == "nvcc unknown" || got == "nvcc " {
		t.Fatalf("SM90aCompiler() = %q from stamp %q", got, stampSM90a)
	}
	stamp := stampSM90a
	defer func() { stampSM90a = stamp }()
	stampSM90a = "nvcc: release 13.0, V13.0.88\n"
	if got := SM90aCompiler(); got != "nvcc 13.0.88" {
		t.Errorf("SM90aCompiler() = %q, want nvcc 13.0.88", got)
	}
	stampSM90a = "flags: x\n"
	if got := SM90aCompiler(); got != "nvcc unknown" {
		t.Errorf("SM90aCompiler() without an nvcc line = %q", got)
	}
}
