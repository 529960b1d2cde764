package inflate

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"sync"
)

// The deflate decoder (RFC 1951) of this package. A decoder started in the middle of a stream
// does not know the 32 KiB that came before its start: it writes uint16 symbols rather than
// bytes, values 0-255 being bytes and value windowMarker+i standing for byte i of that window.
// Its symbols start with those 32768 markers, so a back-reference reaching before the start
// copies markers like any other value, and resolve later replaces them with the bytes of the
// preceding output once it is known. Once its last 32 KiB of symbols hold no marker, no later
// back-reference (32 KiB at most) can reach one: it goes over to bytes, as rapidgzip does,
// which halves its stores and leaves the stitching a copy instead of a resolve. A decoder that
// knows its window (the stream's start, or decoding in order) writes bytes from the start.

const (
	windowSize   = 1 << 15
	windowMarker = 256
	maxMatch     = 258
)

// bitReader reads deflate's LSB-first bit stream from a byte slice.
type bitReader struct {
	data []byte
	pos  int    // next byte to load into bits
	bits uint64 // unread bits, the next one in bit 0
	n    uint   // how many of them are valid
}

func newBitReader(data []byte, bit int64) *bitReader {
	br := &bitReader{data: data, pos: int(bit >> 3)}
	br.refill()
	br.consume(uint(bit & 7))
	return br
}

// bitPos is the position of the next unread bit in data.
func (br *bitReader) bitPos() int64 { return int64(br.pos)*8 - int64(br.n) }

// refill tops bits up to at least 56 valid bits while data lasts; past the end it feeds zeros
// and counts them as overrun, so a stream that ends early decodes garbage and is caught by
// overran.
func (br *bitReader) refill() {
	if br.pos+8 <= len(br.data) {
		br.bits |= binary.LittleEndian.Uint64(br.data[br.pos:]) << (br.n & 63)
		br.pos += int((63 - br.n) >> 3)
		br.n |= 56
		return
	}
	for br.n <= 56 {
		var b byte
		if br.pos < len(br.data) {
			b = br.data[br.pos]
		}
		br.pos++ // may go past the end: bitPos then counts the zeros fed
		br.bits |= uint64(b) << (br.n & 63)
		br.n += 8
	}
}

func (br *bitReader) overran() bool { return br.bitPos() > int64(len(br.data))*8 }

// peek and consume take n < 64; the masks tell the compiler so, which saves the code Go
// otherwise adds for shifts of 64 and more.
func (br *bitReader) peek(n uint) uint64 { return br.bits & (1<<(n&63) - 1) }

func (br *bitReader) consume(n uint) {
	br.bits >>= n & 63
	br.n -= n
}

// read returns the next n (<= 32) bits, refilling first.
func (br *bitReader) read(n uint) uint64 {
	if br.n < n {
		br.refill()
	}
	v := br.peek(n)
	br.consume(n)
	return v
}

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

// errPastLimit: a block ran past the decoder's limit (the end of the data, give or take the
// zeros fed past it, or a speculative decoder's bound).
var errPastLimit = fmt.Errorf("%w: deflate block runs past the end of the data", ErrCorrupt)

// errOutputLimit: the decoder's output went past what it was allowed (decoder.allow) and no
// more could be had. The stitcher turns it into a verdict only where the count is exact.
var errOutputLimit = fmt.Errorf("%w: more output than the destination can take", ErrCorrupt)

// noLimit is the allowance of a decoder that may output without bound (it leaves room for the
// sums of codes' index arithmetic).
const noLimit = 1 << 62

// grantStep is how much more output a speculative decoder draws from its budget at a time:
// large enough that drawing costs nothing next to decoding (a lock per 256 KiB, about 0.3 ms
// of a core's decoding), small enough that what decoders hold beyond their output is small.
const grantStep = 256 << 10

// budget is the output that the speculative decoders may hold between them, in values
// (symbols or bytes), shared through a lock.
type budget struct {
	mu   sync.Mutex
	left int
}

// take draws between least and most values (as many as are left), or none if fewer than
// least are left.
func (b *budget) take(least, most int) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.left < least {
		return 0
	}
	n := min(most, b.left)
	b.left -= n
	return n
}

// give returns n values drawn by take.
func (b *budget) give(n int) {
	if n == 0 {
		return
	}
	b.mu.Lock()
	b.left += n
	b.mu.Unlock()
}

