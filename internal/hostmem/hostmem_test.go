package hostmem

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// Map gives zeroed, writable memory of the asked length (a page for n = 0), which Unmap frees,
// also from a shorter reslice; negative lengths are refused.
func TestMapUnmap(t *testing.T) {
	t.Parallel()
	for _, n := range []int{0, 1, 4096, 5 << 20} {
		b, err := Map(n)
		if err != nil {
			t.Fatalf("Map(%d): %v", n, err)
		}
		if len(b) != n {
			t.Fatalf("Map(%d): %d bytes", n, len(b))
		}
		for i := 0; i < n; i += 4093 {
			if b[i] != 0 {
				t.Fatalf("Map(%d): byte %d is %d, not zero", n, i, b[i])
			}
			b[i] = byte(i)
		}
		if err := Unmap(b[:n/2]); err != nil {
			t.Fatalf("Unmap of Map(%d): %v", n, err)
		}
	}
	if _, err := Map(-1); err == nil {
		t.Error("Map(-1) succeeded")
	}
}

// MapFile maps a file's bytes as they are on disk; a length of 0 or less is refused.
func TestMapFile(t *testing.T) {
	t.Parallel()
	want := make([]byte, 3<<20+17)
	for i := range want {
		want[i] = byte(i * 13)
	}
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path, want, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := MapFile(f, len(want))
	if err != nil {
		if runtime.GOOS == "windows" || runtime.GOOS == "plan9" || runtime.GOOS == "js" || runtime.GOOS == "wasip1" {
			t.Skip("no mmap:", err)
		}
		t.Fatal(err)
	}
	if !bytes.Equal(b, want) {
		t.Error("mapped bytes differ from the file's")
	}
	if err := Unmap(b); err != nil {
		t.Error(err)
	}
	if _, err := MapFile(f, 0); err == nil {
		t.Error("MapFile of 0 bytes succeeded")
	}
}
