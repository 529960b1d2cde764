// Package crc32x combines CRC-32 (IEEE) checksums of the pieces of a message computed apart
// (in parallel), as zlib's crc32_combine does.
package crc32x

import "hash/crc32"

// CRC-32 of a concatenation from the CRC-32s of its parts, by zlib's crc32_combine (the GF(2)
// matrix method of zlib 1.2.11): appending n zero bytes to a message is a linear map on the
// 32-bit CRC register, so CRC(A||B) = Z^len(B) CRC(A) xor CRC(B), where Z^k, the operator for k
// zero bytes, is built by repeated squaring of the one-bit operator. The pre- and
// post-conditioning of CRC-32 (the inverted register) cancel out in that identity.

// Matrix is a linear map on 32-bit vectors over GF(2): m[i] is the image of bit i.
type Matrix [32]uint32

// Times applies m to vec.
func (m *Matrix) Times(vec uint32) uint32 {
	var sum uint32
	for i := 0; vec != 0; i, vec = i+1, vec>>1 {
		if vec&1 != 0 {
			sum ^= m[i]
		}
	}
	return sum
}

// after returns the map "op, then m".
func (m *Matrix) after(op *Matrix) Matrix {
	var r Matrix
	for i := range op {
		r[i] = m.Times(op[i])
	}
	return r
}

// ZerosOp returns the operator that advances a CRC-32 (IEEE) register over n zero bytes.
func ZerosOp(n int64) Matrix {
	var odd, even, op Matrix
	odd[0] = crc32.IEEE // one zero bit: shift right, fold the polynomial in for bit 0
	for i := 1; i < 32; i++ {
		odd[i] = 1 << (i - 1)
	}
	for i := range op {
		op[i] = 1 << i
	}
	even = odd.after(&odd)  // two zero bits
	odd = even.after(&even) // four zero bits
	for n > 0 {
		even = odd.after(&odd) // 8, 32, 128 ... zero bits: one, four, 16 ... bytes
		if n&1 != 0 {
			op = even.after(&op)
		}
		if n >>= 1; n == 0 {
			break
		}
		odd = even.after(&even)
		if n&1 != 0 {
			op = odd.after(&op)
		}
		n >>= 1
	}
	return op
}

// Combine returns the CRC-32 (IEEE) of A||B given crc1 = CRC(A), crc2 = CRC(B) and
// len2 = len(B).
func Combine(crc1, crc2 uint32, len2 int64) uint32 {
	if len2 <= 0 {
		return crc1 // crc2 is then the CRC of nothing, 0
	}
	op := ZerosOp(len2)
	return op.Times(crc1) ^ crc2
}
