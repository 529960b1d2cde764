// Package crc32x combines CRC-32 (IEEE) checksums of the pieces of a message computed apart
// (in parallel), as zlib's crc32_combine does.
package crc32x

import "hash/crc32"

// CRC-32 of a concatenation from the CRC-32s of its parts, by zlib's crc32_combine (zlib 1.2.12
// and later): appending n zero bytes to a message multiplies its CRC register by x^(8n) modulo
// the CRC polynomial P, so CRC(A||B) = CRC(A) * x^(8 len(B)) mod P xor CRC(B). x^(8n) mod P
// comes from the table of x^(2^k) mod P, one multiplication per set bit of 8n. The pre- and
// post-conditioning of CRC-32 (the inverted register) cancel out in that identity. Polynomials
// are in CRC-32's reflected order: bit 31 is x^0.

// x2n[k] is x^(2^k) mod P.
var x2n = func() (t [32]uint32) {
	p := uint32(1) << 30 // x^1
	for k := range t {
		t[k] = p
		p = multModP(p, p)
	}
	return t
}()

// multModP returns a*b mod P.
func multModP(a, b uint32) uint32 {
	var prod uint32
	for m := uint32(1) << 31; ; m >>= 1 {
		if a&m != 0 {
			prod ^= b
			if a&(m-1) == 0 {
				return prod
			}
		}
		if b&1 != 0 {
			b = b>>1 ^ crc32.IEEE
		} else {
			b >>= 1
		}
	}
}

// ZerosOp returns the operator that advances a CRC-32 (IEEE) register over n zero bytes,
// x^(8n) mod P, for CombineOp: to combine many pieces of one length, make it once.
func ZerosOp(n int64) uint32 {
	p := uint32(1) << 31 // x^0
	for k := 3; n > 0; n, k = n>>1, k+1 {
		if n&1 != 0 {
			p = multModP(x2n[k&31], p)
		}
	}
	return p
}

// CombineOp returns the CRC-32 of A||B given crc1 = CRC(A), crc2 = CRC(B) and op =
// ZerosOp(len(B)).
func CombineOp(crc1, crc2, op uint32) uint32 { return multModP(op, crc1) ^ crc2 }

// Combine returns the CRC-32 (IEEE) of A||B given crc1 = CRC(A), crc2 = CRC(B) and
// len2 = len(B).
func Combine(crc1, crc2 uint32, len2 int64) uint32 {
	if len2 <= 0 {
		return crc1 // crc2 is then the CRC of nothing, 0
	}
	return CombineOp(crc1, crc2, ZerosOp(len2))
}
