package jpeg

import (
	"math/rand/v2"
	"testing"
)

// FuzzDecode decodes arbitrary streams with the dimensions their frame header declares (up to
// 64 Ki samples): the fast path must not panic, and it must agree with the reference: both
// fail, or both succeed with the same samples.
func FuzzDecode(f *testing.F) {
	for seed := range uint64(3) {
		src, _, _ := smallStream(seed)
		f.Add(src)
	}
	rng := rand.New(rand.NewPCG(9, 9))
	for _, o := range []encOpts{
		{w: 8, h: 5, precision: 8, predictor: 7, pt: 1},
		{w: 6, h: 6, precision: 16, predictor: 5, restartRows: 3, randomTable: true},
	} {
		f.Add(encodeLossless(noiseImage(o.w, o.h, o.precision, rng), o, rng))
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		w, h, sb := 8, 8, 2
		if in, err := ReadInfo(src); err == nil && in.Width > 0 && in.Width*max(in.Height, 1) <= 1<<16 {
			w, h = in.Width, max(in.Height, 1)
			if in.Precision <= 8 {
				sb = 1
			}
		}
		decodeBoth(t, src, w, h, sb)
	})
}
