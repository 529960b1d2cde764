//go:build cuda

package cuda

import (
	"fmt"
	"unsafe"

	"gorgonia.org/cu"

	"voxpipe/engine/cuda/kernels"
	"voxpipe/model"
)

// The engine's device buffers: allocated once, grown only for a larger volume or slab, each
// with guard regions that tests read back (checkGuards) to catch a kernel or copy writing out
// of bounds.

const (
	guardBytes   = 4096 // guard regions around every device buffer the kernels write
	guardPattern = 0xA5
)

// devBuf is a device allocation with guardBytes of guardPattern on each side of its size usable
// bytes, so a kernel writing out of bounds shows in checkGuards.
type devBuf struct {
	base cu.DevicePtr
	size int64
}

func (b devBuf) ptr() cu.DevicePtr { return b.base + guardBytes }

// deviceBuffers are the engine's device memory. Slab k uses input and label slot k%2; the
// float32 kernels' intermediates, the network's tensors e, s and g (package doc), are single,
// and unallocated for the fused kernel, which keeps them on chip.
type deviceBuffers struct {
	in                  [2]devBuf // input slabs with halo, int16 or float32
	featE, featS, featG devBuf
	lab                 [2]devBuf // label slabs
	logits              [2]devBuf // the fused kernel's logits of a label slab's sampled planes
	conf                devBuf    // the volume's confidence counters (kernels.ConfLen uint64)
}

// all lists the buffers in the order of bufferNames.
func (d *deviceBuffers) all() []*devBuf {
	return []*devBuf{&d.in[0], &d.in[1], &d.featE, &d.featS, &d.featG, &d.lab[0], &d.lab[1], &d.logits[0], &d.logits[1], &d.conf}
}

// bufferNames names deviceBuffers.all's buffers in errors.
var bufferNames = []string{"input 0", "input 1", "e", "s", "g", "labels 0", "labels 1", "logits 0", "logits 1", "confidence"}

// ensureBuffers grows the device buffers to hold slabs of slab planes of the given plane size
// and input element size; buffers already large enough are kept.
func (e *cudaEngine) ensureBuffers(slab, plane, elem int64) error {
	c, logits := int64(kernels.Channels), int64(0)
	if e.fused {
		c = 0 // e, s and g stay on chip
		logits = kernels.FusedLogitBytes(slab, plane, e.weights.Classes)
	}
	need := map[*devBuf]int64{
		&e.bufs.in[0]:     (slab + 2*model.Halo) * plane * elem,
		&e.bufs.in[1]:     (slab + 2*model.Halo) * plane * elem,
		&e.bufs.featE:     c * int64(kernels.EPlanes(int32(slab))) * plane * 4,
		&e.bufs.featS:     c * slab * plane * 4,
		&e.bufs.featG:     c * slab * plane * 4,
		&e.bufs.lab[0]:    slab * plane,
		&e.bufs.lab[1]:    slab * plane,
		&e.bufs.logits[0]: logits,
		&e.bufs.logits[1]: logits,
		&e.bufs.conf:      8 * kernels.ConfLen,
	}
	grew := false
	for _, b := range e.bufs.all() {
		n := need[b]
		if b.size >= n {
			continue
		}
		if b.base != 0 {
			if err := cu.MemFree(b.base); err != nil {
				return e.fail(fmt.Errorf("free device buffer: %w", err))
			}
			*b = devBuf{}
		}
		base, err := cu.MemAlloc(n + 2*guardBytes)
		if err != nil {
			free, total, _ := cu.MemInfo()
			return fmt.Errorf("%s: allocate %d MiB of device memory (%d MiB free of %d; try a thinner slab): %w",
				e.name, (n+2*guardBytes)>>20, free>>20, total>>20, err)
		}
		*b = devBuf{base: base, size: n}
		if err := cu.MemsetD8(b.base, guardPattern, guardBytes); err != nil {
			return e.fail(fmt.Errorf("fill guard: %w", err))
		}
		if err := cu.MemsetD8(b.ptr()+cu.DevicePtr(n), guardPattern, guardBytes); err != nil {
			return e.fail(fmt.Errorf("fill guard: %w", err))
		}
		grew = true
	}
	if grew {
		// The guards were set on the legacy default stream, which the engine's non-blocking
		// streams do not wait for.
		if err := cu.Synchronize(); err != nil {
			return e.fail(fmt.Errorf("synchronize: %w", err))
		}
	}
	return nil
}

func (e *cudaEngine) freeBuffers() error {
	var first error
	for _, b := range e.bufs.all() {
		if b.base != 0 {
			if err := cu.MemFree(b.base); err != nil && first == nil {
				first = err
			}
			*b = devBuf{}
		}
	}
	return first
}

// checkGuards reads back every buffer's guard regions; an error names the first one a kernel
// or copy overwrote.
func (e *cudaEngine) checkGuards() error {
	return e.call(func() error {
		guard := make([]byte, guardBytes)
		for i, b := range e.bufs.all() {
			if b.base == 0 {
				continue
			}
			for side, at := range []cu.DevicePtr{b.base, b.ptr() + cu.DevicePtr(b.size)} {
				if err := cu.MemcpyDtoH(unsafe.Pointer(&guard[0]), at, guardBytes); err != nil {
					return fmt.Errorf("read guard of %s: %w", bufferNames[i], err)
				}
				for j, v := range guard {
					if v != guardPattern {
						return fmt.Errorf("guard %s of device buffer %s overwritten at byte %d: 0x%02x", []string{"before", "after"}[side], bufferNames[i], j, v)
					}
				}
			}
		}
		return nil
	})
}
