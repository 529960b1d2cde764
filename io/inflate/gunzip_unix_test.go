//go:build unix

package inflate

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
)

// A memory-mapped file cut short while it is inflated makes Gunzip fail with ErrFault instead
// of crashing the process: in the caller's goroutine (the file already shorter than its
// trailer) and in the decoding goroutines (cut while they wait for their chunks).
func TestGunzipMappedFileCutShort(t *testing.T) {
	smallChunks(t, 16<<10, 64<<10)
	data := volumeLike(4<<20, 31)
	gz := stdGzip(6)(data)
	for _, when := range []string{"before", "while decoding"} {
		t.Run(when, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "v.gz")
			if err := os.WriteFile(path, gz, 0o644); err != nil {
				t.Fatal(err)
			}
			f, err := os.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			src, err := syscall.Mmap(int(f.Fd()), 0, len(gz), syscall.PROT_READ, syscall.MAP_SHARED)
			if err != nil {
				t.Skip("mmap:", err)
			}
			defer syscall.Munmap(src)
			cut := func() {
				if err := os.Truncate(path, int64(len(gz)/4)); err != nil {
					t.Error(err)
				}
			}
			var ready func(int) error
			if when == "before" {
				cut()
			} else {
				// Cut once the decoders ask for the second half: the chunks there fault.
				var once sync.Once
				ready = func(n int) error {
					if n > len(gz)/2 {
						once.Do(cut)
					}
					return nil
				}
			}
			err = GunzipArriving(context.Background(), src, ready, make([]byte, len(data)), 4)
			if !errors.Is(err, ErrFault) {
				t.Errorf("got %v, want ErrFault", err)
			}
		})
	}
}
