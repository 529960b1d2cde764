package jpegls

import (
	"bytes"
	"encoding/binary"
	"fmt"
)

// Marker codes (the byte after 0xFF) this package reads (T.81 B.1.1.3, T.87 C.1).
const (
	markerSOF55 = 0xF7 // JPEG-LS frame header
	markerLSE   = 0xF8 // JPEG-LS preset parameters
	markerSOI   = 0xD8
	markerEOI   = 0xD9
	markerSOS   = 0xDA
	markerDRI   = 0xDD
	markerRST0  = 0xD0
	markerCOM   = 0xFE
)

// header is what the markers before the scan's entropy-coded data declare.
type header struct {
	Info
	preset  [5]int // LSE id 1: MAXVAL, T1, T2, T3, RESET as given (0: default)
	restart int    // DRI's Ri: lines per restart interval; 0: none
	scanAt  int    // the offset of the scan's first entropy-coded byte
	sof     bool
}

// ReadInfo parses only the markers up to the first scan's header.
func ReadInfo(src []byte) (Info, error) {
	h, err := parseHeaders(src)
	return h.Info, err
}

// parseHeaders reads SOI and the marker segments up to and including the first SOS.
func parseHeaders(src []byte) (header, error) {
	var h header
	if len(src) < 2 {
		return h, fmt.Errorf("%w: %d bytes, no SOI", ErrTruncated, len(src))
	}
	if src[0] != 0xFF || src[1] != markerSOI {
		return h, fmt.Errorf("%w: no SOI at byte 0", ErrCorrupt)
	}
	for pos := 2; ; {
		code, at, err := nextMarker(src, pos)
		if err != nil {
			return h, err
		}
		if code == markerEOI || (code >= markerRST0 && code < markerRST0+8) {
			return h, fmt.Errorf("%w: marker 0x%02X before the scan at byte %d", ErrCorrupt, code, at-2)
		}
		body, next, err := segment(src, at)
		if err != nil {
			return h, fmt.Errorf("marker 0x%02X: %w", code, err)
		}
		if err := h.read(code, body); err != nil {
			return h, fmt.Errorf("marker 0x%02X at byte %d: %w", code, at-2, err)
		}
		if code == markerSOS {
			h.scanAt = next
			return h, h.complete()
		}
		pos = next
	}
}

// nextMarker reads the marker at pos (fill bytes 0xFF allowed before its code) and returns
// its code and the offset after it.
func nextMarker(src []byte, pos int) (code byte, after int, err error) {
	if pos >= len(src) {
		return 0, pos, fmt.Errorf("%w: no marker at byte %d (end of data)", ErrTruncated, pos)
	}
	if src[pos] != 0xFF {
		return 0, pos, fmt.Errorf("%w: byte 0x%02X at %d where a marker belongs", ErrCorrupt, src[pos], pos)
	}
	for pos < len(src) && src[pos] == 0xFF {
		pos++
	}
	if pos >= len(src) {
		return 0, pos, fmt.Errorf("%w: marker cut at byte %d", ErrTruncated, pos)
	}
	if src[pos] == 0 {
		return 0, pos, fmt.Errorf("%w: 0xFF00 at byte %d where a marker belongs", ErrCorrupt, pos-1)
	}
	return src[pos], pos + 1, nil
}

// segment returns the body of the marker segment whose length field is at at, and the
// offset after it.
func segment(src []byte, at int) (body []byte, next int, err error) {
	if at+2 > len(src) {
		return nil, at, fmt.Errorf("%w: length cut at byte %d", ErrTruncated, at)
	}
	n := int(binary.BigEndian.Uint16(src[at:]))
	if n < 2 {
		return nil, at, fmt.Errorf("%w: length %d at byte %d", ErrCorrupt, n, at)
	}
	if at+n > len(src) {
		return nil, at, fmt.Errorf("%w: segment of %d bytes at byte %d passes the end (%d)", ErrTruncated, n, at, len(src))
	}
	return src[at+2 : at+n], at + n, nil
}

// read takes in one marker segment before the scan data.
func (h *header) read(code byte, b []byte) error {
	switch {
	case code == markerSOF55:
		return h.readSOF(b)
	case code == markerLSE:
		return h.readLSE(b)
	case code == markerDRI:
		if len(b) < 2 || len(b) > 4 {
			return fmt.Errorf("%w: DRI of %d bytes", ErrCorrupt, len(b))
		}
		h.restart = 0
		for _, v := range b {
			h.restart = h.restart<<8 | int(v)
		}
		return nil
	case code == markerSOS:
		return h.readSOS(b)
	case code >= 0xE0 && code <= 0xEF, code == markerCOM:
		return nil // APPn, COM: skipped
	case code >= 0xC0 && code <= 0xCF && code != 0xC4 && code != 0xC8 && code != 0xCC:
		return fmt.Errorf("%w: a JPEG (not JPEG-LS) frame, SOF%d", ErrUnsupported, code-0xC0)
	}
	return fmt.Errorf("%w: unexpected marker", ErrCorrupt)
}

