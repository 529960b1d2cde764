//go:build unix

package nifti

import (
	"os"
	"syscall"
)

// mapFile maps a file read-only (page cache, no copy), or reads it into the heap when it is not
// an OS file (tests).
func mapFile(f dataFile, size int64) ([]byte, func() error, error) {
	osf, ok := f.(*os.File)
	if !ok || size <= 0 || int64(int(size)) != size {
		return readFileAt(f, size)
	}
	b, err := syscall.Mmap(int(osf.Fd()), 0, int(size), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return readFileAt(f, size)
	}
	return b, func() error { return syscall.Munmap(b) }, nil
}

// allocAnon allocates n bytes outside the Go heap (a volume-sized buffer in the heap would set
// the garbage collector's goal to twice its size), with transparent huge pages where the
// kernel allows them (far fewer page faults as the inflate first writes it), unless
// VOXPIPE_HUGEPAGES=0, as for the pipeline's buffers.
func allocAnon(n int) ([]byte, func() error, error) {
	b, err := syscall.Mmap(-1, 0, max(n, 1), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		return nil, nil, err
	}
	if n >= 4<<20 && os.Getenv("VOXPIPE_HUGEPAGES") != "0" {
		_ = syscall.Madvise(b, syscall.MADV_HUGEPAGE) // advice only
	}
	return b[:n], func() error { return syscall.Munmap(b) }, nil
}
