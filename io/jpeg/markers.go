package jpeg

import (
	"encoding/binary"
	"fmt"
)

// The markers this package tells apart (T.81 Table B.1).
const (
	mSOF0 = 0xC0 // SOF0-SOF15 are 0xC0-0xCF less DHT, JPG and DAC
	mDHT  = 0xC4
	mJPG  = 0xC8
	mDAC  = 0xCC
	mRST0 = 0xD0 // RST0-RST7
	mSOI  = 0xD8
	mEOI  = 0xD9
	mSOS  = 0xDA
	mDQT  = 0xDB
	mDNL  = 0xDC
	mDRI  = 0xDD
	mDHP  = 0xDE
	mEXP  = 0xDF
	mAPP0 = 0xE0 // APP0-APP15
	mJPG0 = 0xF0 // JPG0-JPG13, reserved extensions with a length
	mCOM  = 0xFE
	mTEM  = 0x01
)

// huffSpec is a DHT table as the stream defines it: BITS (counts of codes of each length,
// lengths 1-16 at 1-16) and HUFFVAL.
type huffSpec struct {
	defined bool
	counts  [17]int
	vals    [256]byte
	n       int
}

// header is what the markers up to the first scan header define.
type header struct {
	info    Info
	sof     byte // the frame's SOFn marker; 0 before it
	compID  byte // the first component's identifier
	tq      int  // its quantization table
	quant   [4][64]uint16
	quantOK [4]bool
	dc, ac  [4]huffSpec
	td, ta  int // the scan's DC (lossless: only) and AC tables
	se, ah  int // the scan's Se and Ah
	scan    int // offset of the first byte of entropy-coded data
}

// parseHeader reads the markers from SOI to the first scan header.
func parseHeader(src []byte) (*header, error) {
	if len(src) < 2 {
		return nil, fmt.Errorf("%w: %d bytes, no SOI", ErrTruncated, len(src))
	}
	if src[0] != 0xFF || src[1] != mSOI {
		return nil, fmt.Errorf("%w: no SOI marker at byte 0", ErrCorrupt)
	}
	h := &header{}
	for pos := 2; ; {
		m, at, err := markerAt(src, pos)
		if err != nil {
			return nil, err
		}
		if m == mTEM {
			pos = at
			continue
		}
		if m == mEOI {
			return nil, fmt.Errorf("%w: EOI at byte %d before any scan", ErrTruncated, at-2)
		}
		if m == mSOI || m >= mRST0 && m < mRST0+8 || m < mSOF0 {
			return nil, fmt.Errorf("%w: marker %02X at byte %d before the first scan", ErrCorrupt, m, at-2)
		}
		seg, err := segment(src, at, m)
		if err != nil {
			return nil, err
		}
		if m == mSOS {
			h.scan = at + 2 + len(seg)
			return h, h.parseSOS(seg, at)
		}
		if err := h.parseSegment(m, seg, at); err != nil {
			return nil, err
		}
		pos = at + 2 + len(seg)
	}
}

// parseSegment reads one marker segment before the scan (seg: its bytes after the length).
func (h *header) parseSegment(m byte, seg []byte, at int) error {
	switch {
	case m == mDHT:
		return h.parseDHT(seg, at)
	case m == mDQT:
		return h.parseDQT(seg, at)
	case m == mDRI:
		if len(seg) != 2 {
			return fmt.Errorf("%w: DRI of %d bytes at byte %d", ErrCorrupt, len(seg)+2, at-2)
		}
		h.info.RestartInterval = int(binary.BigEndian.Uint16(seg))
	case m == mDHP:
		h.info.Process = Hierarchical
	case m == mDNL:
		return fmt.Errorf("%w: DNL at byte %d before the first scan", ErrCorrupt, at-2)
	case m == mDAC, m == mEXP, m == mCOM, m >= mAPP0 && m < mJPG0+14:
		// application data, comments, arithmetic conditioning, expansion: nothing to use
	case m == mJPG:
		return fmt.Errorf("%w: JPG extension marker at byte %d", ErrUnsupported, at-2)
	default: // SOF0-SOF15
		return h.parseSOF(m, seg, at)
	}
	return nil
}

