//go:build !unix

// Package hostmem allocates large host buffers; without mmap (not unix), in the Go heap.
package hostmem

import "fmt"

// Map returns n bytes of zeroed memory from the Go heap.
func Map(n int) ([]byte, error) {
	if n < 0 {
		return nil, fmt.Errorf("hostmem: allocation of %d bytes", n)
	}
	return make([]byte, n), nil
}

// Unmap does nothing: the garbage collector frees the memory.
func Unmap([]byte) error { return nil }
