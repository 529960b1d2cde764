package dicom

import (
	"errors"
	"fmt"
	"io"
	"math"
)

// source reads byte ranges of a file through a window, so that skipped elements (private
// blobs, overlays, the pixel data itself) are never read.
//
// Over a deflated data set (z set) the window slides forward over the inflating stream: what
// lies behind the window cannot be read again (the decoder never asks), skipped bytes are
// inflated and dropped, and nothing at or past limit is inflated. The stream's length is not
// known until it ends: size is then math.MaxInt64, and more tells where the data set ends.
type source struct {
	r      io.ReaderAt
	size   int64
	win    []byte
	winOff int64

	z       io.Reader // the inflating stream, or nil
	pos     int64     // offset of the next byte z gives: the window ends there
	limit   int64     // bytes at or past limit are not inflated (ErrTooLarge)
	allowed bool      // the pixel data's length was added to limit
}

// close releases the inflating stream's decoder, if any.
func (s *source) close() {
	if c, ok := s.z.(io.Closer); ok {
		c.Close()
	}
}

// newStream is a source over the inflated data set z, bounded by maxInflated.
func newStream(z io.Reader) *source {
	return &source{z: z, size: math.MaxInt64, limit: maxInflated}
}

// bytes returns n bytes at off; the slice is valid until the next call. Callers have checked
// off+n against size.
func (s *source) bytes(off int64, n int) ([]byte, error) {
	if s.z != nil {
		return s.streamBytes(off, n)
	}
	if off >= s.winOff && off+int64(n) <= s.winOff+int64(len(s.win)) {
		return s.win[off-s.winOff : off-s.winOff+int64(n)], nil
	}
	size := max(n, windowSize)
	size = int(min(int64(size), s.size-off))
	if size < n {
		return nil, io.ErrUnexpectedEOF
	}
	if cap(s.win) < size {
		s.win = make([]byte, size)
	}
	s.win = s.win[:size]
	if err := readFull(s.r, s.win, off); err != nil {
		s.win = s.win[:0]
		return nil, err
	}
	s.winOff = off
	return s.win[:n], nil
}

// streamBytes is bytes over the inflating stream.
func (s *source) streamBytes(off int64, n int) ([]byte, error) {
	end := off + int64(n)
	if off < s.winOff {
		return nil, fmt.Errorf("%w: the deflated data set is read backwards at offset %d", ErrCorrupt, off)
	}
	if end <= s.pos {
		return s.win[off-s.winOff : end-s.winOff], nil
	}
	if end > s.limit {
		return nil, s.tooLarge()
	}
	if off > s.pos {
		if err := s.skip(off); err != nil {
			return nil, err
		}
		s.win = s.win[:0]
	} else {
		s.win = s.win[:copy(s.win, s.win[off-s.winOff:])]
	}
	s.winOff = off
	want := int(min(int64(max(n, windowSize)), s.limit-off))
	if cap(s.win) < want {
		s.win = append(make([]byte, 0, want), s.win...)
	}
	for len(s.win) < n {
		k, err := s.z.Read(s.win[len(s.win):want])
		s.win = s.win[:len(s.win)+k]
		s.pos += int64(k)
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, inflateError(err, s.pos)
		}
	}
	if len(s.win) < n {
		return nil, fmt.Errorf("%w: the deflated data set ends at byte %d, %d bytes are needed at offset %d", ErrTruncated, s.pos, n, off)
	}
	return s.win[:n], nil
}

// skip inflates and drops the stream's bytes up to off.
func (s *source) skip(off int64) error {
	if off > s.limit {
		return s.tooLarge()
	}
	k, err := io.CopyN(io.Discard, s.z, off-s.pos)
	s.pos += k
	if err == io.EOF {
		return fmt.Errorf("%w: the deflated data set ends at byte %d, an element extends to byte %d", ErrTruncated, s.pos, off)
	}
	if err != nil {
		return inflateError(err, s.pos)
	}
	return nil
}

// more reports whether the data set goes on at off: off is before the end of the file, or of
// the inflated stream (which is then inflated up to off).
func (s *source) more(off int64) (bool, error) {
	if s.z == nil {
		return off < s.size, nil
	}
	if off < s.pos {
		return true, nil
	}
	if off < s.limit {
		if _, err := s.streamBytes(off, 1); err != nil {
			if errors.Is(err, ErrTruncated) && s.pos == off {
				return false, nil
			}
			return false, err
		}
		return true, nil
	}
	if off > s.pos {
		if err := s.skip(off); err != nil {
			return false, err
		}
	}
	var b [1]byte // at the limit: only the stream's end is allowed
	k, err := io.ReadFull(s.z, b[:])
	if k > 0 {
		return false, s.tooLarge()
	}
	if err != io.EOF {
		return false, inflateError(err, s.pos)
	}
	return false, nil
}

// allow raises the stream's limit by n bytes: the pixel data's declared length, once (a
// second pixel data element counts against MaxInflated).
func (s *source) allow(n int64) {
	if s.z != nil && !s.allowed {
		s.limit += n
		s.allowed = true
	}
}

func (s *source) tooLarge() error {
	return fmt.Errorf("%w: the deflated data set inflates beyond its pixel data and %d bytes of other elements", ErrTooLarge, maxInflated)
}

// inflateError classifies an error of the inflating stream at offset off.
func inflateError(err error, off int64) error {
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("%w: the deflate stream ends before its last block (after %d bytes)", ErrTruncated, off)
	}
	return fmt.Errorf("%w: deflated data set, after %d bytes: %w", ErrCorrupt, off, err)
}

// readFull reads len(b) bytes at off: a short read is an error (io.ErrUnexpectedEOF when the
// file ended), even if the ReaderAt says io.EOF.
func readFull(r io.ReaderAt, b []byte, off int64) error {
	n, err := r.ReadAt(b, off)
	if n == len(b) {
		return nil
	}
	if err == nil || errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	return err
}
