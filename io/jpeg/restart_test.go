package jpeg

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestRestartDcmdjpeg encodes with restart intervals (DRI, RSTm: dcmcjpeg writes none) and
// other markers, has dcmdjpeg decode the stream as an independent check of the encoder, and
// decodes it: both must give back the original.
func TestRestartDcmdjpeg(t *testing.T) {
	t.Parallel()
	requireTool(t, "dcmdjpeg")
	cases := []encOpts{
		{w: 40, h: 30, precision: 12, predictor: 1, restartRows: 1},
		{w: 40, h: 30, precision: 12, predictor: 4, restartRows: 7, extras: true},
		{w: 33, h: 29, precision: 16, predictor: 7, restartRows: 3, randomTable: true, tableID: 2},
		{w: 300, h: 20, precision: 12, predictor: 6, restartRows: 2, pt: 2, extras: true},
		{w: 17, h: 40, precision: 8, predictor: 5, restartRows: 4, randomTable: true},
		{w: 25, h: 18, precision: 10, predictor: 2, restartRows: 5, tableID: 1},
		{w: 25, h: 18, precision: 16, predictor: 3, restartRows: 9, pt: 4},
	}
	for i, o := range cases {
		t.Run(fmt.Sprintf("%+v", o), func(t *testing.T) {
			t.Parallel()
			rng := rand.New(rand.NewPCG(uint64(i), 11))
			px := mrImage(o.w, o.h, o.precision, rng)
			stream := encodeLossless(px, o, rng)
			im := image{w: o.w, h: o.h, allocated: 16, stored: o.precision, syntax: "1.2.840.10008.1.2.4.57", encapsulated: [][]byte{stream}}
			sb := 2
			if o.precision <= 8 {
				im.allocated, sb = 8, 1
			}
			native := nativePixels(t, convert(t, im.file(), "dcmdjpeg", "+te"))
			want := make([]uint16, len(px))
			for k, v := range px {
				want[k] = v >> o.pt << o.pt
			}
			for k, v := range values(native, len(px), sb, binary.LittleEndian) {
				if v != want[k] {
					t.Fatalf("dcmdjpeg: sample %d is %d, want %d", k, v, want[k])
				}
			}
			got, err := decodeBoth(t, stream, o.w, o.h, sb)
			if err != nil {
				t.Fatal(err)
			}
			wantLossless(t, got, px, o.pt, sb)
		})
	}
}