// readSOF reads the frame header (T.87 C.2.2): P, Y, X, Nf and the components.
func (h *header) readSOF(b []byte) error {
	if h.sof {
		return fmt.Errorf("%w: a second frame header", ErrCorrupt)
	}
	if len(b) < 6 || len(b) != 6+3*int(b[5]) {
		return fmt.Errorf("%w: frame header of %d bytes", ErrCorrupt, len(b))
	}
	h.sof = true
	h.Precision = int(b[0])
	h.Height = int(binary.BigEndian.Uint16(b[1:]))
	h.Width = int(binary.BigEndian.Uint16(b[3:]))
	h.Components = int(b[5])
	switch {
	case h.Precision < 2 || h.Precision > 16:
		return fmt.Errorf("%w: precision %d", ErrCorrupt, h.Precision)
	case h.Height == 0:
		return fmt.Errorf("%w: height 0 (lines given by DNL)", ErrUnsupported)
	case h.Width == 0 || h.Components == 0:
		return fmt.Errorf("%w: width %d, %d components", ErrCorrupt, h.Width, h.Components)
	}
	return nil
}

// readLSE reads a preset parameters segment (T.87 C.2.4): only id 1, coding parameters.
func (h *header) readLSE(b []byte) error {
	if len(b) < 1 {
		return fmt.Errorf("%w: empty LSE", ErrCorrupt)
	}
	switch b[0] {
	case 1:
		if len(b) != 11 {
			return fmt.Errorf("%w: LSE id 1 of %d bytes", ErrCorrupt, len(b))
		}
		for i := range h.preset {
			h.preset[i] = int(binary.BigEndian.Uint16(b[1+2*i:]))
		}
		return nil
	case 2, 3:
		return fmt.Errorf("%w: mapping table (LSE id %d)", ErrUnsupported, b[0])
	case 4:
		return fmt.Errorf("%w: oversize image dimensions (LSE id 4)", ErrUnsupported)
	}
	return fmt.Errorf("%w: LSE id %d", ErrCorrupt, b[0])
}

// readSOS reads the scan header (T.87 C.2.3): Ns, the components with their mapping
// tables, NEAR, ILV and the point transform.
func (h *header) readSOS(b []byte) error {
	if !h.sof {
		return fmt.Errorf("%w: scan before the frame header", ErrCorrupt)
	}
	if len(b) < 1 || int(b[0]) == 0 || len(b) != 4+2*int(b[0]) {
		return fmt.Errorf("%w: scan header of %d bytes", ErrCorrupt, len(b))
	}
	ns := int(b[0])
	if ns > h.Components {
		return fmt.Errorf("%w: %d components in the scan, %d in the frame", ErrCorrupt, ns, h.Components)
	}
	for i := range ns {
		if tm := b[2+2*i]; tm != 0 {
			return fmt.Errorf("%w: mapping table %d", ErrUnsupported, tm)
		}
	}
	p := b[1+2*ns:]
	h.Near, h.Interleave = int(p[0]), int(p[1])
	if p[2]&0x0F != 0 {
		return fmt.Errorf("%w: point transform %d", ErrUnsupported, p[2]&0x0F)
	}
	if h.Interleave > 2 {
		return fmt.Errorf("%w: interleave mode %d", ErrCorrupt, h.Interleave)
	}
	return nil
}

// complete fills in MAXVAL, the thresholds and RESET (the LSE's where given, else T.87's
// defaults) and checks them against T.87 Table C.1.
func (h *header) complete() error {
	top := 1<<h.Precision - 1
	h.MaxVal = top
	if m := h.preset[0]; m != 0 {
		if m > top {
			return fmt.Errorf("%w: MAXVAL %d over %d bits", ErrCorrupt, m, h.Precision)
		}
		h.MaxVal = m
	}
	if h.Near > min(255, h.MaxVal/2) {
		return fmt.Errorf("%w: NEAR %d with MAXVAL %d", ErrCorrupt, h.Near, h.MaxVal)
	}
	t1, t2, t3 := defaultThresholds(h.MaxVal, h.Near)
	h.T1, h.T2, h.T3, h.Reset = pick(h.preset[1], t1), pick(h.preset[2], t2), pick(h.preset[3], t3), pick(h.preset[4], defaultReset)
	if h.T1 < h.Near+1 || h.T1 > h.T2 || h.T2 > h.T3 || h.T3 > h.MaxVal {
		return fmt.Errorf("%w: thresholds %d, %d, %d (NEAR %d, MAXVAL %d)", ErrCorrupt, h.T1, h.T2, h.T3, h.Near, h.MaxVal)
	}
	if h.Reset < 3 || h.Reset > max(255, h.MaxVal) {
		return fmt.Errorf("%w: RESET %d", ErrCorrupt, h.Reset)
	}
	return nil
}

// pick is v, or def where v is 0 (a preset parameter left to its default).
func pick(v, def int) int {
	if v == 0 {
		return def
	}
	return v
}

// scanEnd is where the entropy-coded data from pos ends: at the first 0xFF followed by a
// byte with its high bit set (a marker; after 0xFF the data has a stuffed 0 bit, T.87
// A.1), or at a 0xFF that is the last byte, or at the end of src.
func scanEnd(src []byte, pos int) int {
	for {
		i := bytes.IndexByte(src[pos:], 0xFF)
		if i < 0 {
			return len(src)
		}
		pos += i
		if pos+1 == len(src) || src[pos+1] >= 0x80 {
			return pos
		}
		pos++
	}
}
