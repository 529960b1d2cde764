//go:build !unix

// Package hostmem owns budgeted host memory (see hostmem_unix.go); without mmap (not unix),
// its buffers are allocated in the Go heap.
package hostmem

import (
	"errors"
	"fmt"
	"os"
)

// Map returns n bytes of zeroed memory from the Go heap.
func Map(n int) ([]byte, error) {
	if n < 0 {
		return nil, fmt.Errorf("hostmem: allocation of %d bytes", n)
	}
	return make([]byte, n), nil
}

// MapFile is not available without mmap.
func MapFile(f *os.File, n int) ([]byte, error) {
	return nil, errors.New("hostmem: no mmap on this system")
}

// Unmap does nothing: the garbage collector frees the memory.
func Unmap([]byte) error { return nil }
