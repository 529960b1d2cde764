//go:build cuda

package cuda

import (
	"fmt"
	"unsafe"

	"gorgonia.org/cu"

	"voxpipe/engine/cuda/kernels"
	"voxpipe/model"
)

// A slab's work goes onto the engine's streams in three phases, ordered by its events
// (slabEvents):
//
//	upload   h2d stream      once slab k-2's conv1 has read the input slot: the input planes
//	                         with their halo into input slot k%2
//	kernels  compute stream  once the upload is done and slab k-2's labels have left the label
//	                         slot: the precision's kernel set, labels into label slot k%2;
//	                         then (after k1) count_confidence, the confidence counters from the
//	                         labels and the fused kernel's logits: the download does not wait
//	                         for it, and its time is in no event's span
//	download d2h stream      once the kernels are done: the labels into the caller's mask
//
// Slabs k and k+2 share buffer slots, so slab k+1's upload and slab k-1's download overlap
// slab k's kernels.

// slabEvents are the CUDA events of one slab, in stream order.
type slabEvents struct {
	h2d0, h2d1             cu.Event // upload
	k0, c1, c2, cg, k1     cu.Event // kernels: start, after conv1, conv2, convg, gate_head (fp16: c1, c2, cg, k1 after the fused kernel)
	d2h0, d2h1             cu.Event // download
	inputBytes, labelBytes int64
	voxels                 int64
}

func (s *slabEvents) list() []*cu.Event {
	return []*cu.Event{&s.h2d0, &s.h2d1, &s.k0, &s.c1, &s.c2, &s.cg, &s.k1, &s.d2h0, &s.d2h1}
}

// slabJob is one slab on its way onto the streams.
type slabJob struct {
	vol         *model.Volume
	p           slabPlan
	slab        int64 // planes of the volume's largest slab: the depth of e, s and g
	plane, elem int64 // voxels per plane, bytes per input voxel
	ev          *slabEvents
	prev        *slabEvents // the slab that used the same buffer slots (k-2); nil for the first two
	in, lab     devBuf      // the slab's input and label slots
	logits      devBuf      // its slot of the fused kernel's logits (unallocated for fp32)
	compute     cu.Stream   // the stream its kernels run on
}

// enqueue puts slab p's upload, kernels and download on the streams. host is the volume's
// first voxel, outHost the mask's.
func (e *cudaEngine) enqueue(vol *model.Volume, p slabPlan, slab, plane, elem int64, host, outHost unsafe.Pointer) error {
	k := p.index
	slot := k % 2
	j := &slabJob{vol: vol, p: p, slab: slab, plane: plane, elem: elem, ev: &e.ring[k],
		in: e.bufs.in[slot], lab: e.bufs.lab[slot], logits: e.bufs.logits[slot], compute: e.computeStream(slot)}
	j.ev.inputBytes, j.ev.labelBytes, j.ev.voxels = p.inputBytes, p.labelBytes, p.outputVoxels
	if k >= 2 {
		j.prev = &e.ring[k-2]
	}
	if err := e.enqueueUpload(j, host); err != nil {
		return err
	}
	if err := e.enqueueKernels(j); err != nil {
		return err
	}
	return e.enqueueDownload(j, outHost)
}

// computeStream is the stream the kernels of the slabs using buffer slot run on. The fused
// kernel touches nothing but its slot's buffers, so consecutive slabs go on two streams: slab
// k+1's blocks fill the SMs that slab k's last wave leaves idle (1024 blocks of a 512x512 slab
// are 7.76 waves on 132 SMs). The fp32 kernels share e, s and g: one stream.
func (e *cudaEngine) computeStream(slot int) cu.Stream {
	if e.fused {
		return e.compute[slot]
	}
	return e.compute[0]
}

// step wraps the error of one driver call of j's enqueue, recording a sticky one (fail).
func (e *cudaEngine) step(j *slabJob, what string, err error) error {
	if err != nil {
		return e.fail(fmt.Errorf("slab %d: %s: %w", j.p.index, what, err))
	}
	return nil
}

// enqueueUpload puts the upload of j's input planes on the h2d stream.
func (e *cudaEngine) enqueueUpload(j *slabJob, host unsafe.Pointer) error {
	if j.prev != nil {
		if err := e.step(j, "wait", e.h2d.Wait(j.prev.c1, 0)); err != nil {
			return err
		}
	}
	if e.poison {
		if err := e.step(j, "poison", cu.MemsetD8Async(j.in.ptr(), 0xFF, j.in.size, e.h2d)); err != nil {
			return err
		}
	}
	if err := e.step(j, "record", j.ev.h2d0.Record(e.h2d)); err != nil {
		return err
	}
	src := unsafe.Add(host, j.p.inputOffset)
	dst := j.in.ptr() + cu.DevicePtr(j.p.bufferPlaneOff*j.plane*j.elem)
	if err := e.step(j, "upload", cu.MemcpyHtoDAsync(dst, src, j.p.inputBytes, e.h2d)); err != nil {
		return err
	}
	return e.step(j, "record", j.ev.h2d1.Record(e.h2d))
}

// enqueueKernels puts j's kernels on its compute stream, between events k0 and k1.
func (e *cudaEngine) enqueueKernels(j *slabJob) error {
	if err := e.step(j, "wait", j.compute.Wait(j.ev.h2d1, 0)); err != nil {
		return err
	}
	if j.prev != nil {
		if err := e.step(j, "wait", j.compute.Wait(j.prev.d2h1, 0)); err != nil {
			return err
		}
	}
	if e.poison {
		if err := e.poisonScratch(j); err != nil {
			return err
		}
	}
	if err := e.step(j, "record", j.ev.k0.Record(j.compute)); err != nil {
		return err
	}
	if e.fused {
		return e.launchFused(j)
	}
	return e.launchFP32(j)
}