// outBuf holds a decoder's output, in buffers reused from one chunk to the next.
type outBuf struct {
	syms  []uint16
	bytes []byte
}

// symbol is what a decoder writes: uint16 while markers may come, bytes after.
type symbol interface{ uint16 | byte }

// decoder inflates a run of blocks into buf: symbols after the 32 KiB of markers while a
// marker may still come (none if the window was known), then bytes after the window.
type decoder struct {
	br    *bitReader
	buf   outBuf
	win   int   // length of the window before the bytes in buf.bytes
	limit int64 // bit position past which a block is given up as not deflate
	// inBytes: the decoder writes buf.bytes; switched: it started on symbols and went over.
	inBytes, switched bool
	// lastMarker is the index of the last marker found in buf.syms; buf.syms[:scanned] have
	// been searched for markers, so that each symbol is searched once.
	lastMarker, scanned int
	lit, dist, cl       huffman
	lengths             [320]uint8

	// allow is how many values (after the window or the markers) the decoder may output; past
	// it, it draws more from share (nil: none) while allow stays at most ceiling, else it stops
	// with errOutputLimit. The start methods lift the bound (noLimit, no share).
	allow, ceiling int
	share          *budget
}

// room returns b emptied, with room for the window and at least 64 KiB.
func room[T symbol](b []T) []T {
	if cap(b) < windowSize+1<<16 {
		return make([]T, 0, windowSize+1<<20)
	}
	return b[:0]
}

// startSymbols (re)starts d at bit of data, not knowing the window before it, into buf (reused;
// its contents are replaced). A worker reuses one decoder, tables and all, for its block
// finding and every chunk it decodes.
func (d *decoder) startSymbols(data []byte, bit int64, buf outBuf) {
	d.br, d.limit = newBitReader(data, bit), int64(len(data))*8+64
	syms := room(buf.syms)[:windowSize]
	for i := range syms {
		syms[i] = uint16(windowMarker + i)
	}
	d.buf, d.win = outBuf{syms, buf.bytes[:0]}, 0
	d.inBytes, d.switched = false, false
	d.lastMarker, d.scanned = windowSize-1, windowSize
	d.allow, d.ceiling, d.share = noLimit, noLimit, nil
}

// startBytes (re)starts d at bit of data, into buf, after window (the output before bit, up
// to 32 KiB; shorter only at the stream's start).
func (d *decoder) startBytes(data []byte, bit int64, buf outBuf, window []byte) {
	d.br, d.limit = newBitReader(data, bit), int64(len(data))*8+64
	d.buf, d.win = outBuf{buf.syms[:0], append(room(buf.bytes), window...)}, len(window)
	d.inBytes, d.switched = true, false
	d.allow, d.ceiling, d.share = noLimit, noLimit, nil
}

// produced is how many values d has output (what output returns, in all).
func (d *decoder) produced() int {
	n := len(d.buf.bytes) - d.win
	if len(d.buf.syms) > 0 {
		n += len(d.buf.syms) - windowSize
	}
	return n
}

// more raises d.allow past what d has produced, by at least grantStep where share and ceiling
// allow; it reports whether it could.
func (d *decoder) more() bool {
	if d.share == nil {
		return false
	}
	least := d.produced() + 1 - d.allow
	most := min(max(least, grantStep), d.ceiling-d.allow)
	if most < least {
		return false
	}
	got := d.share.take(least, most)
	d.allow += got
	return got > 0
}

// output returns what d decoded: symbols, then bytes.
func (d *decoder) output() ([]uint16, []byte) {
	syms := d.buf.syms
	if len(syms) > 0 {
		syms = syms[windowSize:]
	}
	return syms, d.buf.bytes[d.win:]
}

// run decodes whole blocks until it has finished one that ends at or after bit stop, or the
// final block. It returns whether the last block decoded was the final one.
func (d *decoder) run(stop int64) (final bool, err error) {
	for {
		final, err = d.block()
		if err != nil {
			return false, err
		}
		if d.br.overran() {
			return false, fmt.Errorf("%w: deflate stream truncated", ErrCorrupt)
		}
		// codes stops within a symbol of the allowance, a stored block within 64 KiB.
		if d.produced() > d.allow && !d.more() {
			return false, errOutputLimit
		}
		if final || d.br.bitPos() >= stop {
			return final, nil
		}
		if !d.inBytes {
			d.toBytes()
		}
	}
}

