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
	{w: 30, h: 20, allocated: 8, stored: 6, noise: 2, seed: 12},
	{w: 30, h: 20, allocated: 8, stored: 4, noise: 1, seed: 13},
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

// nearCase is a picture encoded near-lossless with NEAR = near.
type nearCase struct {
	p    picture
	near int
}

var nearCases = []nearCase{
	{picture{w: 64, h: 48, allocated: 8, stored: 8, noise: 6, seed: 21}, 1},
	{picture{w: 64, h: 48, allocated: 8, stored: 8, noise: 6, seed: 22}, 3},
	{picture{w: 60, h: 40, allocated: 8, stored: 8, fullRangeNoise: true, seed: 23}, 10},
	{picture{w: 128, h: 96, allocated: 16, stored: 12, noise: 40, seed: 24}, 2},
	{picture{w: 90, h: 70, allocated: 16, stored: 12, noise: 300, background: 3, seed: 25}, 7},
	{picture{w: 64, h: 64, allocated: 16, stored: 16, noise: 500, background: 40000, seed: 26}, 25},
	{picture{w: 50, h: 30, allocated: 16, stored: 16, fullRangeNoise: true, seed: 27}, 255},
	{picture{w: 70, h: 60, allocated: 16, stored: 10, noise: 30, background: 5, seed: 28}, 4}, // dcmcjpls refuses signed near-lossless
}

// TestDcmtkNearLossless decodes dcmcjpls's near-lossless streams: every sample within NEAR
// of the original, and the same samples as dcmdjpls decodes.
func TestDcmtkNearLossless(t *testing.T) {
	t.Parallel()
	requireTool(t, "dcmcjpls")
	requireTool(t, "dcmdjpls")
	for _, c := range nearCases {
		t.Run(fmt.Sprintf("%v_near%d", c.p, c.near), func(t *testing.T) {
			t.Parallel()
			p := c.p
			v := p.values()
			stream, encoded := dcmtkEncode(t, p.file(v), "+en", "+md", fmt.Sprint(c.near))
			if info, err := ReadInfo(stream); err != nil || info.Near != c.near {
				t.Fatalf("ReadInfo: %+v, %v; want NEAR %d", info, err, c.near)
			}
			got := decodeBoth(t, stream, p.w, p.h, p.allocated/8)
			want := samples(dcmtkDecode(t, encoded), p.w*p.h, p.allocated/8)
			for i := range v {
				if d := got[i] - int(v[i]); d < -c.near || d > c.near {
					t.Fatalf("sample %d = %d, original %d, NEAR %d", i, got[i], v[i], c.near)
				}
				if got[i] != want[i] {
					t.Fatalf("sample %d = %d, dcmdjpls %d", i, got[i], want[i])
				}
			}
		})
	}
}

// TestDcmtkParameters decodes streams with LSE-given thresholds and RESET: lossless equal to
// the original, near-lossless equal to dcmdjpls.
func TestDcmtkParameters(t *testing.T) {
	t.Parallel()
	requireTool(t, "dcmcjpls")
	requireTool(t, "dcmdjpls")
	cases := []struct {
		p    picture
		opts []string
		want Info
	}{
		{picture{w: 64, h: 48, allocated: 8, stored: 8, noise: 5, seed: 31},
			[]string{"+el", "+t1", "2", "+t2", "5", "+t3", "9", "+rs", "16"}, Info{T1: 2, T2: 5, T3: 9, Reset: 16}},
		{picture{w: 80, h: 60, allocated: 16, stored: 12, noise: 60, seed: 32},
			[]string{"+el", "+t1", "10", "+t2", "40", "+t3", "200", "+rs", "200"}, Info{T1: 10, T2: 40, T3: 200, Reset: 200}},
		{picture{w: 80, h: 60, allocated: 16, stored: 16, noise: 900, seed: 33},
			[]string{"+en", "+md", "3", "+t1", "30", "+t2", "300", "+t3", "3000", "+rs", "1000"}, Info{T1: 30, T2: 300, T3: 3000, Reset: 1000}},
		{picture{w: 80, h: 60, allocated: 16, stored: 12, noise: 9, seed: 34},
			[]string{"+en", "+md", "1", "+rs", "5"}, Info{Reset: 5}},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%v_%v", c.p, c.opts), func(t *testing.T) {
			t.Parallel()
			p := c.p
			v := p.values()
			stream, encoded := dcmtkEncode(t, p.file(v), c.opts...)
			info, err := ReadInfo(stream)
			if err != nil {
				t.Fatal(err)
			}
			if c.want.T1 != 0 && (info.T1 != c.want.T1 || info.T2 != c.want.T2 || info.T3 != c.want.T3) || info.Reset != c.want.Reset {
				t.Fatalf("ReadInfo: %+v, want thresholds and RESET of %+v", info, c.want)
			}
			got := decodeBoth(t, stream, p.w, p.h, p.allocated/8)
			want := samples(dcmtkDecode(t, encoded), p.w*p.h, p.allocated/8)
			for i := range v {
				if got[i] != want[i] || info.Near == 0 && got[i] != int(v[i]) {
					t.Fatalf("sample %d = %d, dcmdjpls %d, original %d", i, got[i], want[i], v[i])
				}
			}
		})
	}
}