// poisonScratch fills e, s, g (NaN) and j's label slot with garbage before its kernels run, so
// that tests see any voxel the kernels fail to write.
func (e *cudaEngine) poisonScratch(j *slabJob) error {
	for _, b := range []devBuf{e.bufs.featE, e.bufs.featS, e.bufs.featG} {
		if b.base == 0 {
			continue // the fp16 engine has none
		}
		if err := e.step(j, "poison", cu.MemsetD8Async(b.ptr(), 0xFF, b.size, j.compute)); err != nil {
			return err
		}
	}
	return e.step(j, "poison", cu.MemsetD8Async(j.lab.ptr(), 0xEE, j.lab.size, j.compute))
}

// launchFused launches the fused fp16 kernel on j; its events c1, c2, cg and k1 all mark its
// end (c1 is what the next upload into this input slot waits for, k1 the download), then
// count_confidence, off the download's path: it only reads the labels, as the download does.
func (e *cudaEngine) launchFused(j *slabJob) error {
	vol, w := j.vol, e.weights
	nx, ny, nz := int32(vol.NX), int32(vol.NY), int32(vol.NZ)
	nzOut := int32(j.p.z1 - j.p.z0)
	zChunk := kernels.FusedZChunk(nx, ny, nzOut, e.mod.FusedGeometry().Rows, e.sms)
	logits := j.logits.ptr()
	if err := e.step(j, "fused", e.mod.Fused(j.compute, vol.I16 != nil, j.in.ptr(), j.lab.ptr(), logits, w.Fused,
		nx, ny, nz, int32(j.p.z0), nzOut, zChunk, vol.Norm.Scale, vol.Norm.Shift, w.Classes)); err != nil {
		return err
	}
	for _, x := range []cu.Event{j.ev.c1, j.ev.c2, j.ev.cg, j.ev.k1} {
		if err := e.step(j, "record", x.Record(j.compute)); err != nil {
			return err
		}
	}
	return e.countConfidence(j, logits)
}

// countConfidence adds j's slab to the confidence counters, on its compute stream after its
// kernels (k1): its labels, and the margins of its sampled planes from logits when it is not 0
// (the fused kernel's; gate_head counts its own). Slab k+2's kernels, on the same stream, come
// after it: they reuse its label and logit slots.
func (e *cudaEngine) countConfidence(j *slabJob, logits cu.DevicePtr) error {
	return e.step(j, "count_confidence", e.mod.CountConfidence(j.compute, j.lab.ptr(), logits, e.bufs.conf.ptr(), j.plane,
		int32(j.p.z0), int32(j.p.z1-j.p.z0), e.weights.Classes))
}

// launchFP32 launches the four float32 kernels on j, each followed by its event.
func (e *cudaEngine) launchFP32(j *slabJob) error {
	vol, w, b := j.vol, e.weights, &e.bufs
	nx, ny, nz := int32(vol.NX), int32(vol.NY), int32(vol.NZ)
	nzOut := int32(j.p.z1 - j.p.z0)
	slab := int32(j.slab)
	ePlanes := kernels.EPlanes(slab)
	conv1 := e.mod.Conv1F32
	if vol.I16 != nil {
		conv1 = e.mod.Conv1I16
	}
	// conv1 computes e for the output planes and 2 more on each side, which the dilated conv reads.
	if err := e.step(j, "conv1", conv1(j.compute, j.in.ptr(), b.featE.ptr(), nx, ny, nz, int32(j.p.z0-2), nzOut+4, ePlanes,
		vol.Norm.Scale, vol.Norm.Shift)); err != nil {
		return err
	}
	if err := e.step(j, "record", j.ev.c1.Record(j.compute)); err != nil {
		return err
	}
	if err := e.step(j, "conv2", e.mod.Conv2(j.compute, b.featE.ptr(), w.W2, w.B2, b.featS.ptr(), nx, ny, ePlanes, nzOut, slab)); err != nil {
		return err
	}
	if err := e.step(j, "record", j.ev.c2.Record(j.compute)); err != nil {
		return err
	}
	if err := e.step(j, "convg", e.mod.ConvG(j.compute, b.featE.ptr(), w.WG, w.BG, b.featG.ptr(), nx, ny, ePlanes, nzOut, slab)); err != nil {
		return err
	}
	if err := e.step(j, "record", j.ev.cg.Record(j.compute)); err != nil {
		return err
	}
	if err := e.step(j, "gate_head", e.mod.GateHead(j.compute, b.featS.ptr(), b.featG.ptr(), j.lab.ptr(), b.conf.ptr(), nx, ny, int32(j.p.z0), nzOut, slab, w.Classes)); err != nil {
		return err
	}
	if err := e.step(j, "record", j.ev.k1.Record(j.compute)); err != nil {
		return err
	}
	return e.countConfidence(j, 0)
}

// enqueueDownload puts the download of j's labels on the d2h stream, after its kernels.
func (e *cudaEngine) enqueueDownload(j *slabJob, outHost unsafe.Pointer) error {
	if err := e.step(j, "wait", e.d2h.Wait(j.ev.k1, 0)); err != nil {
		return err
	}
	if err := e.step(j, "record", j.ev.d2h0.Record(e.d2h)); err != nil {
		return err
	}
	dst := unsafe.Add(outHost, int64(j.p.z0)*j.plane)
	if err := e.step(j, "download", cu.MemcpyDtoHAsync(dst, j.lab.ptr(), j.p.labelBytes, e.d2h)); err != nil {
		return err
	}
	return e.step(j, "record", j.ev.d2h1.Record(e.d2h))
}
