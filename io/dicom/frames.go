package dicom

import (
	"compress/flate"
	"errors"
	"fmt"
	"io"
)

// checkPixels refuses pixel formats this package does not read, naming the reason.
func (f *File) checkPixels() error {
	switch {
	case !f.pixels.found:
		return ErrNoPixels
	case !f.Syntax.Decoded():
		return refuse(f.Syntax)
	case f.NumberOfFrames < 1:
		return fmt.Errorf("%w: Number of Frames is not a positive integer", ErrCorrupt)
	case f.Rows == 0 || f.Columns == 0 || f.BitsAllocated == 0:
		return fmt.Errorf("%w: pixel data without Rows, Columns or Bits Allocated", ErrCorrupt)
	case f.SamplesPerPixel != 1:
		return fmt.Errorf("%w: %d samples per pixel (%s); only greyscale images are read", ErrUnsupported, f.SamplesPerPixel, f.Photometric)
	case f.Photometric != "" && f.Photometric != "MONOCHROME1" && f.Photometric != "MONOCHROME2":
		return fmt.Errorf("%w: photometric interpretation %s; only greyscale images are read", ErrUnsupported, f.Photometric)
	case f.BitsAllocated != 8 && f.BitsAllocated != 16 && f.BitsAllocated != 32:
		return fmt.Errorf("%w: %d bits allocated per pixel; 8, 16 and 32 are read", ErrUnsupported, f.BitsAllocated)
	case f.BitsStored < 1 || f.BitsStored > f.BitsAllocated:
		return fmt.Errorf("%w: %d bits stored of %d allocated", ErrCorrupt, f.BitsStored, f.BitsAllocated)
	case f.Rows < 1 || f.Columns < 1:
		return fmt.Errorf("%w: %dx%d pixels", ErrCorrupt, f.Columns, f.Rows)
	}
	if f.pixels.encapsulated {
		if len(f.pixels.fragments) < f.NumberOfFrames {
			return fmt.Errorf("%w: %d fragments of encapsulated pixel data for %d frames", ErrCorrupt, len(f.pixels.fragments), f.NumberOfFrames)
		}
		return nil
	}
	if fb := f.frameBytes(); int64(f.NumberOfFrames) > f.pixels.native.n/fb {
		return fmt.Errorf("%w: pixel data holds %d bytes, %d frames of %dx%d %d-bit pixels need more", ErrTruncated, f.pixels.native.n, f.NumberOfFrames, f.Columns, f.Rows, f.BitsAllocated)
	}
	return nil
}

// readFrames reads all frames into dst (len: NumberOfFrames * frameBytes), host byte order.
func (f *File) readFrames(r io.ReaderAt, dst []byte) error {
	if int64(len(dst)) != f.frameBytes()*int64(f.NumberOfFrames) {
		return fmt.Errorf("%w: %d frames do not fit the %d-byte buffer", ErrCorrupt, f.NumberOfFrames, len(dst))
	}
	fb := f.frameBytes()
	return f.readFramesTo(r, func(i int) []byte { return dst[int64(i)*fb : int64(i+1)*fb] })
}

// readFramesTo reads the frames' samples, in host byte order and BitsAllocated wide, unmasked,
// frame i into to(i) (frameBytes long; nil: frame i is not wanted), in frame order. r is the
// file (ignored when the File keeps its own source). A deflated file is inflated as it is
// read: each frame straight into its place, nothing else kept; an encapsulated frame's
// compressed bytes are read into one buffer, reused, and decoded into its place.
func (f *File) readFramesTo(r io.ReaderAt, to func(frame int) []byte) error {
	var buf []byte
	return f.readFramesWith(r, nil, to, &buf)
}

// readFramesWith is readFramesTo with the encapsulated fragments grouped by frame already
// (nil: grouped here) and the caller's scratch for compressed frames.
func (f *File) readFramesWith(r io.ReaderAt, frames [][]fragment, to func(frame int) []byte, buf *[]byte) error {
	if err := f.checkPixels(); err != nil {
		return err
	}
	if f.src != nil {
		r = f.src
	}
	switch {
	case f.deflateAt > 0:
		return f.readDeflated(r, to)
	case f.pixels.encapsulated:
		if frames == nil {
			var err error
			if frames, err = f.frameFragments(r); err != nil {
				return err
			}
		}
		return f.readEncapsulated(r, frames, to, buf)
	}
	fb := f.frameBytes()
	for i := range f.NumberOfFrames {
		dst := to(i)
		if dst == nil {
			continue
		}
		if err := readFull(r, dst, f.pixels.native.off+int64(i)*fb); err != nil {
			if errors.Is(err, io.ErrUnexpectedEOF) {
				return fmt.Errorf("%w: the file ends inside frame %d's pixel data (it was cut short after it was scanned)", ErrTruncated, i)
			}
			return err
		}
		if swapped(f.order) && f.BitsAllocated > 8 {
			swap(dst, f.BitsAllocated/8)
		}
	}
	return nil
}

// readDeflated inflates the data set again, drops what precedes the pixel data, inflates each
// frame into its place, and checks that the stream then ends where it ended at the scan.
func (f *File) readDeflated(r io.ReaderAt, to func(frame int) []byte) error {
	zr := flate.NewReader(io.NewSectionReader(r, f.deflateAt, f.size-f.deflateAt))
	defer zr.Close()
	pos := int64(0)
	skip := func(to int64) error {
		k, err := io.CopyN(io.Discard, zr, to-pos)
		pos += k
		return err
	}
	fail := func(err error) error {
		if err == io.EOF {
			return fmt.Errorf("%w: the deflated data set ends at byte %d, %d bytes when scanned", ErrTruncated, pos, f.inflated)
		}
		return inflateError(err, pos)
	}
	if err := skip(f.pixels.native.off); err != nil {
		return fail(err)
	}
	fb := f.frameBytes()
	for i := range f.NumberOfFrames {
		dst := to(i)
		if dst == nil {
			if err := skip(pos + fb); err != nil {
				return fail(err)
			}
			continue
		}
		k, err := io.ReadFull(zr, dst)
		pos += int64(k)
		if err == io.ErrUnexpectedEOF {
			err = io.EOF
		}
		if err != nil {
			return fail(err)
		}
		if swapped(f.order) && f.BitsAllocated > 8 {
			swap(dst, f.BitsAllocated/8)
		}
	}
	if err := skip(f.inflated); err != nil {
		return fail(err)
	}
	var b [1]byte
	if k, err := io.ReadFull(zr, b[:]); k > 0 {
		return fmt.Errorf("%w: the deflated data set inflates past the %d bytes it held when scanned", ErrCorrupt, f.inflated)
	} else if err != io.EOF {
		return fail(err)
	}
	return nil
}
