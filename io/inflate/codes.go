package inflate

import (
	"encoding/binary"
	"fmt"
)

// codes appends the symbols of a Huffman-coded block to out, until its end-of-block code. It
// stops with errOutputLimit, between two symbols (codes may be called again to go on), once
// len(out) has passed maxOut; a block may also end up to a match past maxOut, which the
// caller checks. The check comes with the one for room, so costs nothing per symbol.
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
		if e&entryLiteral != 0 {
			// Literals come in runs: decode on while the bits for a pair table entry last.
			for {
				n := uint(e & 15)
				bits >>= n
				nb -= n
				out[o] = T(e >> 16 & 0xff)
				out[o+1] = T(e >> 24) // the second literal, or slack overwritten later
				o += 1 + int(e>>7&1)
				if nb < pairBits {
					break
				}
				if e = pairs[bits&(1<<pairBits-1)]; e&entryLiteral == 0 {
					break
				}
			}
			continue
		}
		if e == 0 { // not in the pair table
			e = lit.primary[bits&(1<<litBits-1)]
			if e&entryLink != 0 {
				e = lit.sub[int(e>>16)+int(bits>>litBits&(1<<(e&15)-1))]
			}
			if e&entryLiteral != 0 {
				n := uint(e & 15)
				bits >>= n
				nb -= n
				out[o] = T(e >> 16)
				o++
				continue
			}
		}
		l := uint(e & 0xff)
		if e&entryBase == 0 {
			if l == 0 {
				err = fmt.Errorf("%w: invalid literal/length code", ErrCorrupt)
				break
			}
			bits >>= l & 63
			nb -= l
			if e&entryEnd != 0 {
				break
			}
			err = fmt.Errorf("%w: invalid length symbol %d", ErrCorrupt, e>>16)
			break
		}
		bits >>= l & 63
		nb -= l
		x := uint(e>>8) & 15
		length := int(e>>16) + int(bits&(1<<x-1))
		bits >>= x
		nb -= x
		e = dist.primary[bits&(1<<distBits-1)]
		if e&entryLink != 0 {
			e = dist.sub[int(e>>16)+int(bits>>distBits&(1<<(e&15)-1))]
		}
		l = uint(e & 0xff)
		if e&entryBase == 0 {
			if l == 0 {
				err = fmt.Errorf("%w: invalid distance code", ErrCorrupt)
				break
			}
			bits >>= l & 63
			nb -= l
			err = fmt.Errorf("%w: invalid distance symbol %d", ErrCorrupt, e>>16)
			break
		}
		bits >>= l & 63
		nb -= l
		x = uint(e>>8) & 15
		distance := int(e>>16) + int(bits&(1<<x-1))
		bits >>= x
		nb -= x
		if distance > o {
			err = fmt.Errorf("%w: distance %d reaches before the window", ErrCorrupt, distance)
			break
		}
		src := o - distance
		switch {
		case distance >= 8 && length <= 32:
			// Eight at a time, maybe past o+length (the slack is there, and is overwritten
			// later); with distance >= 8 every group reads only values already final.
			for i := 0; i < length; i += 8 {
				*(*[8]T)(out[o+i:]) = *(*[8]T)(out[src+i:])
			}
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
		o += length
	}
	br.pos, br.bits, br.n = pos, bits, nb
	return out[:o], err
}
