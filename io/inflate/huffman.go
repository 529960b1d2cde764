package inflate

import (
	"fmt"
	"math/bits"
)

// Huffman tables: a primary table indexed by the next tableBits bits (litBits, distBits or
// clBits), whose entries give a symbol and its code length, or a link to a subtable for longer
// codes. An entry is value<<16 | flags | extra<<8 | length. What value and the flags hold is
// the table's choice (build's vals): the literal/length and distance tables fold in what
// decoding the symbol needs (literal byte, length or distance base and its extra bits), so a
// symbol costs one lookup.
//
// A literal/length table that decodes a block also gets a pair table (buildPairs), indexed by
// the next pairBits bits, that decodes two literals at once where both codes fit in them: the
// high and low bytes of int16 volumes take about 3 and 9 bits.
const (
	litBits  = 10
	distBits = 10
	clBits   = 7 // code length codes are at most 7 bits: no subtables, and a small table to fill
	pairBits = 12

	maxTableBits = max(litBits, distBits, clBits)
	maxCodeLen   = 15

	entryLink    = 1 << 15 // links to sub[value:], indexed by the (length) bits after the primary's
	entryLiteral = 1 << 14 // value is a literal byte
	entryBase    = 1 << 13 // value is a length or distance base; extra bits in bits 8-11
	entryEnd     = 1 << 12 // end of block
	entryPair    = 1 << 7  // (pair table) two literals: value is the first | the second<<8
	// A literal/length or distance entry with a length but none of these flags is a symbol that
	// may not occur (value: the symbol); one of length 0 is no code at all.
)

type huffman struct {
	primary [1 << maxTableBits]uint32 // length 0: no such code
	sub     []uint32                  // entries hold the whole code length, primary bits included
	// linked[slot] == gen: the slot's subtable belongs to this build (entries are not cleared
	// between builds).
	linked [1 << maxTableBits]uint32
	gen    uint32
	pairs  *[1 << pairBits]uint32 // buildPairs's; allocated on first use
}

// errBadCode: code lengths that do not form a prefix code deflate allows.
// The block finder tries many positions that are not block headers: the errors of a header
// are made once, not per rejection.
var (
	errBadCode     = fmt.Errorf("%w: invalid Huffman code lengths", ErrCorrupt)
	errBadSym      = fmt.Errorf("%w: invalid Huffman code", ErrCorrupt)
	errCodeCounts  = fmt.Errorf("%w: dynamic block with more than 286 literal/length or 30 distance codes", ErrCorrupt)
	errRepeatFirst = fmt.Errorf("%w: repeat of no previous code length", ErrCorrupt)
	errRepeatOver  = fmt.Errorf("%w: code lengths overrun the header", ErrCorrupt)
	errNoEnd       = fmt.Errorf("%w: no end-of-block code", ErrCorrupt)
)

// build makes the decoding table of the canonical code with these lengths (0: unused), with a
// primary table of tableBits bits. Like zlib, it accepts only complete codes, and the single
// code of length 1 (a distance code with one symbol, or none). vals[sym] is what the entries
// of sym hold besides the code length; nil: sym<<16.
func (h *huffman) build(lengths []uint8, tableBits int, vals []uint32) error {
	var count [maxCodeLen + 1]int
	maxLen := 0
	for _, l := range lengths {
		count[l]++
		if int(l) > maxLen {
			maxLen = int(l)
		}
	}
	count[0] = 0
	left := 1
	for l := 1; l <= maxCodeLen; l++ {
		left = left<<1 - count[l]
		if left < 0 {
			return errBadCode // over-subscribed
		}
	}
	complete := left == 0
	if !complete && !(maxLen == 1 && count[1] == 1) && maxLen != 0 {
		return errBadCode // incomplete
	}
	primary := h.primary[:1<<tableBits]
	// A complete code fills every entry of the primary table and of each subtable, so only an
	// incomplete one needs them cleared (and it has no long codes).
	if !complete {
		clear(primary)
	}
	h.sub = h.sub[:0]
	if maxLen == 0 {
		return nil
	}
	if h.gen++; h.gen == 0 {
		clear(h.linked[:])
		h.gen = 1
	}
	var next [maxCodeLen + 2]int
	for l := 1; l <= maxCodeLen; l++ {
		next[l+1] = (next[l] + count[l]) << 1
	}
	// Subtables: one per primary slot that long codes share, sized for the longest of them.
	// Codes are assigned in canonical order, so the long codes of one slot need at most
	// 2^(maxLen-tableBits) entries.
	subBits := max(maxLen-tableBits, 0)
	for sym, l := range lengths {
		if l == 0 {
			continue
		}
		code := next[l]
		next[l]++
		rev := int(bits.Reverse16(uint16(code)) >> (16 - l))
		e := uint32(sym)<<16 | uint32(l)
		if vals != nil {
			e = vals[sym] | uint32(l)
		}
		if int(l) <= tableBits {
			for i := rev; i < len(primary); i += 1 << l {
				primary[i] = e
			}
			continue
		}
		slot := rev & (1<<tableBits - 1)
		link := primary[slot]
		if h.linked[slot] != h.gen {
			h.linked[slot] = h.gen
			link = uint32(len(h.sub))<<16 | entryLink | uint32(subBits)
			primary[slot] = link
			n := len(h.sub) + 1<<subBits
			if n > cap(h.sub) {
				h.sub = append(h.sub[:cap(h.sub)], make([]uint32, n-cap(h.sub))...)
			}
			h.sub = h.sub[:n]
		}
		base := int(link >> 16)
		for i := rev >> tableBits; i < 1<<subBits; i += 1 << (int(l) - tableBits) {
			h.sub[base+i] = e
		}
	}
	return nil
}

