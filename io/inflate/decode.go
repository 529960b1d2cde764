package inflate

import (
	"fmt"
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
