//go:build unix

package nifti

import (
	"os"
	"syscall"
)

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
