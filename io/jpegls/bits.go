package jpegls

import (
	"encoding/binary"
	"math/bits"
)

// bitReader reads the entropy-coded data most significant bit first through a 64-bit
// cache. A byte after 0xFF gives only its low 7 bits (T.87 A.1's stuffed 0). Past the end
// it feeds zeros and counts them in over, so a lookup may peek past the end; overran says
// whether bits that are not there were consumed.
type bitReader struct {
	data   []byte
	pos    int    // the next byte to load
	cache  uint64 // the unread bits, the next one in bit 63; bits below the n valid ones are 0
	n      uint   // valid bits in cache
	over   int    // zero bits fed past the end of data
	prevFF bool   // the last byte loaded was 0xFF
}

func newBitReader(data []byte) bitReader { return bitReader{data: data} }

// overran reports whether any of the zeros fed past the end was consumed.
func (br *bitReader) overran() bool { return br.over > int(br.n) }

// hasFF reports whether any byte of w is 0xFF (a zero byte of ^w, by the usual SWAR test).
func hasFF(w uint64) bool {
	x := ^w
	return (x-0x0101010101010101)&^x&0x8080808080808080 != 0
}

// refill tops the cache up to at least 57 valid bits: whole bytes at once where the next 8
// hold no 0xFF, else byte by byte.
func (br *bitReader) refill() {
	if br.n > 56 {
		return
	}
	if !br.prevFF && br.pos+8 <= len(br.data) {
		if w := binary.BigEndian.Uint64(br.data[br.pos:]); !hasFF(w) {
			nb := (64 - br.n) >> 3 // whole bytes that fit
			br.cache |= w >> (64 - 8*nb) << (64 - br.n - 8*nb)
			br.n += 8 * nb
			br.pos += int(nb)
			return
		}
	}
	for br.n <= 56 {
		if br.pos >= len(br.data) {
			br.n += 8
			br.over += 8
			continue
		}
		b := br.data[br.pos]
		br.pos++
		if br.prevFF {
			br.cache |= uint64(b) << (57 - br.n) // 7 bits: b's high bit is the stuffed 0
			br.n += 7
		} else {
			br.cache |= uint64(b) << (56 - br.n)
			br.n += 8
		}
		br.prevFF = b == 0xFF
	}
}

// read consumes k <= 56 bits and returns them as an unsigned number.
func (br *bitReader) read(k uint) int {
	if br.n < k {
		br.refill()
	}
	v := br.cache >> 1 >> (63 - k) // k = 0 gives 0
	br.cache <<= k
	br.n -= k
	return int(v)
}

// bit consumes one bit.
func (br *bitReader) bit() int {
	if br.n == 0 {
		br.refill()
	}
	v := br.cache >> 63
	br.cache <<= 1
	br.n--
	return int(v)
}

// unary consumes zeros and the 1 that ends them and returns the count of zeros; more than
// most fail (ok false).
func (br *bitReader) unary(most int) (q int, ok bool) {
	for {
		br.refill()
		if br.cache != 0 {
			lz := bits.LeadingZeros64(br.cache) // < n: bits below the valid ones are 0
			q += lz
			br.cache <<= uint(lz) + 1
			br.n -= uint(lz) + 1
			return q, q <= most
		}
		q += int(br.n)
		br.cache, br.n = 0, 0
		if q > most {
			return q, false
		}
	}
}

// golomb reads a limited-length Golomb code of order k (T.87 A.5.3, A.6.1):
// q zeros and a 1, then q < LIMIT-qbpp-1: q*2^k + the next k bits;
// q = LIMIT-qbpp-1: the next qbpp bits + 1. ok is false for more zeros than that.
func (br *bitReader) golomb(k, limit, qbpp int) (v int, ok bool) {
	escape := limit - qbpp - 1
	br.refill()
	// The common case at once: the zeros, the 1 and the k bits all in the cache.
	if lz := bits.LeadingZeros64(br.cache); lz < escape && uint(lz+1+k) <= br.n {
		v = lz<<k | int(br.cache<<uint(lz)<<1>>1>>uint(63-k))
		br.cache <<= uint(lz + 1 + k)
		br.n -= uint(lz + 1 + k)
		return v, true
	}
	q, ok := br.unary(escape)
	if !ok {
		return 0, false
	}
	if q < escape {
		return q<<k + br.read(uint(k)), true
	}
	return br.read(uint(qbpp)) + 1, true
}