// markerAt reads the marker at src[pos:], after any fill bytes (0xFF), and returns its code
// and the offset after it.
func markerAt(src []byte, pos int) (byte, int, error) {
	if pos >= len(src) {
		return 0, pos, fmt.Errorf("%w: the data ends at byte %d where a marker was due", ErrTruncated, pos)
	}
	if src[pos] != 0xFF {
		return 0, pos, fmt.Errorf("%w: byte %d is %02X where a marker was due", ErrCorrupt, pos, src[pos])
	}
	for pos < len(src) && src[pos] == 0xFF {
		pos++
	}
	if pos >= len(src) {
		return 0, pos, fmt.Errorf("%w: the data ends in fill bytes at byte %d", ErrTruncated, pos)
	}
	if src[pos] == 0 {
		return 0, pos, fmt.Errorf("%w: stuffed zero byte at byte %d where a marker was due", ErrCorrupt, pos)
	}
	return src[pos], pos + 1, nil
}

// segment returns the bytes of the marker segment whose length field is at src[at:],
// after that field.
func segment(src []byte, at int, m byte) ([]byte, error) {
	if at+2 > len(src) {
		return nil, fmt.Errorf("%w: marker %02X at byte %d has no length", ErrTruncated, m, at-2)
	}
	n := int(binary.BigEndian.Uint16(src[at:]))
	if n < 2 {
		return nil, fmt.Errorf("%w: marker %02X at byte %d has length %d", ErrCorrupt, m, at-2, n)
	}
	if at+n > len(src) {
		return nil, fmt.Errorf("%w: marker %02X at byte %d has %d bytes, the data %d", ErrTruncated, m, at-2, n, len(src)-at)
	}
	return src[at+2 : at+n], nil
}

// sofProcess maps SOFn to its process.
func sofProcess(m byte) Process {
	switch m {
	case mSOF0:
		return Baseline
	case mSOF0 + 1:
		return Extended
	case mSOF0 + 2:
		return Progressive
	case mSOF0 + 3:
		return Lossless
	case mSOF0 + 9:
		return ArithmeticExtended
	case mSOF0 + 10:
		return ArithmeticProgressive
	case mSOF0 + 11:
		return ArithmeticLossless
	}
	return Hierarchical // SOF5-7, SOF13-15: differential frames
}

// parseSOF reads a frame header (T.81 B.2.2).
func (h *header) parseSOF(m byte, seg []byte, at int) error {
	if h.sof != 0 {
		return fmt.Errorf("%w: a second frame header (SOF%d) at byte %d", ErrCorrupt, m-mSOF0, at-2)
	}
	if len(seg) < 6 || len(seg) != 6+3*int(seg[5]) || seg[5] == 0 {
		return fmt.Errorf("%w: SOF%d of %d bytes at byte %d", ErrCorrupt, m-mSOF0, len(seg)+2, at-2)
	}
	h.sof = m
	if h.info.Process != Hierarchical {
		h.info.Process = sofProcess(m)
	}
	h.info.Precision = int(seg[0])
	h.info.Height = int(binary.BigEndian.Uint16(seg[1:]))
	h.info.Width = int(binary.BigEndian.Uint16(seg[3:]))
	h.info.Components = int(seg[5])
	h.compID, h.tq = seg[6], int(seg[8])
	if h.info.Width == 0 {
		return fmt.Errorf("%w: SOF%d at byte %d declares width 0", ErrCorrupt, m-mSOF0, at-2)
	}
	return nil
}

