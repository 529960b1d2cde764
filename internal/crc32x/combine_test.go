package crc32x

import (
	"hash/crc32"
	"math/rand/v2"
	"testing"
)

// TestCRC32Combine folds random splits of random data, empty and 1-byte pieces included,
// with Combine and compares with hash/crc32 over the whole.
func TestCRC32Combine(t *testing.T) {
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
