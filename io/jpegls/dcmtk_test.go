package jpegls

import (
	"fmt"
	"testing"
)

// losslessCases are the pictures encoded lossless: 8, 12 and 16 bits, signed, low
// precisions, flat regions (run mode), noise and full-range noise (escape codes).
var losslessCases = []picture{
	{w: 64, h: 48, allocated: 8, stored: 8, noise: 3, background: 0, seed: 1},
	{w: 97, h: 33, allocated: 8, stored: 8, fullRangeNoise: true, seed: 2},
	{w: 128, h: 96, allocated: 16, stored: 12, noise: 20, background: 0, seed: 3},
	{w: 77, h: 51, allocated: 16, stored: 12, noise: 400, background: 7, seed: 4},
	{w: 64, h: 64, allocated: 16, stored: 16, noise: 50, background: 100, seed: 5},
	{w: 40, h: 30, allocated: 16, stored: 16, fullRangeNoise: true, seed: 6},
	{w: 70, h: 60, allocated: 16, stored: 12, signed: true, noise: 30, background: -5, seed: 7},
	{w: 50, h: 40, allocated: 16, stored: 16, signed: true, noise: 9, background: -1000, seed: 8},
	{w: 33, h: 17, allocated: 16, stored: 10, noise: 2, background: 0, seed: 9},
	{w: 1, h: 20, allocated: 8, stored: 8, noise: 1, seed: 10},
	{w: 20, h: 1, allocated: 16, stored: 12, noise: 1, seed: 11},
}

func (p picture) String() string {
	return fmt.Sprintf("%dx%d_%d_%d_signed%v_noise%d_full%v", p.w, p.h, p.allocated, p.stored, p.signed, p.noise, p.fullRangeNoise)
}

// TestDcmtkLossless decodes dcmcjpls's lossless streams: equal to the original exactly.
func TestDcmtkLossless(t *testing.T) {
	t.Parallel()
	requireTool(t, "dcmcjpls")
	for _, p := range losslessCases {
		t.Run(p.String(), func(t *testing.T) {
			t.Parallel()
			v := p.values()
			stream, _ := dcmtkEncode(t, p.file(v), "+el")
			got := decodeBoth(t, stream, p.w, p.h, p.allocated/8)
			for i := range v {
				if got[i] != int(v[i]) {
					t.Fatalf("sample %d (x %d, y %d) = %d, want %d", i, i%p.w, i/p.w, got[i], v[i])
				}
			}
		})
	}
}