// buildPairs makes h's pair table from its primary table (built with litBits and litVals):
// single and paired literals and length codes of up to pairBits bits; 0 where decoding needs
// the primary table (longer codes, end of block, no code). The block finder builds tables for
// many positions that it rejects: only a decoder builds this one, once per block.
func (h *huffman) buildPairs() {
	if h.pairs == nil {
		h.pairs = new([1 << pairBits]uint32)
	}
	for i := range h.pairs {
		e := h.primary[i&(1<<litBits-1)]
		if e&entryLiteral != 0 {
			l := e & 15
			// i>>l: the pairBits-l bits after the first code; the second code counts only
			// if it lies within them (its entry is decided by its own bits alone).
			e2 := h.primary[i>>l&(1<<litBits-1)]
			if e2&entryLiteral != 0 && l+e2&15 <= pairBits {
				e = (e>>16|e2>>16<<8)<<16 | entryLiteral | entryPair | (l + e2&15)
			}
		} else if e&entryBase == 0 {
			e = 0
		}
		h.pairs[i] = e
	}
}

// decodeSym reads one symbol of a table built with clBits and no vals; br must hold at least
// maxCodeLen bits.
func (h *huffman) decodeSym(br *bitReader) (int, error) {
	e := h.primary[br.bits&(1<<clBits-1)]
	if e&entryLink != 0 {
		e = h.sub[int(e>>16)+int(br.bits>>clBits&(1<<(e&15)-1))]
	}
	l := uint(e & 0xff)
	if l == 0 {
		return 0, errBadSym
	}
	br.consume(l)
	return int(e >> 16), nil
}

var (
	// litVals and distVals: the table entries of each symbol, less its code length.
	litVals   [288]uint32
	distVals  [32]uint32
	fixedLit  huffman
	fixedDist huffman
)

// clOrder is the order of the code length code's lengths in a dynamic block header.
var clOrder = [19]uint8{16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15}

func init() {
	for i := range 256 {
		litVals[i] = uint32(i)<<16 | entryLiteral
	}
	litVals[256] = 256<<16 | entryEnd
	base := 3
	for i := range 29 {
		e := 0
		if i >= 8 && i < 28 {
			e = i/4 - 1
		}
		if i == 28 {
			base = 258
		}
		litVals[257+i] = uint32(base)<<16 | entryBase | uint32(e)<<8
		base += 1 << e
	}
	litVals[286], litVals[287] = 286<<16, 287<<16 // may not occur
	dbase := 1
	for i := range 30 {
		e := 0
		if i >= 4 {
			e = i/2 - 1
		}
		distVals[i] = uint32(dbase)<<16 | entryBase | uint32(e)<<8
		dbase += 1 << e
	}
	distVals[30], distVals[31] = 30<<16, 31<<16 // may not occur
	var lit [288]uint8
	for i := range lit {
		switch {
		case i < 144:
			lit[i] = 8
		case i < 256:
			lit[i] = 9
		case i < 280:
			lit[i] = 7
		default:
			lit[i] = 8
		}
	}
	var dist [32]uint8 // 30 and 31 complete the code; decoding them is an error
	for i := range dist {
		dist[i] = 5
	}
	if fixedLit.build(lit[:], litBits, litVals[:]) != nil || fixedDist.build(dist[:], distBits, distVals[:]) != nil {
		panic("inflate: fixed Huffman tables")
	}
	fixedLit.buildPairs()
}

// readDynamicHeader reads a dynamic block's code lengths (after BFINAL and BTYPE) and builds
// its tables into lit and dist. The block finder calls it on candidate positions: it checks
// everything RFC 1951 and zlib require of the header.
func readDynamicHeader(br *bitReader, lit, dist, cl *huffman, lengths *[320]uint8) error {
	if br.n < 14 {
		br.refill()
	}
	nlit := int(br.peek(5)) + 257
	ndist := int(br.peek(10)>>5) + 1
	nclen := int(br.peek(14)>>10) + 4
	br.consume(14)
	if nlit > 286 || ndist > 30 {
		return errCodeCounts
	}
	var cll [19]uint8
	kraft := 0 // in units of 2^-7: a complete code sums to 128
	for i := 0; i < nclen; i++ {
		l := uint8(br.read(3))
		cll[clOrder[i]] = l
		if l != 0 {
			kraft += 128 >> l
		}
	}
	if kraft != 128 { // cheap: the block finder rejects most candidates here
		return errBadCode
	}
	if err := cl.build(cll[:], clBits, nil); err != nil {
		return err
	}
	n := nlit + ndist
	for i := 0; i < n; {
		if br.n < 16 {
			br.refill()
		}
		sym, err := cl.decodeSym(br)
		if err != nil {
			return err
		}
		if sym < 16 {
			lengths[i] = uint8(sym)
			i++
			continue
		}
		var rep int
		var val uint8
		switch sym {
		case 16:
			if i == 0 {
				return errRepeatFirst
			}
			rep, val = 3+int(br.read(2)), lengths[i-1]
		case 17:
			rep = 3 + int(br.read(3))
		default:
			rep = 11 + int(br.read(7))
		}
		if i+rep > n {
			return errRepeatOver
		}
		for ; rep > 0; rep-- {
			lengths[i] = val
			i++
		}
	}
	if lengths[256] == 0 {
		return errNoEnd
	}
	if err := lit.build(lengths[:nlit], litBits, litVals[:]); err != nil {
		return err
	}
	return dist.build(lengths[nlit:n], distBits, distVals[:])
}
