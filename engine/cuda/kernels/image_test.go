package kernels

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
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

func TestChooseImage(t *testing.T) {
	for _, c := range []struct {
		major, minor int
		env          string
		name, code   string
		auto         bool
	}{
		{8, 0, "", "fatbin", "sm_80 SASS, nvcc 11.8", true},
		{8, 6, "auto", "fatbin", "sm_86 SASS, nvcc 11.8", true},
		{8, 9, "", "fatbin", "sm_89 SASS, nvcc 11.8", true},
		{8, 7, "", "fatbin", "sm_86 SASS, nvcc 11.8", true}, // sm_86's SASS runs on 8.7
		{10, 0, "", "fatbin", "compute_80 PTX (JIT), nvcc 11.8", true},
		{12, 0, "", "fatbin", "compute_80 PTX (JIT), nvcc 11.8", true},
		{9, 0, "fatbin", "fatbin", "sm_90 SASS, nvcc 11.8", false},
		{9, 0, "sm90a", "sm_90a cubin", "sm_90a SASS, " + SM90aCompiler(), false},
	} {
		img, auto, err := ChooseImage(c.major, c.minor, c.env)
		if err != nil || img.Name != c.name || img.Code != c.code || auto != c.auto {
			t.Errorf("ChooseImage(%d, %d, %q) = %v, %v, %v; want %s (%s), %v", c.major, c.minor, c.env, img, auto, err, c.name, c.code, c.auto)
		}
	}
	// Hopper by device: the policy constant decides.
	img, auto, err := ChooseImage(9, 0, "")
	want := "fatbin"
	if SM90aByDefault {
		want = "sm_90a cubin"
	}
	if err != nil || !auto || img.Name != want {
		t.Errorf("ChooseImage(9, 0, \"\") = %v, %v, %v; want the %s by device", img, auto, err, want)
	}
	if img, _, _ := ChooseImage(9, 0, "sm90a"); !bytes.Equal(img.data, CubinSM90a) {
		t.Error("sm90a: not the embedded cubin")
	}
	if img, _, _ := ChooseImage(8, 6, "fatbin"); !bytes.Equal(img.data, Fatbin) {
		t.Error("fatbin: not the embedded fatbin")
	}
	// sm_90a code runs on 9.0 only.
	if _, _, err := ChooseImage(8, 9, "sm90a"); !errors.Is(err, ErrUnsupported) {
		t.Errorf("sm90a on 8.9: %v, want ErrUnsupported", err)
	}
	// Anything else is a file to load.
	path := filepath.Join(t.TempDir(), "dev.cubin")
	if err := os.WriteFile(path, []byte("\x7fELF test"), 0o644); err != nil {
		t.Fatal(err)
	}
	img, auto, err = ChooseImage(8, 0, path)
	if err != nil || auto || img.Name != path || string(img.data) != "\x7fELF test" {
		t.Errorf("ChooseImage(file) = %v, %v, %v", img, auto, err)
	}
	if _, _, err := ChooseImage(9, 0, filepath.Join(t.TempDir(), "missing.cubin")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v, want os.ErrNotExist", err)
	}
}
