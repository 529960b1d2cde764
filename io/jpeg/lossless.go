package jpeg

import (
	"encoding/binary"
	"fmt"
)

// chunk is how many samples of a row the fast lossless path decodes, reconstructs and stores
// at a time (its buffers are fixed, whatever the width).
const chunk = 256

// rowChunk holds a chunk's differences (then samples) and the reconstructed samples above it,
// above[j] standing above-left of d[j] (Rc) and above[j+1] above it (Rb).
type rowChunk struct {
	d     [chunk]int32
	above [chunk + 1]int32
}

// decodeLossless sets up a lossless scan and decodes it through the fast path, or the
// reference.
func (s *scan) decodeLossless(r entropyReader, fast *bitReader, reference bool) error {
	in := s.hdr.info
	dc, err := tables(&s.hdr.dc, s.hdr.td, "DC")
	if err != nil {
		return err
	}
	s.predictor = in.Predictor
	s.initial = 1 << (in.Precision - in.PointTransform - 1)
	s.mask = 1<<(in.Precision-in.PointTransform) - 1
	s.rowsPerInterval = in.RestartInterval / in.Width
	if reference {
		return s.losslessReference(r, dc)
	}
	return s.lossless(fast, dc)
}

// lossless is the fast path of losslessReference: a chunk of differences at a time through
// the look-up table, then the chunk's reconstruction by a loop for its predictor.
func (s *scan) lossless(r *bitReader, dc *huffTable) error {
	f := s.f
	out := sampleIO{dst: f.dst, sb: f.sb, pt: uint(f.pt)}
	var b rowChunk
	var dt diffTable
	dt.build(dc)
	for y := range f.h {
		first, err := s.rowStart(r, y)
		if err != nil {
			return err
		}
		ra := s.initial
		for x0 := 0; x0 < f.w; x0 += chunk {
			d := b.d[:min(chunk, f.w-x0)]
			if err := r.diffs(dc, &dt, d); err != nil {
				return fmt.Errorf("%w (row %d)", err, y)
			}
			i := y*f.w + x0
			switch {
			case first:
				ra = undiffLeft(d, ra, s.mask)
			case x0 == 0:
				// The row's first sample is predicted from above (Rb).
				if s.predictor == 1 {
					out.load(b.above[1:2], i-f.w) // only Rb of the first sample
				} else {
					out.load(b.above[1:len(d)+1], i-f.w)
				}
				d[0] = (b.above[1] + d[0]) & s.mask
				ra = undiffRow(s.predictor, d[1:], b.above[1:len(d)+1], d[0], s.mask)
			default:
				if s.predictor != 1 {
					out.load(b.above[:len(d)+1], i-f.w-1)
				}
				ra = undiffRow(s.predictor, d, b.above[:len(d)+1], ra, s.mask)
			}
			out.store(d, i)
		}
		if r.overrun() {
			return fmt.Errorf("%w: the entropy-coded data ends at byte %d (row %d)", ErrTruncated, r.pos, y)
		}
	}
	return nil
}

// rowStart begins row y of a lossless scan: where a restart interval starts, it reads the
// RSTm marker. first: the row is the scan's or an interval's first (predicted from the left).
func (s *scan) rowStart(r entropyReader, y int) (first bool, err error) {
	if y == 0 {
		return true, nil
	}
	if s.rowsPerInterval == 0 || y%s.rowsPerInterval != 0 {
		return false, nil
	}
	return true, s.restart(r, y)
}

// undiffLeft reconstructs samples predicted from the left (Px = Ra), the predictor of the
// first row of the scan and of each restart interval: d[j] = (Ra + d[j]) mod 2^(P-Pt).
// It returns the last sample.
func undiffLeft(d []int32, ra, mask int32) int32 {
	for j := range d {
		ra = (ra + d[j]) & mask
		d[j] = ra
	}
	return ra
}

