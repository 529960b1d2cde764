package nifti

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"voxpipe/internal/regular"
)

// A FIFO where a volume's data should be (a .nii, or the .img of a .hdr) is refused at once,
// naming it: a plain open would block until a writer appears, forever.
func TestNonRegularFilesAreRefusedAtOnce(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	h := testHeader(Int16, 1, binary.LittleEndian, 4, 3, 2)
	pair := filepath.Join(dir, "pair.hdr")
	if err := Write(pair, h, make([]byte, 4*3*2*2), WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	img := filepath.Join(dir, "pair.img")
	os.Remove(img)
	fifoNii := filepath.Join(dir, "fifo.nii")
	for _, p := range []string{img, fifoNii} {
		if err := syscall.Mkfifo(p, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	calls := map[string]func() error{
		"Open .nii":          func() error { r, err := Open(fifoNii); closeReader(r); return err },
		"ReadHeader .nii":    func() error { _, err := ReadHeader(fifoNii); return err },
		"Open .hdr":          func() error { r, err := Open(pair); closeReader(r); return err },
		"CheckComplete .hdr": func() error { return CheckComplete(pair, h) },
	}
	for name, call := range calls {
		done := make(chan error, 1)
		go func() { done <- call() }()
		select {
		case err := <-done:
			if !errors.Is(err, regular.ErrNotRegular) {
				t.Errorf("%s: %v; want an error wrapping regular.ErrNotRegular", name, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s blocked on a FIFO", name)
		}
	}
}

func closeReader(r *Reader) {
	if r != nil {
		r.Close()
	}
}
