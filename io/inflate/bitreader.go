package inflate

import "encoding/binary"

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
