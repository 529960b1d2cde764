package nifti

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
)

// readHeader reads and decodes the header at the start of s. With raw set, it also records
// there whatever of the header it could decode, even when it fails.
func readHeader(s *source, raw *RawHeader) (*Header, error) {
	buf := make([]byte, sizeofHdr2)
	n, err := readFullRaw(s, buf[:4])
	if raw != nil {
		raw.Read = n
	}
	if n < 4 {
		return nil, openError(s.name, shortHeader(s, buf[:n], err, 0))
	}
	version, order, size, err := detectHeader(buf[:4])
	if err != nil {
		return nil, openError(s.name, err)
	}
	m, err := readFullRaw(s, buf[4:size])
	n += m
	if raw != nil {
		// The bytes past n are still zero, and those of a field cut partway are zeroed: the
		// fields not wholly read decode as zero (RawHeader.Has tells them apart).
		zeroPartialFields(buf[:n], version)
		h, voxOffset := decodeFields(buf[:size], version, order)
		raw.Header, raw.Read, raw.StoredVoxOffset = *h, n, voxOffset
	}
	if n < size {
		return nil, openError(s.name, shortHeader(s, buf[:n], err, version))
	}
	h, err := decodeHeader(buf[:size], version, order)
	if err != nil {
		return nil, openError(s.name, err)
	}
	return h, nil
}

// shortHeader says why s ended (err, from readFullRaw) after only the bytes got of a header
// of the given version (0: not known yet, fewer than the 4 bytes of sizeof_hdr were read),
// counting what was actually read or inflated.
func shortHeader(s *source, got []byte, err error, version int) error {
	if err != io.EOF && !errors.Is(err, io.ErrUnexpectedEOF) {
		return classifyStreamErr(err, "header")
	}
	need := fmt.Sprintf("a NIfTI-%d header needs %d", version, headerSize(version))
	if version == 0 {
		need = fmt.Sprintf("a NIfTI header needs %d (NIfTI-1) or %d (NIfTI-2)", sizeofHdr1, sizeofHdr2)
	}
	n := len(got)
	if s.gz != nil && errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("%w: the gzip stream ends early (the %d-byte file is cut short), after %d inflated bytes; %s",
			ErrTruncated, s.size, n, need)
	}
	have := fmt.Sprintf("%d bytes", n)
	if s.gz != nil {
		have = fmt.Sprintf("the %d-byte gzip file inflates to %d bytes", s.size, n)
	}
	switch {
	case version != 0:
		return fmt.Errorf("%w: %s, %s", ErrTruncated, have, need)
	case n == 0 && s.gz == nil:
		return fmt.Errorf("%w: empty file (0 bytes)", ErrNotNIfTI)
	case n == 0:
		return fmt.Errorf("%w: %s", ErrNotNIfTI, have)
	case startsSizeofHdr(got):
		return fmt.Errorf("%w: %s, %s", ErrTruncated, have, need)
	}
	return fmt.Errorf("%w: %s, too short for a NIfTI header and not the start of one (%s)", ErrNotNIfTI, have, need)
}

// startsSizeofHdr reports whether b (shorter than 4 bytes) is the start of a sizeof_hdr of
// either version in either byte order.
func startsSizeofHdr(b []byte) bool {
	for _, size := range []uint32{sizeofHdr1, sizeofHdr2} {
		var le, be [4]byte
		binary.LittleEndian.PutUint32(le[:], size)
		binary.BigEndian.PutUint32(be[:], size)
		if bytes.HasPrefix(le[:], b) || bytes.HasPrefix(be[:], b) {
			return true
		}
	}
	return false
}

// readExtensions reads the 4-byte extender after the header and, when its first byte is set,
// parses the extensions that follow (parseExtensions: leniently, at most maxExtensionBytes).
// The extension area is the bytes between the extender and vox_offset in a single file, the
// rest of the .hdr in a pair. It also returns the area's length (Header.ExtensionLen).
func readExtensions(s *source, h *Header, single bool) ([]Extension, int64, error) {
	hsize := int64(headerSize(h.Version))
	if single && h.VoxOffset < hsize+4 {
		return nil, 0, nil // no room for the extender: old writers put the data right after the header
	}
	var flag [4]byte
	if _, err := io.ReadFull(s, flag[:]); err != nil || flag[0] == 0 {
		return nil, 0, nil // a .hdr without the extender is legal; a single file is checked later
	}
	area := int64(-1) // a gzipped .hdr: up to the end of its stream
	switch {
	case single:
		area = h.VoxOffset - hsize - 4
	case s.gz == nil:
		area = s.size - hsize - 4
	}
	exts, err := parseExtensions(s, area, h.ByteOrder)
	if err != nil {
		return nil, 0, openError(s.name, classifyStreamErr(err, "header extensions"))
	}
	if area >= 0 {
		return exts, area, nil
	}
	if _, err := io.Copy(io.Discard, io.LimitReader(s, 64<<20)); err != nil {
		return nil, 0, openError(s.name, classifyStreamErr(err, "header extensions"))
	}
	return exts, s.consumed - hsize - 4, nil
}

// effectiveScaling applies the rule of nibabel and niftilib: a zero or non-finite slope means
// "no scaling" (real files carry 0 or NaN there). A non-finite intercept with a valid slope is
// taken as 0.
func effectiveScaling(h *Header) (slope, inter float64) {
	s, i := h.SclSlope, h.SclInter
	if s == 0 || math.IsNaN(s) || math.IsInf(s, 0) {
		return 1, 0
	}
	if math.IsNaN(i) || math.IsInf(i, 0) {
		i = 0
	}
	return s, i
}
