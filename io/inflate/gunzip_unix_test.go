//go:build unix

package inflate

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// A memory-mapped src that faults makes Gunzip fail with ErrFault instead of crashing the
// process: a file cut short before the call (its trailer gone: the caller's goroutine
// faults), and pages made unreadable in the middle of the data (the decoding goroutines whose
// chunks cover them fault, then the in-order decoding that stands in for those chunks).
func TestGunzipMappedFault(t *testing.T) {
	smallChunks(t, 16<<10, 64<<10)
	data := volumeLike(4<<20, 31)
	gz := stdGzip(6)(data)
	for _, how := range []string{"file cut short", "pages unreadable"} {
		t.Run(how, func(t *testing.T) {
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
			if how == "file cut short" {
				if err := os.Truncate(path, int64(len(gz)/4)); err != nil {
					t.Fatal(err)
				}
			} else {
				page := os.Getpagesize()
				mid := len(gz) / 2 / page * page
				if err := syscall.Mprotect(src[mid:mid+16*page], syscall.PROT_NONE); err != nil {
					t.Skip("mprotect:", err)
				}
			}
			err = GunzipContext(context.Background(), src, make([]byte, len(data)), 4)
			if !errors.Is(err, ErrFault) {
				t.Errorf("got %v, want ErrFault", err)
			}
		})
	}
}
