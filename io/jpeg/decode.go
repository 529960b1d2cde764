package jpeg

import (
	"encoding/binary"
	"fmt"
)

// Decode decodes one JPEG stream (SOI ... EOI, possibly followed by padding bytes) into dst:
// width*height samples, row-major, each sampleBytes (1 or 2) bytes in host byte order
// (binary.NativeEndian). The frame header must have exactly one component of width x height
// and a precision that fits sampleBytes*8 bits; otherwise ErrMismatch.
//
// Samples are the unsigned P-bit values the encoder coded (a lossless stream's reconstructed
// values shifted left by its point transform), not sign-extended.
func Decode(dst, src []byte, width, height, sampleBytes int) error {
	return decode(dst, src, width, height, sampleBytes, false)
}

// ReadInfo parses only the markers up to the first scan's header.
func ReadInfo(src []byte) (Info, error) {
	h, err := parseHeader(src)
	if err != nil {
		return Info{}, err
	}
	return h.info, nil
}

// frame is the caller's destination, checked against the frame header.
type frame struct {
	dst      []byte
	src      []byte
	w, h, sb int
	pt       int
}

// scan is the state of the one scan of a frame being decoded.
type scan struct {
	f               *frame
	hdr             *header
	predictor       int   // lossless: Table H.1's selection
	initial         int32 // lossless: the first prediction of an interval, 2^(P-Pt-1)
	mask            int32 // lossless: 2^(P-Pt)-1
	rowsPerInterval int   // lossless: rows between restart markers; 0: none
	nextRST         int   // the number m of the RSTm marker due next
}

// decode is Decode through the fast path, or the reference where reference is set.
func decode(dst, src []byte, w, h, sb int, reference bool) error {
	hdr, err := parseHeader(src)
	if err != nil {
		return err
	}
	if err := hdr.check(dst, w, h, sb); err != nil {
		return err
	}
	f := &frame{dst: dst[:w*h*sb], src: src, w: w, h: h, sb: sb, pt: hdr.info.PointTransform}
	s := &scan{f: f, hdr: hdr}
	var r entropyReader
	fast := &bitReader{src: src, pos: hdr.scan}
	if reference {
		r = &refReader{src: src, pos: hdr.scan}
	} else {
		r = fast
	}
	if hdr.info.Process == Lossless {
		err = s.decodeLossless(r, fast, reference)
	} else {
		err = s.decodeDCT(r)
	}
	if err != nil {
		return err
	}
	pos, err := r.align()
	if err != nil {
		return err
	}
	return hdr.endScan(src, pos, h)
}

// check refuses what this package does not decode and frames unlike the caller's, before any
// decoding.
func (hd *header) check(dst []byte, w, h, sb int) error {
	in := hd.info
	switch {
	case in.Process != Baseline && in.Process != Extended && in.Process != Lossless:
		return fmt.Errorf("%w: %s", ErrUnsupported, in.Process)
	case in.Components != 1:
		return fmt.Errorf("%w: %d components (%w)", ErrUnsupported, in.Components, ErrMismatch)
	case sb != 1 && sb != 2:
		return fmt.Errorf("%w: %d bytes a sample", ErrMismatch, sb)
	case w <= 0 || h <= 0 || w != in.Width || h != in.Height && in.Height != 0:
		return fmt.Errorf("%w: the frame is %dx%d, the caller's %dx%d", ErrMismatch, in.Width, in.Height, w, h)
	case len(dst) < w*h*sb:
		return fmt.Errorf("%w: %d bytes for %dx%d samples of %d bytes", ErrMismatch, len(dst), w, h, sb)
	case in.Precision > 8*sb:
		return fmt.Errorf("%w: %d-bit samples in %d bytes", ErrMismatch, in.Precision, sb)
	}
	if in.Process == Lossless {
		return hd.checkLossless()
	}
	return hd.checkDCT()
}

func (hd *header) checkLossless() error {
	in := hd.info
	switch {
	case in.Precision < 2 || in.Precision > 16:
		return fmt.Errorf("%w: lossless precision %d", ErrCorrupt, in.Precision)
	case in.Predictor < 1 || in.Predictor > 7:
		return fmt.Errorf("%w: lossless predictor %d", ErrCorrupt, in.Predictor)
	case in.PointTransform >= in.Precision:
		return fmt.Errorf("%w: point transform %d of %d-bit samples", ErrCorrupt, in.PointTransform, in.Precision)
	case in.RestartInterval%in.Width != 0:
		return fmt.Errorf("%w: a restart interval of %d samples, not whole rows of %d", ErrUnsupported, in.RestartInterval, in.Width)
	}
	return nil
}

