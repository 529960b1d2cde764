package nifti

import (
	"errors"
	"fmt"
	"io"
)

// gzipCut adds to a truncation error that the data file's gzip stream ends early (cut: the
// stream ended with io.ErrUnexpectedEOF, the compressed file is cut short), as opposed to a
// whole stream of too few bytes.
func gzipCut(err error, cut bool) error {
	if !cut {
		return err
	}
	return fmt.Errorf("%w; the gzip stream ends early (the compressed file is cut short)", err)
}

// truncatedAt describes data that ends after have bytes of the selected volume.
func (r *Reader) truncatedAt(have int64) error {
	vol := ""
	if r.g.volumes > 1 {
		vol = fmt.Sprintf(" of volume %d", r.volume)
	}
	if have < 0 {
		return fmt.Errorf("%w: the file ends before volume %d", ErrTruncated, r.volume)
	}
	z := r.lay.SliceAt(have)
	return fmt.Errorf("%w: the data ends inside z-slice %d of %d%s (%d of %d bytes)", ErrTruncated, z, r.g.nz, vol, have, r.g.volBytes)
}

// ReadSlicesRaw reads the next n z-slices (fewer at the end of the volume) as stored bytes in
// host byte order into dst, which must hold them. It returns the number of slices read, and
// 0, io.EOF when none are left. After an error the contents of dst are undefined and every
// later call returns the same error; the one exception is a gzip checksum failure detected
// after the last slice, returned together with its count.
func (r *Reader) ReadSlicesRaw(dst []byte, n int) (int, error) {
	k, err := r.claim(n, len(dst)/r.g.elemSize)
	if k == 0 {
		return 0, err
	}
	if err := r.readHost(dst[:int64(k)*r.g.sliceBytes]); err != nil {
		return 0, err
	}
	return r.advance(k)
}

// ReadSlicesFloat32 is ReadSlicesRaw for any datatype, with the stored values converted to
// float32 (no scaling; see Scaling). int32, uint32 and float64 values round to float32.
func (r *Reader) ReadSlicesFloat32(dst []float32, n int) (int, error) {
	return readSlicesAs(r, dst, n, Float32, decodeFloat32)
}

// ReadSlicesInt16 is ReadSlicesRaw with the stored values as int16. Only files whose datatype
// converts exactly (Int16Exact: int16, uint8, int8) are accepted; others get an error wrapping
// ErrUnsupportedDatatype.
func (r *Reader) ReadSlicesInt16(dst []int16, n int) (int, error) {
	if !Int16Exact(r.g.dt) {
		return 0, fmt.Errorf("read %s: %w: %s is not representable as int16", r.dataPath, ErrUnsupportedDatatype, r.g.dt)
	}
	return readSlicesAs(r, dst, n, Int16, decodeInt16)
}

// readSlicesAs reads slices into typed samples: straight into dst when the file stores that
// type (native), else through the scratch buffer and decode.
func readSlicesAs[T int16 | float32](r *Reader, dst []T, n int, native DataType, decode func([]T, []byte, DataType)) (int, error) {
	k, err := r.claim(n, len(dst))
	if k == 0 {
		return 0, err
	}
	out := dst[:k*r.g.sliceVoxels]
	if r.g.dt == native {
		err = r.readHost(bytesOf(out))
	} else {
		err = r.readConverted(len(out), func(raw []byte, at, count int) {
			decode(out[at:at+count], raw, r.g.dt)
		})
	}
	if err != nil {
		return 0, err
	}
	return r.advance(k)
}

// claim checks the call and returns how many slices it will read.
func (r *Reader) claim(n, dstVoxels int) (int, error) {
	switch {
	case r.closed:
		return 0, fmt.Errorf("read %s: reader is closed", r.path)
	case r.err != nil:
		return 0, r.err
	case n < 1:
		return 0, fmt.Errorf("read %s: asked for %d slices", r.path, n)
	case r.next == r.g.nz:
		return 0, io.EOF
	}
	k := min(n, r.g.nz-r.next)
	if dstVoxels < k*r.g.sliceVoxels {
		return 0, fmt.Errorf("read %s: buffer of %d voxels is too small for %d slices of %d: %w", r.path, dstVoxels, k, r.g.sliceVoxels, io.ErrShortBuffer)
	}
	return k, nil
}

// advance accounts for k slices read and, after the last one of a gzip file, collects the
// read-ahead's verdict on the trailer checksum.
func (r *Reader) advance(k int) (int, error) {
	r.next += k
	if r.next < r.g.nz || r.ahead == nil {
		return k, nil
	}
	if _, err := r.ahead.Read(nil); err != io.EOF {
		r.err = fmt.Errorf("read %s: %w", r.dataPath, classifyStreamErr(err, "gzip trailer"))
		return k, r.err
	}
	return k, nil
}

// readHost fills b with the next stored bytes, in host order.
func (r *Reader) readHost(b []byte) error {
	if err := r.readFull(b); err != nil {
		return err
	}
	if r.swap {
		swapBytes(b, r.g.elemSize)
	}
	return nil
}

// readConverted reads count samples in cache-sized chunks through the scratch buffer and hands
// each chunk, in host order, to convert.
func (r *Reader) readConverted(count int, convert func(raw []byte, at, count int)) error {
	const chunkBytes = 256 << 10
	if r.scratch == nil {
		r.scratch = make([]uint64, chunkBytes/8) // []uint64: aligned for every sample type
	}
	chunk := chunkBytes / r.g.elemSize
	raw := bytesOf(r.scratch)
	for at := 0; at < count; at += chunk {
		m := min(chunk, count-at)
		b := raw[:m*r.g.elemSize]
		if err := r.readHost(b); err != nil {
			return err
		}
		convert(b, at, m)
	}
	return nil
}

func (r *Reader) readFull(b []byte) error {
	n, err := io.ReadFull(r.in, b)
	r.pos += int64(n)
	if err == nil {
		return nil
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		// io.ReadFull turns a short read's io.EOF into io.ErrUnexpectedEOF; the read-ahead
		// keeps the gzip stream's own error.
		cut := r.ahead != nil && errors.Is(r.ahead.err, io.ErrUnexpectedEOF)
		r.err = fmt.Errorf("read %s: %w", r.dataPath, gzipCut(r.truncatedAt(r.pos), cut))
	} else {
		z := r.lay.SliceAt(r.pos)
		r.err = fmt.Errorf("read %s: %w", r.dataPath, classifyStreamErr(err, fmt.Sprintf("data (z-slice %d of %d)", z, r.g.nz)))
	}
	return r.err
}
