package jpeg

import "fmt"

// refReader is the reference reader of entropy-coded data: one bit at a time (T.81 F.2.2.5,
// NEXTBIT), failing at the first bit the data does not have.
type refReader struct {
	src  []byte
	pos  int  // the next byte of src
	cur  byte // the byte being read
	left uint // its bits not yet read
}

func (r *refReader) reset(pos int) { *r = refReader{src: r.src, pos: pos} }

// bit returns the next bit; a marker (other than a stuffed FF 00) ends the data.
func (r *refReader) bit() (int32, error) {
	if r.left == 0 {
		if r.pos >= len(r.src) {
			return 0, fmt.Errorf("%w: the data ends at byte %d inside entropy-coded data", ErrTruncated, r.pos)
		}
		b := r.src[r.pos]
		if b == 0xFF {
			if r.pos+1 >= len(r.src) || r.src[r.pos+1] != 0 {
				return 0, fmt.Errorf("%w: the entropy-coded data ends at a marker at byte %d", ErrTruncated, r.pos)
			}
			r.pos++
		}
		r.pos++
		r.cur, r.left = b, 8
	}
	r.left--
	return int32(r.cur>>r.left) & 1, nil
}

// decode is DECODE (F.2.2.3, Figure F.16): extend the code a bit at a time until it is no
// larger than MAXCODE of its length.
func (r *refReader) decode(t *huffTable) (int, error) {
	code := int32(0)
	for l := 1; l <= 16; l++ {
		b, err := r.bit()
		if err != nil {
			return 0, err
		}
		code = code<<1 | b
		if code <= t.maxcode[l] {
			return int(t.vals[t.valptr[l]+code-t.mincode[l]]), nil
		}
	}
	return 0, fmt.Errorf("%w: no Huffman code matches the bits before byte %d", ErrCorrupt, r.pos)
}

// receive is RECEIVE (F.2.2.4): s bits as an unsigned number.
func (r *refReader) receive(s uint) (int32, error) {
	v := int32(0)
	for range s {
		b, err := r.bit()
		if err != nil {
			return 0, err
		}
		v = v<<1 | b
	}
	return v, nil
}

// overrun is always false: the reference fails at the first missing bit.
func (r *refReader) overrun() bool { return false }

// align drops the bits left of the current byte (padding); the marker must come next.
func (r *refReader) align() (int, error) {
	r.left = 0
	return r.pos, nil
}

// entropyReader is what the scan decoders need of a reader: refReader or bitReader.
type entropyReader interface {
	decode(t *huffTable) (int, error)
	receive(s uint) (int32, error)
	overrun() bool
	align() (int, error)
	reset(pos int)
}

// predict is Table H.1's prediction of selection sel from the reconstructed samples to the
// left (ra), above (rb) and above-left (rc), in full integer precision with arithmetic shifts.
func predict(sel int, ra, rb, rc int32) int32 {
	switch sel {
	case 1:
		return ra
	case 2:
		return rb
	case 3:
		return rc
	case 4:
		return ra + rb - rc
	case 5:
		return ra + (rb-rc)>>1
	case 6:
		return rb + (ra-rc)>>1
	}
	return (ra + rb) >> 1
}

// losslessReference decodes a lossless scan sample by sample (H.2): each difference read
// with DECODE and RECEIVE, each prediction by predict from the samples already in dst.
func (s *scan) losslessReference(r entropyReader, dc *huffTable) error {
	f := s.f
	out := sampleIO{dst: f.dst, sb: f.sb, pt: uint(f.pt)}
	for y := range f.h {
		first, err := s.rowStart(r, y)
		if err != nil {
			return err
		}
		for x := range f.w {
			d, err := losslessDiff(r, dc)
			if err != nil {
				return fmt.Errorf("%w (row %d)", err, y)
			}
			i := y*f.w + x
			var px int32
			switch {
			case first && x == 0:
				px = s.initial
			case first:
				px = out.get(i - 1)
			case x == 0:
				px = out.get(i - f.w)
			default:
				px = predict(s.predictor, out.get(i-1), out.get(i-f.w), out.get(i-f.w-1))
			}
			out.set(i, (px+d)&s.mask)
		}
	}
	return nil
}

// losslessDiff reads one difference (H.1.2.2): its category SSSS, then SSSS bits; category 16
// is 32768 with no bits.
func losslessDiff(r entropyReader, dc *huffTable) (int32, error) {
	t, err := r.decode(dc)
	if err != nil {
		return 0, err
	}
	switch {
	case t == 0:
		return 0, nil
	case t == 16:
		return 32768, nil
	case t > 16:
		return 0, fmt.Errorf("%w: difference category %d", ErrCorrupt, t)
	}
	v, err := r.receive(uint(t))
	if err != nil {
		return 0, err
	}
	return extend(v, uint(t)), nil
}
