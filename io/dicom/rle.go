package dicom

import (
	"encoding/binary"
	"fmt"
)

// hostOrder is this machine's byte order, which decoded samples are given in.
var hostOrder = binary.NativeEndian

// hostBigEndian tells which of the two file byte orders hostOrder is.
var hostBigEndian = hostOrder.Uint16([]byte{0, 1}) == 1

// swapped reports whether samples in order must be byte-swapped for this machine.
func swapped(order binary.ByteOrder) bool { return (order == binary.BigEndian) != hostBigEndian }

// swap reverses the bytes of each size-byte sample of b.
func swap(b []byte, size int) {
	for i := 0; i+size <= len(b); i += size {
		for l, r := i, i+size-1; l < r; l, r = l+1, r-1 {
			b[l], b[r] = b[r], b[l]
		}
	}
}

// decodeRLE decodes one RLE frame of greyscale samples, width bytes each, into dst in host
// byte order. Segment k holds byte k of every sample, most significant first.
func decodeRLE(dst, src []byte, width int) error {
	if len(src) < 64 {
		return fmt.Errorf("%w: %d bytes, the RLE header needs 64", ErrCorrupt, len(src))
	}
	nseg := int(binary.LittleEndian.Uint32(src))
	if nseg != width {
		return fmt.Errorf("%w: %d RLE segments for %d-byte samples", ErrCorrupt, nseg, width)
	}
	pixels := len(dst) / width
	for s := range nseg {
		start := int64(binary.LittleEndian.Uint32(src[4+4*s:]))
		end := int64(len(src))
		if s+1 < nseg {
			end = int64(binary.LittleEndian.Uint32(src[8+4*s:]))
		}
		if start < 64 || start > end || end > int64(len(src)) {
			return fmt.Errorf("%w: RLE segment %d spans bytes %d to %d of %d", ErrCorrupt, s, start, end, len(src))
		}
		pos := width - 1 - s // little-endian host: the most significant byte goes last
		if hostBigEndian {
			pos = s
		}
		if err := unpackBits(dst[pos:], src[start:end], pixels, width); err != nil {
			return fmt.Errorf("segment %d: %w", s, err)
		}
	}
	return nil
}

// unpackBits decodes a PackBits segment into n bytes of dst, stride apart.
func unpackBits(dst, src []byte, n, stride int) error {
	out := 0
	for i := 0; out < n; {
		if i >= len(src) {
			return fmt.Errorf("%w: RLE segment ends after %d of %d bytes", ErrCorrupt, out, n)
		}
		c := int(int8(src[i]))
		i++
		switch {
		case c >= 0: // a literal run of c+1 bytes
			run := c + 1
			if i+run > len(src) || out+run > n {
				return fmt.Errorf("%w: RLE literal run of %d bytes overflows", ErrCorrupt, run)
			}
			for _, b := range src[i : i+run] {
				dst[out*stride] = b
				out++
			}
			i += run
		case c != -128: // the next byte repeated 1-c times
			run := 1 - c
			if i >= len(src) || out+run > n {
				return fmt.Errorf("%w: RLE replicate run of %d bytes overflows", ErrCorrupt, run)
			}
			b := src[i]
			i++
			for range run {
				dst[out*stride] = b
				out++
			}
		}
	}
	return nil
}
