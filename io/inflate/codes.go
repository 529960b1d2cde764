package inflate

import (
	"encoding/binary"
	"fmt"
)

// codes appends the symbols of a Huffman-coded block to out, until its end-of-block code. It
// stops with errOutputLimit, between two symbols (codes may be called again to go on), once
// len(out) has passed maxOut; a block may also end up to a match past maxOut, which the
// caller checks. The check comes with the one for room, so costs nothing per symbol.
// Its steps (literals, lookup, baseValue, copyShort) are small enough to be inlined, so that
// the loop's state stays in registers; only copyLong's rarer matches are calls.
func codes[T symbol](br *bitReader, out []T, limit int64, maxOut int, lit, dist *huffman) ([]T, error) {
	o := len(out)
	if o > maxOut {
		return out, errOutputLimit
	}
	// br's state in locals, written back on the way out: the compiler keeps locals in
	// registers, where it stores and reloads br's fields around every symbol.
	data, pos, bits, nb := br.data, br.pos, br.bits, br.n
	pairs := lit.pairs
	// out's length: room for the writes of a symbol beyond maxOut, no more, so that running
	// out of room is when the bound is checked.
	most := maxOut + maxMatch + 64
	out = out[:min(cap(out), most)]
	var err error
	for {
		// Room for a match, or for the literals decoded without coming back here: at most one
		// per bit of a full bit buffer, and the pair loop's store one past them.
		if o+maxMatch+64 > len(out) {
			if o > maxOut {
				err = errOutputLimit
				break
			}
			out = grow(out, o, most)
		}
		if nb < 48 { // longest length/distance pair: 15+5+15+13 bits
			if pos+8 <= len(data) { // refill, inlined
				bits |= binary.LittleEndian.Uint64(data[pos:]) << (nb & 63)
				pos += int((63 - nb) >> 3)
				nb |= 56
			} else {
				br.pos, br.bits, br.n = pos, bits, nb
				br.refill()
				pos, bits, nb = br.pos, br.bits, br.n
			}
			if int64(pos)*8-int64(nb) > limit {
				err = errPastLimit
				break
			}
		}
		e := pairs[bits&(1<<pairBits-1)]
		if e == 0 { // not in the pair table
			e = lit.lookup(bits, litBits)
		}
		if e&entryLiteral != 0 {
			o, bits, nb = literals(out, o, bits, nb, e, pairs)
			continue
		}
		if e&entryBase == 0 { // the end of the block, or a code or symbol that may not occur
			bits, nb, err = notBase(e, bits, nb, false)
			break
		}
		length, n := baseValue(e, bits)
		bits >>= n & 63
		nb -= n
		e = dist.lookup(bits, distBits)
		if e&entryBase == 0 { // a distance code or symbol that may not occur
			bits, nb, err = notBase(e, bits, nb, true)
			break
		}
		distance, n := baseValue(e, bits)
		bits >>= n & 63
		nb -= n
		if distance > o {
			err = fmt.Errorf("%w: distance %d reaches before the window", ErrCorrupt, distance)
			break
		}
		if distance >= 8 && length <= 32 {
			copyShort(out, o, distance, length)
		} else {
			copyLong(out, o, distance, length)
		}
		o += length
	}
	br.pos, br.bits, br.n = pos, bits, nb
	return out[:o], err
}

// literals writes the run of literals starting with literal entry e (of the pair table, or
// the literal/length table's) to out[o:], decoding on while the bits for a pair table entry
// last and the entries are literals. It returns the
// new o and bit buffer.
func literals[T symbol](out []T, o int, bits uint64, nb uint, e uint32, pairs *[1 << pairBits]uint32) (int, uint64, uint) {
	for {
		n := uint(e & 15)
		bits >>= n
		nb -= n
		out[o] = T(e >> 16 & 0xff)
		out[o+1] = T(e >> 24) // the second literal, or slack overwritten later
		o += 1 + int(e>>7&1)
		if nb < pairBits {
			return o, bits, nb
		}
		if e = pairs[bits&(1<<pairBits-1)]; e&entryLiteral == 0 {
			return o, bits, nb
		}
	}
}

// lookup returns the entry of the code in the low bits of bits, from a table with a primary
// table of tableBits bits: the subtable's entry where the primary's links to one.
func (h *huffman) lookup(bits uint64, tableBits uint) uint32 {
	e := h.primary[bits&(1<<tableBits-1)]
	if e&entryLink != 0 {
		e = h.sub[int(e>>16)+int(bits>>tableBits&(1<<(e&15)-1))]
	}
	return e
}

// baseValue returns the length or distance of base entry e, its extra bits read from bits
// after the code, and how many bits the code and the extra bits take.
func baseValue(e uint32, bits uint64) (int, uint) {
	l := uint(e & 0xff)
	x := uint(e>>8) & 15
	return int(e>>16) + int(bits>>(l&63)&(1<<x-1)), l + x
}

// notBase drops the code of entry e, of the literal/length table (or of the distance table
// where distance), neither a literal nor a base, from the bit buffer, and returns the error
// it stands for: nil for the end of the block.
func notBase(e uint32, bits uint64, nb uint, distance bool) (uint64, uint, error) {
	n := uint(e & 0xff) // 0: no code at all
	var err error
	switch {
	case n == 0 && distance:
		err = fmt.Errorf("%w: invalid distance code", ErrCorrupt)
	case n == 0:
		err = fmt.Errorf("%w: invalid literal/length code", ErrCorrupt)
	case distance:
		err = fmt.Errorf("%w: invalid distance symbol %d", ErrCorrupt, e>>16)
	case e&entryEnd == 0:
		err = fmt.Errorf("%w: invalid length symbol %d", ErrCorrupt, e>>16)
	}
	return bits >> (n & 63), nb - n, err
}

// copyShort copies a match of length <= 32 values at distance >= 8 back to out[o:], which
// has room for up to 32 values past it: eight at a time, maybe past o+length (the slack is
// overwritten later); with distance >= 8 every group reads only values already final.
func copyShort[T symbol](out []T, o, distance, length int) {
	src := o - distance
	for i := 0; i < length; i += 8 {
		*(*[8]T)(out[o+i:]) = *(*[8]T)(out[src+i:])
	}
}

// copyLong copies the other matches of length values at distance back to out[o:]: a long
// match, or a short one at a short distance.
func copyLong[T symbol](out []T, o, distance, length int) {
	src := o - distance
	switch {
	case distance >= length:
		copy(out[o:o+length], out[src:src+length])
	case length <= 16:
		for i := range length {
			out[o+i] = out[src+i]
		}
	default:
		// Overlapping (distance < length): the last distance values repeat; copy them,
		// then the copy so far, doubling each time.
		n := copy(out[o:o+distance], out[src:o])
		for n < length {
			n += copy(out[o+n:o+length], out[o:o+n])
		}
	}
}
