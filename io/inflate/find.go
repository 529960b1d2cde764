package inflate

import (
	"encoding/binary"
	"math/bits"
)

// findBlock returns the first bit position in [from, to) where a non-final dynamic-Huffman
// block header that passes every check of readDynamicHeader starts, or -1. Such a position
// may still be a false positive (random bits that happen to look like a header): Gunzip uses a
// chunk decoded from it only when the decoding of the previous chunk ends exactly there.
func findBlock(data []byte, from, to int64, scratch *decoder) int64 {
	to = min(to, int64(len(data))*8)
	// Candidates 48 at a time from one 64-bit word: BFINAL = 0 and BTYPE = 2 (bits 0-2 = 0b100),
	// HLIT <= 29 and HDIST <= 29 (neither has its top four bits set), worked out for every bit
	// position of the word at once, which rules out 15 in 16 positions.
	for base := from &^ 7; base < to; base += 48 {
		i := int(base >> 3)
		var w uint64
		if i+8 <= len(data) {
			w = binary.LittleEndian.Uint64(data[i:])
		} else {
			var tail [8]byte
			copy(tail[:], data[i:])
			w = binary.LittleEndian.Uint64(tail[:])
		}
		four := func(k uint) uint64 { return w >> k & (w >> (k + 1)) & (w >> (k + 2)) & (w >> (k + 3)) }
		cand := ^w & ^(w >> 1) & (w >> 2) &^ four(4) &^ four(9) & (1<<48 - 1)
		for cand != 0 {
			p := int64(bits.TrailingZeros64(cand))
			cand &= cand - 1
			if b := base + p; b >= from && b < to && headerAt(data, b, scratch) {
				return b
			}
		}
	}
	return -1
}

// kraftShare[l] is a code of length l's share of a complete code length code, in units of 2^-7.
var kraftShare = [8]uint8{0, 64, 32, 16, 8, 4, 2, 1}

// headerAt reports whether a valid dynamic block header (BFINAL = 0) starts at bit b.
func headerAt(data []byte, b int64, scratch *decoder) bool {
	i, shift := int(b>>3), uint(b&7)
	var lo, hi uint64
	if i+16 <= len(data) {
		lo, hi = binary.LittleEndian.Uint64(data[i:]), binary.LittleEndian.Uint64(data[i+8:])
	} else {
		var tail [16]byte
		copy(tail[:], data[i:])
		lo, hi = binary.LittleEndian.Uint64(tail[:]), binary.LittleEndian.Uint64(tail[8:])
	}
	// v0, v1: 121 bits from b on, enough for the fixed part of the header.
	v0, v1 := lo>>shift|hi<<(64-shift), hi>>shift
	if v0&7 != 4 || (v0>>3)&31 > 29 || (v0>>8)&31 > 29 {
		return false
	}
	// The code length code must be complete (Kraft sum 1, in units of 2^-7): rules out nearly
	// all the rest before anything is built.
	nclen := uint(v0>>13&15) + 4
	lengths := (v0>>17 | v1<<47) & (1<<(3*nclen) - 1) // nclen 3-bit lengths
	kraft := 0
	for ; lengths != 0; lengths >>= 3 {
		kraft += int(kraftShare[lengths&7])
	}
	if kraft != 128 {
		return false
	}
	br := bitReader{data: data, pos: i}
	br.refill()
	br.consume(shift + 3)
	return readDynamicHeader(&br, &scratch.lit, &scratch.dist, &scratch.cl, &scratch.lengths) == nil && !br.overran()
}
