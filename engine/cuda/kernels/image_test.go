package kernels

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

// Only the kernels the default path runs are embedded: the fatbin. Lab images (the sm_90a cubin)
// load from a file through EnvKernels.
func TestOnlyTheFatbinIsEmbedded(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("*.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("the package's Go files: %v, %v", files, err)
	}
	var embeds []string
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range regexp.MustCompile(`(?m)^//go:embed (.+)$`).FindAllStringSubmatch(string(src), -1) {
			embeds = append(embeds, f+": "+m[1])
		}
	}
	if len(embeds) != 1 || embeds[0] != "fatbin.go: voxpipe.fatbin" {
		t.Errorf("embedded: %q, want only fatbin.go: voxpipe.fatbin", embeds)
	}
	if !bytes.HasPrefix(Fatbin, []byte{0x50, 0xed, 0x55, 0xba}) {
		t.Errorf("Fatbin does not start with the fatbin magic: % x", Fatbin[:min(4, len(Fatbin))])
	}
}

func TestChooseImage(t *testing.T) {
	t.Parallel()
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
		{9, 0, "", "fatbin", "sm_90 SASS, nvcc 11.8", true},
	} {
		img, auto, err := ChooseImage(c.major, c.minor, c.env)
		if err != nil || img.Name != c.name || img.Code != c.code || auto != c.auto {
			t.Errorf("ChooseImage(%d, %d, %q) = %v, %v, %v; want %s (%s), %v", c.major, c.minor, c.env, img, auto, err, c.name, c.code, c.auto)
		}
	}
	if img, _, _ := ChooseImage(8, 6, "fatbin"); !bytes.Equal(img.data, Fatbin) {
		t.Error("fatbin: not the embedded fatbin")
	}
	// The sm_90a cubin is not embedded: the old keyword says to name its file, on every device.
	for _, cc := range [][2]int{{9, 0}, {8, 9}} {
		if _, _, err := ChooseImage(cc[0], cc[1], "sm90a"); !errors.Is(err, ErrUnsupported) {
			t.Errorf("sm90a on %d.%d: %v, want ErrUnsupported", cc[0], cc[1], err)
		}
	}
	// Anything else is a file to load.
	path := filepath.Join(t.TempDir(), "dev.cubin")
	if err := os.WriteFile(path, []byte("\x7fELF test"), 0o644); err != nil {
		t.Fatal(err)
	}
	img, auto, err := ChooseImage(8, 0, path)
	if err != nil || auto || img.Name != path || string(img.data) != "\x7fELF test" {
		t.Errorf("ChooseImage(file) = %v, %v, %v", img, auto, err)
	}
	if _, _, err := ChooseImage(9, 0, filepath.Join(t.TempDir(), "missing.cubin")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v, want os.ErrNotExist", err)
	}
}
