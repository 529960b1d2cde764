package crc32x

import (
	"hash/crc32"
	"math/rand/v2"
	"testing"
)

// TestCRC32Combine folds random splits of random data, empty and 1-byte pieces included,
// with Combine and compares with hash/crc32 over the whole.
func TestCRC32Combine(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	data := make([]byte, 3<<20)
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	for trial := range 200 {
		n := rng.IntN(len(data) + 1)
		if trial < 4 {
			n = []int{0, 1, 2, len(data)}[trial]
		}
		msg := data[:n]
		var crc uint32
		for rest := msg; ; {
			k := 0
			switch rng.IntN(4) {
			case 0:
				k = 0
			case 1:
				k = 1
			case 2:
				k = rng.IntN(64)
			default:
				k = rng.IntN(len(rest) + 1)
			}
			k = min(k, len(rest))
			crc = Combine(crc, crc32.ChecksumIEEE(rest[:k]), int64(k))
			if rest = rest[k:]; len(rest) == 0 {
				break
			}
		}
		if want := crc32.ChecksumIEEE(msg); crc != want {
			t.Fatalf("trial %d, %d bytes: combined %08x, want %08x", trial, n, crc, want)
		}
	}
	// Empty pieces on either side, and lengths whose bits exercise both squarings.
	for _, n := range []int{1, 2, 3, 7, 8, 255, 256, 1 << 20, 1<<20 + 1, 3<<20 - 1} {
		a, b := data[:len(data)-n], data[len(data)-n:]
		got := Combine(crc32.ChecksumIEEE(a), crc32.ChecksumIEEE(b), int64(n))
		if want := crc32.ChecksumIEEE(data); got != want {
			t.Errorf("split at -%d: %08x, want %08x", n, got, want)
		}
		if got := Combine(crc32.ChecksumIEEE(data[:n]), 0, 0); got != crc32.ChecksumIEEE(data[:n]) {
			t.Errorf("empty second part changed the CRC")
		}
		if got := Combine(0, crc32.ChecksumIEEE(data[:n]), int64(n)); got != crc32.ChecksumIEEE(data[:n]) {
			t.Errorf("empty first part: %08x", got)
		}
	}
}

// TestCombineMatchesMatrixMethod compares Combine with zlib 1.2.11's matrix method, which it
// replaces, on random CRCs and lengths of every magnitude.
func TestCombineMatchesMatrixMethod(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(3, 4))
	for trial := range 2000 {
		crc1, crc2 := rng.Uint32(), rng.Uint32()
		len2 := rng.Int64N(1 << rng.IntN(63))
		if trial < 64 {
			len2 = int64(1) << min(trial, 62)
		}
		if got, want := Combine(crc1, crc2, len2), matrixCombine(crc1, crc2, len2); got != want {
			t.Fatalf("Combine(%08x, %08x, %d) = %08x, the matrix method %08x", crc1, crc2, len2, got, want)
		}
		if got, want := CombineOp(crc1, crc2, ZerosOp(len2)), Combine(crc1, crc2, len2); len2 > 0 && got != want {
			t.Fatalf("CombineOp with ZerosOp(%d) = %08x, Combine %08x", len2, got, want)
		}
	}
}

// BenchmarkCombine times one combine with a 2 MiB second part (a parallel gunzip's chunk), by
// the multiply-mod-P method and by the matrix method it replaced:
//
//	go test -run '^$' -bench Combine ./internal/crc32x
func BenchmarkCombine(b *testing.B) {
	const len2 = 2 << 20
	b.Run("multmodp", func(b *testing.B) {
		crc := uint32(1)
		for b.Loop() {
			crc = Combine(crc, 0x12345678, len2)
		}
	})
	b.Run("matrix", func(b *testing.B) {
		crc := uint32(1)
		for b.Loop() {
			crc = matrixCombine(crc, 0x12345678, len2)
		}
	})
}

// matrix is a linear map on 32-bit vectors over GF(2): m[i] is the image of bit i.
type matrix [32]uint32

// times applies m to vec.
func (m *matrix) times(vec uint32) uint32 {
	var sum uint32
	for i := 0; vec != 0; i, vec = i+1, vec>>1 {
		if vec&1 != 0 {
			sum ^= m[i]
		}
	}
	return sum
}

// after returns the map "op, then m".
func (m *matrix) after(op *matrix) matrix {
	var r matrix
	for i := range op {
		r[i] = m.times(op[i])
	}
	return r
}

// matrixZerosOp returns the operator that advances a CRC-32 (IEEE) register over n zero bytes.
func matrixZerosOp(n int64) matrix {
	var odd, even, op matrix
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

// matrixCombine is Combine by zlib 1.2.11's GF(2) matrix method: the operator for len2 zero
// bytes built by repeated squaring of the one-bit operator.
func matrixCombine(crc1, crc2 uint32, len2 int64) uint32 {
	if len2 <= 0 {
		return crc1
	}
	op := matrixZerosOp(len2)
	return op.times(crc1) ^ crc2
}