// parseSOS reads the first scan header (T.81 B.2.3).
func (h *header) parseSOS(seg []byte, at int) error {
	if h.sof == 0 {
		return fmt.Errorf("%w: SOS at byte %d before any frame header", ErrCorrupt, at-2)
	}
	if len(seg) < 4 || len(seg) != 4+2*int(seg[0]) || seg[0] == 0 {
		return fmt.Errorf("%w: SOS of %d bytes at byte %d", ErrCorrupt, len(seg)+2, at-2)
	}
	ns := int(seg[0])
	h.td, h.ta = int(seg[2]>>4), int(seg[2]&15)
	p := 1 + 2*ns
	ss, se, ahl := int(seg[p]), int(seg[p+1]), seg[p+2]
	h.se, h.ah = se, int(ahl>>4)
	h.info.PointTransform = int(ahl & 15)
	if h.info.Process == Lossless || h.info.Process == ArithmeticLossless {
		h.info.Predictor = ss
	}
	if h.info.Components == 1 && (ns != 1 || seg[1] != h.compID) {
		return fmt.Errorf("%w: SOS at byte %d names components the frame lacks", ErrCorrupt, at-2)
	}
	return nil
}

// parseDQT reads quantization tables (T.81 B.2.4.1), stored in natural order.
func (h *header) parseDQT(seg []byte, at int) error {
	for len(seg) > 0 {
		pq, tq := seg[0]>>4, int(seg[0]&15)
		n := 64 << pq
		if pq > 1 || tq > 3 || len(seg) < 1+n {
			return fmt.Errorf("%w: DQT at byte %d: table %d, precision %d, %d bytes left", ErrCorrupt, at-2, tq, pq, len(seg))
		}
		for i := range 64 {
			v := uint16(seg[1+i])
			if pq == 1 {
				v = binary.BigEndian.Uint16(seg[1+2*i:])
			}
			h.quant[tq][zigzag[i]] = v
		}
		h.quantOK[tq] = true
		seg = seg[1+n:]
	}
	return nil
}

// parseDHT reads Huffman tables (T.81 B.2.4.2) and checks that their codes fit (C.2).
func (h *header) parseDHT(seg []byte, at int) error {
	for len(seg) > 0 {
		tc, th := seg[0]>>4, int(seg[0]&15)
		if tc > 1 || th > 3 || len(seg) < 17 {
			return fmt.Errorf("%w: DHT at byte %d: class %d, table %d, %d bytes left", ErrCorrupt, at-2, tc, th, len(seg))
		}
		s := huffSpec{defined: true}
		code := 0
		for l := 1; l <= 16; l++ {
			s.counts[l] = int(seg[l])
			s.n += s.counts[l]
			code = (code + s.counts[l])
			if code > 1<<l {
				return fmt.Errorf("%w: DHT at byte %d: table %d/%d has more codes of %d bits than fit", ErrCorrupt, at-2, tc, th, l)
			}
			code <<= 1
		}
		if len(seg) < 17+s.n {
			return fmt.Errorf("%w: DHT at byte %d: table %d/%d has %d values, the segment %d bytes", ErrCorrupt, at-2, tc, th, s.n, len(seg)-17)
		}
		copy(s.vals[:], seg[17:17+s.n])
		if tc == 0 {
			h.dc[th] = s
		} else {
			h.ac[th] = s
		}
		seg = seg[17+s.n:]
	}
	return nil
}

// zigzag maps the zig-zag index of a coefficient to its natural (row-major) index; the 16
// entries past 63 catch a corrupt run that overshoots, as IJG libjpeg's table does.
var zigzag = [64 + 16]int{
	0, 1, 8, 16, 9, 2, 3, 10, 17, 24, 32, 25, 18, 11, 4, 5,
	12, 19, 26, 33, 40, 48, 41, 34, 27, 20, 13, 6, 7, 14, 21, 28,
	35, 42, 49, 56, 57, 50, 43, 36, 29, 22, 15, 23, 30, 37, 44, 51,
	58, 59, 52, 45, 38, 31, 39, 46, 53, 60, 61, 54, 47, 55, 62, 63,
	63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63,
}
