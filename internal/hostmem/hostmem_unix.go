//go:build unix

// Package hostmem owns budgeted host memory: large buffers allocated outside the Go heap
// (anonymous mmap, advised to use transparent huge pages: volume-sized buffers inside the heap
// would set the garbage collector's goal to twice their size), reusable Buffers that grow to
// the largest size asked, bounded Pools of them, and the Budget that bounds the bytes they
// hold.
package hostmem

import (
	"fmt"
	"os"
	"syscall"
)

// Map returns n bytes of zeroed anonymous memory (at least one page is mapped, also for n = 0).
// For 4 MiB and more it advises transparent huge pages where the kernel allows them (512 times
// fewer page faults when the memory is first written, and fewer pages to page-lock,
// docs/perf.md), unless VOXPIPE_HUGEPAGES=0,
// for hosts whose kernel stalls on memory compaction. Release it with Unmap.
func Map(n int) ([]byte, error) {
	if n < 0 {
		return nil, fmt.Errorf("hostmem: mmap of %d bytes", n)
	}
	b, err := syscall.Mmap(-1, 0, max(n, 1), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		return nil, fmt.Errorf("hostmem: mmap %d bytes: %w", n, err)
	}
	if n >= 4<<20 && os.Getenv("VOXPIPE_HUGEPAGES") != "0" {
		_ = syscall.Madvise(b, syscall.MADV_HUGEPAGE) // advice only
	}
	return b[:n], nil
}

// MapFile maps the first n bytes of f read-only (shared: the page cache's own pages, nothing
// copied), with the kernel asked to read ahead the whole range. Reading the memory faults
// (SIGBUS) where the file has meanwhile been cut shorter than n: callers read it with
// runtime/debug.SetPanicOnFault set and recover. Release it with Unmap.
func MapFile(f *os.File, n int) ([]byte, error) {
	if n <= 0 {
		return nil, fmt.Errorf("hostmem: mmap of %d bytes of %s", n, f.Name())
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return nil, fmt.Errorf("hostmem: mmap %s: %w", f.Name(), err)
	}
	var b []byte
	var merr error
	if err := rc.Control(func(fd uintptr) {
		b, merr = syscall.Mmap(int(fd), 0, n, syscall.PROT_READ, syscall.MAP_SHARED)
	}); err != nil {
		return nil, fmt.Errorf("hostmem: mmap %s: %w", f.Name(), err)
	}
	if merr != nil {
		return nil, fmt.Errorf("hostmem: mmap %s: %w", f.Name(), merr)
	}
	_ = syscall.Madvise(b, syscall.MADV_WILLNEED) // advice only: start reading a cold file
	return b, nil
}

// Unmap releases memory from Map or MapFile (b as returned, or any reslice of it from its
// start).
func Unmap(b []byte) error {
	if err := syscall.Munmap(b[:cap(b)]); err != nil {
		return fmt.Errorf("hostmem: munmap: %w", err)
	}
	return nil
}
