package jpeg

import (
	"encoding/binary"
	"fmt"
)

// bitReader is the fast path's reader of entropy-coded data: up to 64 bits in acc, the first
// at bit 63. At a marker (or the end of src) it stops reading and appends zero bits instead,
// counting them in pad: a decoder that consumed any of them (pad > n) read past the data,
// which overrun reports; peeking at them for a table look-up is harmless.
type bitReader struct {
	src  []byte
	pos  int    // the next byte of src to load
	acc  uint64 // the bits loaded, first at bit 63
	n    uint   // how many bits acc holds
	pad  uint   // how many of them (the last) are zeros past the data
	stop bool   // a marker or the end of src was reached, at pos
}

func (r *bitReader) reset(pos int) { *r = bitReader{src: r.src, pos: pos} }

// fill loads bytes until acc holds more than 56 bits, removing stuffed zeros (FF 00).
func (r *bitReader) fill() {
	if !r.stop && r.pos+8 <= len(r.src) {
		// Eight bytes at once where none of them is 0xFF.
		w := binary.BigEndian.Uint64(r.src[r.pos:])
		if x := ^w; (x-0x0101010101010101)&^x&0x8080808080808080 == 0 {
			k := (64 - r.n) >> 3
			r.acc |= w >> r.n &^ (1<<(64-r.n-8*k) - 1)
			r.pos += int(k)
			r.n += 8 * k
			return
		}
	}
	for r.n <= 56 {
		if !r.stop {
			if r.pos < len(r.src) {
				b := r.src[r.pos]
				if b != 0xFF {
					r.acc |= uint64(b) << (56 - r.n)
					r.pos++
					r.n += 8
					continue
				}
				if r.pos+1 < len(r.src) && r.src[r.pos+1] == 0 {
					r.acc |= 0xFF << (56 - r.n)
					r.pos += 2
					r.n += 8
					continue
				}
			}
			r.stop = true
		}
		r.n += 8
		r.pad += 8
	}
}

// overrun reports whether the decoder consumed bits past the end of the data.
func (r *bitReader) overrun() bool { return r.pad > r.n }

// decode reads one Huffman-coded value: one look-up for codes of up to lookupBits bits, the
// canonical limits (F.2.2.3) for longer ones.
func (r *bitReader) decode(t *huffTable) (int, error) {
	if r.n < 16 {
		r.fill()
	}
	if e := t.lookup[r.acc>>(64-lookupBits)]; e != 0 {
		l := uint(e >> 8)
		r.acc <<= l
		r.n -= l
		return int(e & 0xFF), nil
	}
	return r.decodeLong(t)
}

// decodeLong decodes a code longer than lookupBits bits (acc holds at least 16 bits).
func (r *bitReader) decodeLong(t *huffTable) (int, error) {
	c := int32(r.acc >> 48)
	for l := uint(lookupBits + 1); l <= 16; l++ {
		if code := c >> (16 - l); code <= t.maxcode[l] {
			r.acc <<= l
			r.n -= l
			return int(t.vals[t.valptr[l]+code-t.mincode[l]]), nil
		}
	}
	return 0, fmt.Errorf("%w: no Huffman code matches the bits before byte %d", ErrCorrupt, r.pos)
}

// receive reads s bits (0 <= s <= 16) as an unsigned number (F.2.2.4, RECEIVE).
func (r *bitReader) receive(s uint) (int32, error) {
	if r.n < s {
		r.fill()
	}
	if s == 0 {
		return 0, nil
	}
	v := int32(r.acc >> (64 - s))
	r.acc <<= s
	r.n -= s
	return v, nil
}

// align ends an entropy-coded segment: the bits left of its last byte are padding, and the
// marker must come next. It returns the marker's offset.
func (r *bitReader) align() (int, error) {
	if r.overrun() {
		return r.pos, fmt.Errorf("%w: the entropy-coded data ends at byte %d before the segment's last value", ErrTruncated, r.pos)
	}
	if r.n-r.pad >= 8 {
		return r.pos, fmt.Errorf("%w: entropy-coded data goes on past the segment's last value, before byte %d", ErrCorrupt, r.pos)
	}
	return r.pos, nil
}
