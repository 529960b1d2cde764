package cpu

import (
	"unsafe"

	"voxpipe/internal/hostmem"
)

// slabBuf is grow for the slab buffers (tens of MiB at 512x512): from 4 MiB on, a mapping
// with transparent huge pages advised (hostmem.Map), which the workers' first writes fault in
// 512 times less often than the heap's 4 KiB pages, faults that contend on the kernel's
// memory map lock and kept a one-volume run from scaling with its cores. m holds the mapping.
func (e *Engine) slabBuf(m *[]byte, buf []float32, n int) []float32 {
	if cap(buf) >= n {
		return buf[:n]
	}
	if n*4 < 4<<20 {
		return make([]float32, n)
	}
	b, err := hostmem.Map(n * 4)
	if err != nil { // no mmap here: the heap
		return make([]float32, n)
	}
	if *m != nil {
		hostmem.Unmap(*m)
	}
	*m = b
	return unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), n)
}

func grow(buf []float32, n int) []float32 {
	if cap(buf) < n {
		return make([]float32, n)
	}
	return buf[:n]
}

// packWide lays out the weight rows of blocks 2p and 2p+1 (rows rows each, one block after
// the other in w) side by side, for the AVX-512 kernels: row j of pair p is
// w[2p*rows+j] followed by w[(2p+1)*rows+j]. An odd last block is left out (the AVX2 kernels
// do it).
func packWide(w [][block]float32, rows int) [][wide]float32 {
	pairs := len(w) / rows / 2
	out := make([][wide]float32, pairs*rows)
	for p := range pairs {
		for j := range rows {
			copy(out[p*rows+j][:block], w[2*p*rows+j][:])
			copy(out[p*rows+j][block:], w[(2*p+1)*rows+j][:])
		}
	}
	return out
}

// paddedCounts is n int64 counters with a cache line of padding on each side, so that workers'
// counters, allocated one after another, never share a line (false sharing).
func paddedCounts(n int) []int64 { return make([]int64, 8+n+8)[8 : 8+n : 8+n] }
