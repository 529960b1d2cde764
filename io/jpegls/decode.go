package jpegls

import (
	"errors"
	"fmt"
)

// Decode decodes one JPEG-LS stream (SOI ... EOI, possibly followed by padding) into dst:
// width*height samples, row-major, each sampleBytes (1 or 2) bytes in host byte order
// (binary.NativeEndian). The frame header must have exactly one component of width x height
// and a precision that fits sampleBytes*8 bits; otherwise ErrMismatch.
func Decode(dst, src []byte, width, height, sampleBytes int) error {
	h, err := prepare(dst, src, width, height, sampleBytes)
	if err != nil {
		return err
	}
	f := newFast(&h, dst, sampleBytes)
	return intervals(src, &h, f.interval)
}

// prepare parses the headers and checks them against the caller's frame, before any work.
func prepare(dst, src []byte, width, height, sampleBytes int) (header, error) {
	if sampleBytes != 1 && sampleBytes != 2 || width <= 0 || height <= 0 {
		return header{}, fmt.Errorf("%w: %dx%d samples of %d bytes asked", ErrMismatch, width, height, sampleBytes)
	}
	if len(dst) < width*height*sampleBytes {
		return header{}, fmt.Errorf("%w: dst of %d bytes for %dx%d samples of %d bytes", ErrMismatch, len(dst), width, height, sampleBytes)
	}
	h, err := parseHeaders(src)
	if err != nil {
		return h, err
	}
	switch {
	case h.Components != 1:
		return h, fmt.Errorf("%w: %w: %d components", ErrUnsupported, ErrMismatch, h.Components)
	case h.Width != width || h.Height != height:
		return h, fmt.Errorf("%w: frame of %dx%d, %dx%d asked", ErrMismatch, h.Width, h.Height, width, height)
	case h.Precision > 8*sampleBytes:
		return h, fmt.Errorf("%w: precision %d in %d-byte samples", ErrMismatch, h.Precision, sampleBytes)
	}
	return h, nil
}

// intervalFunc decodes rows y0 to y1-1 from one restart interval's entropy-coded data,
// starting from T.87 A.2.1's initial state.
type intervalFunc func(data []byte, y0, y1 int) error

// intervals cuts the scan into its restart intervals (DRI's Ri lines each, separated by
// RST0..RST7 in turn; the whole scan where there is no DRI), has decode decode each, and
// checks that EOI follows the last.
func intervals(src []byte, h *header, decode intervalFunc) error {
	lines := h.restart
	if lines == 0 || lines > h.Height {
		lines = h.Height
	}
	pos := h.scanAt
	for y0, i := 0, 0; ; i++ {
		end := scanEnd(src, pos)
		y1 := min(y0+lines, h.Height)
		code, next, merr := nextMarker(src, end)
		if err := decode(src[pos:end], y0, y1); err != nil {
			return dataError(err, code, merr, pos, end)
		}
		if merr != nil {
			return fmt.Errorf("after row %d: %w", y1-1, merr)
		}
		y0 = y1
		if y0 == h.Height {
			if code != markerEOI {
				return fmt.Errorf("%w: marker 0x%02X at byte %d where EOI belongs", ErrCorrupt, code, end)
			}
			return nil
		}
		if want := byte(markerRST0 + i%8); code != want {
			return fmt.Errorf("%w: marker 0x%02X at byte %d where RST%d belongs (row %d)", ErrCorrupt, code, end, i%8, y0)
		}
		pos = next
	}
}

// dataError says why an interval's data (src[pos:end]) ran out: ErrTruncated where it ends
// at EOI or at the end of src, ErrCorrupt where another marker ends it.
func dataError(err error, code byte, merr error, pos, end int) error {
	if !errors.Is(err, errNeedBits) {
		return fmt.Errorf("scan data at bytes %d-%d: %w", pos, end, err)
	}
	if merr != nil || code == markerEOI {
		return fmt.Errorf("%w: scan data at bytes %d-%d ends before the image: %w", ErrTruncated, pos, end, err)
	}
	return fmt.Errorf("%w: scan data at bytes %d-%d ends at marker 0x%02X before the image: %w", ErrCorrupt, pos, end, code, err)
}