// checkDCT refuses what a sequential DCT frame cannot be. A scan's spectral selection and
// successive approximation (T.81 wants Ss 0, Se 63, Ah and Al 0) are ignored, as IJG's
// libjpeg ignores them with a warning (JWRN_NOT_SEQUENTIAL): real encoders write Se 0, and
// dcmtk decodes such files.
func (hd *header) checkDCT() error {
	in := hd.info
	switch {
	case in.Precision == 16 && in.Process == Extended:
		// Outside T.81, but gdcm writes it for 16-bit samples (IJG's 16-bit build).
		return fmt.Errorf("%w: 16-bit %s", ErrUnsupported, in.Process)
	case in.Precision != 8 && (in.Precision != 12 || in.Process == Baseline):
		return fmt.Errorf("%w: %s precision %d", ErrCorrupt, in.Process, in.Precision)
	case hd.tq > 3 || !hd.quantOK[hd.tq]:
		return fmt.Errorf("%w: quantization table %d is not defined", ErrCorrupt, hd.tq)
	}
	return nil
}

// restart ends a restart interval before row (lossless) or MCU at: the RSTm marker due must
// follow, and the reader starts afresh after it.
func (s *scan) restart(r entropyReader, at int) error {
	pos, err := r.align()
	if err == nil {
		pos, err = expectRST(s.f.src, pos, s.nextRST)
	}
	if err != nil {
		return fmt.Errorf("%w (restart before row or MCU %d)", err, at)
	}
	s.nextRST = (s.nextRST + 1) & 7
	r.reset(pos)
	return nil
}

// expectRST reads the marker at src[pos:], which must be RSTm, and returns the offset after it.
func expectRST(src []byte, pos, m int) (int, error) {
	code, next, err := markerAt(src, pos)
	switch {
	case err != nil:
		return pos, err
	case code == mEOI:
		return pos, fmt.Errorf("%w: EOI at byte %d where RST%d was due", ErrTruncated, pos, m)
	case int(code) != mRST0+m:
		return pos, fmt.Errorf("%w: marker %02X at byte %d where RST%d was due", ErrCorrupt, code, pos, m)
	}
	return next, nil
}

// endScan reads the markers after the scan, up to EOI: a DNL where the frame header left the
// height to it, tables and application data; another scan or frame is an error.
func (hd *header) endScan(src []byte, pos, height int) error {
	dnl := false
	for {
		m, at, err := markerAt(src, pos)
		if err != nil {
			return fmt.Errorf("%w (after the scan)", err)
		}
		switch {
		case m == mEOI && hd.info.Height == 0 && !dnl:
			return fmt.Errorf("%w: no DNL marker gives the frame's height", ErrCorrupt)
		case m == mEOI:
			return nil
		case m == mTEM:
			pos = at
			continue
		case m == mSOI || m == mSOS || m < mSOF0 || m >= mRST0 && m < mRST0+8 || m <= mSOF0+15 && m != mDHT:
			return fmt.Errorf("%w: marker %02X at byte %d after the frame's one scan", ErrCorrupt, m, at-2)
		}
		seg, err := segment(src, at, m)
		if err != nil {
			return err
		}
		if m == mDNL {
			if n := len(seg); n != 2 || int(binary.BigEndian.Uint16(seg)) != height || dnl {
				return fmt.Errorf("%w: DNL at byte %d for %d rows", ErrMismatch, at-2, height)
			}
			dnl = true
		}
		pos = at + 2 + len(seg)
	}
}

// sampleIO reads and writes the samples of dst: sb bytes each in host order, shifted left by
// pt in dst (a lossless point transform).
type sampleIO struct {
	dst []byte
	sb  int
	pt  uint
}

func (o sampleIO) get(i int) int32 {
	if o.sb == 1 {
		return int32(o.dst[i]) >> o.pt
	}
	return int32(binary.NativeEndian.Uint16(o.dst[2*i:])) >> o.pt
}

func (o sampleIO) set(i int, v int32) {
	if o.sb == 1 {
		o.dst[i] = byte(v << o.pt)
		return
	}
	binary.NativeEndian.PutUint16(o.dst[2*i:], uint16(v<<o.pt))
}