// toBytes goes over to bytes if the last 32 KiB of symbols hold no marker.
func (d *decoder) toBytes() {
	syms := d.buf.syms
	n := len(syms)
	if n-d.lastMarker <= windowSize {
		return // the last marker found is still in the window
	}
	if i := lastMarker(syms[d.scanned:]); i >= 0 {
		d.lastMarker = d.scanned + i
	}
	d.scanned = n
	if n-d.lastMarker <= windowSize {
		return
	}
	b := room(d.buf.bytes)[:windowSize]
	for i, v := range syms[n-windowSize:] {
		b[i] = byte(v)
	}
	d.buf.bytes, d.win = b, windowSize
	d.inBytes, d.switched = true, true
}

// lastMarker returns the index of the last marker in syms, or -1.
func lastMarker(syms []uint16) int {
	i := len(syms)
	for ; i >= 8; i -= 8 {
		// Eight at a time: the search reads every symbol after a chunk's last marker.
		v := (*[8]uint16)(syms[i-8:])
		if v[0]|v[1]|v[2]|v[3]|v[4]|v[5]|v[6]|v[7] >= windowMarker {
			break
		}
	}
	for i--; i >= 0; i-- {
		if syms[i] >= windowMarker {
			return i
		}
	}
	return -1
}

// block decodes one block.
func (d *decoder) block() (final bool, err error) {
	br := d.br
	hdr := br.read(3)
	final = hdr&1 != 0
	switch hdr >> 1 {
	case 0:
		if d.inBytes {
			d.buf.bytes, err = stored(br, d.buf.bytes)
		} else {
			d.buf.syms, err = stored(br, d.buf.syms)
		}
		return final, err
	case 1:
		return final, d.codes(&fixedLit, &fixedDist)
	case 2:
		if err := readDynamicHeader(br, &d.lit, &d.dist, &d.cl, &d.lengths); err != nil {
			return false, err
		}
		d.lit.buildPairs()
		return final, d.codes(&d.lit, &d.dist)
	default:
		return false, fmt.Errorf("%w: reserved block type 3", ErrCorrupt)
	}
}

// codes decodes a Huffman-coded block within d's allowance, drawing more as it runs out.
func (d *decoder) codes(lit, dist *huffman) (err error) {
	for {
		left := d.allow - d.produced()
		if d.inBytes {
			d.buf.bytes, err = codes(d.br, d.buf.bytes, d.limit, len(d.buf.bytes)+left, lit, dist)
		} else {
			d.buf.syms, err = codes(d.br, d.buf.syms, d.limit, len(d.buf.syms)+left, lit, dist)
		}
		if err != errOutputLimit || !d.more() {
			return err
		}
	}
}

// grow returns out, holding o values, with a length of most or, where that is beyond its
// capacity, of at least o+maxMatch+64 in a buffer of twice the capacity.
func grow[T symbol](out []T, o, most int) []T {
	if most <= cap(out) {
		return out[:most]
	}
	grown := make([]T, max(2*cap(out), o+maxMatch+64))
	copy(grown, out[:o])
	return grown[:min(len(grown), most)]
}

// stored appends a stored block's bytes to out.
func stored[T symbol](br *bitReader, out []T) ([]T, error) {
	br.consume(br.n & 7) // to the byte boundary
	v := br.read(32)
	n := int(v & 0xffff)
	if n != int(^v>>16&0xffff) {
		return out, fmt.Errorf("%w: stored block length check failed", ErrCorrupt)
	}
	// Drain whole bytes still buffered, then copy the rest straight from data.
	for n > 0 && br.n >= 8 {
		out = append(out, T(br.bits&0xff))
		br.consume(8)
		n--
	}
	if n == 0 {
		return out, nil
	}
	// br.n == 0 here: the buffer is empty and pos is the next byte.
	if br.pos+n > len(br.data) {
		return out, fmt.Errorf("%w: stored block truncated", ErrCorrupt)
	}
	for _, b := range br.data[br.pos : br.pos+n] {
		out = append(out, T(b))
	}
	br.pos += n
	br.bits, br.n = 0, 0
	return out, nil
}

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
