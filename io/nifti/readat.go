package nifti

import (
	"errors"
	"fmt"
	"io"
	"sync"
)

// Positional reads. An uncompressed volume (.nii, .hdr/.img) can be read by z-range from
// several goroutines at once: each call reads its slices with ReadAt (pread) at their offset,
// converts them through its own scratch buffer, and touches no state of the Reader, so the
// calls are safe for concurrent use with each other (not with Close). They apply the same
// datatype conversions and byte-order rules as the sequential ReadSlices* (and, like them,
// no scaling), and rely on the same checks Open made of the header and the file's size; a
// file that has shrunk since is reported as ErrTruncated. Errors are not sticky. Gzipped data
// has no random access: the calls return an error wrapping ErrNotSeekable.

// Seekable reports whether the voxel data can be read by position (ReadSlices*At): true for
// uncompressed data.
func (r *Reader) Seekable() bool { return r.dataAt != nil }

// ReadSlicesRawAt reads z-slices z .. z+n-1 (fewer at the end of the volume) as stored bytes
// in host byte order into dst, which must hold them, and returns the number read; 0, io.EOF
// when z is the volume's depth. It does not move the sequential reading position.
func (r *Reader) ReadSlicesRawAt(dst []byte, z, n int) (int, error) {
	k, off, err := r.claimAt(z, n, len(dst)/r.g.elemSize)
	if k == 0 {
		return 0, err
	}
	if err := r.readHostAt(dst[:int64(k)*r.g.sliceBytes], off); err != nil {
		return 0, err
	}
	return k, nil
}

// ReadSlicesFloat32At is ReadSlicesRawAt with the values converted to float32, as
// ReadSlicesFloat32 converts them.
func (r *Reader) ReadSlicesFloat32At(dst []float32, z, n int) (int, error) {
	return readSlicesAtAs(r, dst, z, n, Float32, decodeFloat32)
}

// ReadSlicesInt16At is ReadSlicesRawAt with the values as int16, for the datatypes
// ReadSlicesInt16 accepts (Int16Exact); others get an error wrapping ErrUnsupportedDatatype.
func (r *Reader) ReadSlicesInt16At(dst []int16, z, n int) (int, error) {
	if !Int16Exact(r.g.dt) {
		return 0, fmt.Errorf("read %s: %w: %s is not representable as int16", r.dataPath, ErrUnsupportedDatatype, r.g.dt)
	}
	return readSlicesAtAs(r, dst, z, n, Int16, decodeInt16)
}

func readSlicesAtAs[T int16 | float32](r *Reader, dst []T, z, n int, native DataType, decode func([]T, []byte, DataType)) (int, error) {
	k, off, err := r.claimAt(z, n, len(dst))
	if k == 0 {
		return 0, err
	}
	out := dst[:k*r.g.sliceVoxels]
	if r.g.dt == native {
		if err := r.readHostAt(bytesOf(out), off); err != nil {
			return 0, err
		}
		return k, nil
	}
	scratch := scratchPool.Get().(*[]uint64)
	defer scratchPool.Put(scratch)
	raw := bytesOf(*scratch)
	chunk := len(raw) / r.g.elemSize
	for at := 0; at < len(out); at += chunk {
		m := min(chunk, len(out)-at)
		b := raw[:m*r.g.elemSize]
		if err := r.readHostAt(b, off+int64(at)*int64(r.g.elemSize)); err != nil {
			return 0, err
		}
		decode(out[at:at+m], b, r.g.dt)
	}
	return k, nil
}

// scratchPool holds the conversion buffers of positional reads: 256 KiB, []uint64 so that they
// are aligned for every sample type.
var scratchPool = sync.Pool{New: func() any {
	b := make([]uint64, (256<<10)/8)
	return &b
}}

// claimAt checks a positional call and returns how many slices it reads and from which file
// offset.
func (r *Reader) claimAt(z, n, dstVoxels int) (int, int64, error) {
	switch {
	case r.closed:
		return 0, 0, fmt.Errorf("read %s: reader is closed", r.path)
	case r.dataAt == nil:
		return 0, 0, fmt.Errorf("read %s: %w", r.dataPath, ErrNotSeekable)
	case n < 1:
		return 0, 0, fmt.Errorf("read %s: asked for %d slices", r.path, n)
	case z < 0 || z > r.g.nz:
		return 0, 0, fmt.Errorf("read %s: z-slice %d is outside the volume's %d", r.path, z, r.g.nz)
	case z == r.g.nz:
		return 0, 0, io.EOF
	}
	k := min(n, r.g.nz-z)
	if dstVoxels < k*r.g.sliceVoxels {
		return 0, 0, fmt.Errorf("read %s: buffer of %d voxels is too small for %d slices of %d: %w", r.path, dstVoxels, k, r.g.sliceVoxels, io.ErrShortBuffer)
	}
	off, _ := r.lay.Slab(r.volume, z, z+k)
	return k, off, nil
}

// readHostAt fills b with the stored bytes at file offset off, in host order.
func (r *Reader) readHostAt(b []byte, off int64) error {
	n, err := r.dataAt.ReadAt(b, off)
	if n < len(b) {
		start, _ := r.lay.Volume(r.volume)
		have := off - start + int64(n) // bytes of the volume before the read's end
		if err == nil || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return fmt.Errorf("read %s: %w", r.dataPath, r.truncatedAt(have))
		}
		z := r.lay.SliceAt(have)
		return fmt.Errorf("read %s: %w", r.dataPath, classifyStreamErr(err, fmt.Sprintf("data (z-slice %d of %d)", z, r.g.nz)))
	}
	if r.swap {
		swapBytes(b, r.g.elemSize)
	}
	return nil
}