// undiffRow reconstructs d in place with predictor sel (Table H.1): Ra is the sample before,
// Rb = above[j+1] and Rc = above[j]; d[j] = (Px + d[j]) mod 2^(P-Pt). It returns the last
// sample (ra where d is empty).
func undiffRow(sel int, d, above []int32, ra, mask int32) int32 {
	above = above[:len(d)+1]
	switch sel {
	case 1:
		return undiffLeft(d, ra, mask)
	case 2:
		for j := range d {
			ra = (above[j+1] + d[j]) & mask
			d[j] = ra
		}
	case 3:
		for j := range d {
			ra = (above[j] + d[j]) & mask
			d[j] = ra
		}
	case 4:
		for j := range d {
			ra = (ra + above[j+1] - above[j] + d[j]) & mask
			d[j] = ra
		}
	case 5:
		for j := range d {
			ra = (ra + (above[j+1]-above[j])>>1 + d[j]) & mask
			d[j] = ra
		}
	case 6:
		for j := range d {
			ra = (above[j+1] + (ra-above[j])>>1 + d[j]) & mask
			d[j] = ra
		}
	default:
		for j := range d {
			ra = ((ra+above[j+1])>>1 + d[j]) & mask
			d[j] = ra
		}
	}
	return ra
}

// load reads len(v) samples from sample i on, without the point transform.
func (o sampleIO) load(v []int32, i int) {
	if o.sb == 1 {
		src := o.dst[i : i+len(v)]
		for k := range v {
			v[k] = int32(src[k]) >> o.pt
		}
		return
	}
	src := o.dst[2*i : 2*(i+len(v))]
	for k := range v {
		v[k] = int32(binary.NativeEndian.Uint16(src[2*k:])) >> o.pt
	}
}

// store writes v to the samples from i on, shifted left by the point transform.
func (o sampleIO) store(v []int32, i int) {
	if o.sb == 1 {
		dst := o.dst[i : i+len(v)]
		for k := range v {
			dst[k] = byte(v[k] << o.pt)
		}
		return
	}
	dst := o.dst[2*i : 2*(i+len(v))]
	for k := range v {
		binary.NativeEndian.PutUint16(dst[2*k:], uint16(v[k]<<o.pt))
	}
}

// diffBits is how many bits the fast path's difference table decodes at once.
const diffBits = 11

// diffTable maps the next diffBits bits to the difference they start with (H.1.2.2), as
// diff<<10 | ssss<<5 | length: where the code and its SSSS extra bits fit in diffBits, the
// difference itself with ssss 0 and the length of both; where only the code fits, ssss (up
// to 31: an invalid category) and the code's length, the extra bits still to be read; 0 where
// the code is longer.
type diffTable [1 << diffBits]int32

func (dt *diffTable) build(t *huffTable) {
	*dt = diffTable{}
	for p := range int32(1 << diffBits) {
		e := t.lookup[p>>(diffBits-lookupBits)]
		l, ssss := int32(e>>8), int32(e&0xFF)
		switch {
		case e == 0:
			// longer than lookupBits: left to decodeLong
		case ssss == 0:
			dt[p] = l
		case ssss == 16:
			dt[p] = 32768<<10 | l
		case l+ssss <= diffBits:
			v := p >> (diffBits - l - ssss) & (1<<ssss - 1)
			dt[p] = extend(v, uint(ssss))<<10 | (l + ssss)
		default:
			dt[p] = min(ssss, 31)<<5 | l
		}
	}
}

// diffs decodes len(d) differences (H.1.2.2) with acc and n held in registers; a fill per
// difference suffices, as one takes at most 16+15 bits.
func (r *bitReader) diffs(t *huffTable, dt *diffTable, d []int32) error {
	acc, n := r.acc, r.n
	for j := range d {
		if n < 32 {
			r.acc, r.n = acc, n
			r.fill()
			acc, n = r.acc, r.n
		}
		e := dt[acc>>(64-diffBits)]
		if e == 0 {
			r.acc, r.n = acc, n
			v, err := r.decodeLong(t)
			if err != nil {
				return err
			}
			acc, n, e = r.acc, r.n, int32(min(v, 31))<<5
		}
		l := uint(e & 31)
		acc <<= l
		n -= l
		if s := uint(e>>5) & 31; s != 0 {
			switch {
			case s < 16:
				e = extend(int32(acc>>(64-s)), s) << 10
				acc <<= s
				n -= s
			case s == 16:
				e = 32768 << 10
			default:
				return fmt.Errorf("%w: difference category %d", ErrCorrupt, s)
			}
		}
		d[j] = e >> 10
	}
	r.acc, r.n = acc, n
	return nil
}
