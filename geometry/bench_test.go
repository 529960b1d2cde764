package geometry

import (
	"fmt"
	"testing"
	"voxpipe/internal/benchvol"
)

// benchDims is the volume the benchmarks work on: 512x512x1000 (0.47 x 0.47 x 0.56 mm, a
// phantom's spacing at that size) unless VOXPIPE_GEOMETRY_DIMS says otherwise.
func benchDims(b *testing.B) [3]int {
	d, _ := benchvol.Dims(b, "VOXPIPE_GEOMETRY_DIMS", "512x512x1000")
	return d
}

func benchVolume(d [3]int) []int16 {
	v := make([]int16, d[0]*d[1]*d[2])
	for i := range v {
		v[i] = int16(i*2654435761>>20) & 0x7ff
	}
	return v
}

// BenchmarkReorient: an LPS-stored volume (two flips) and a sagittal one (permutation) to RAS.
func BenchmarkReorient(b *testing.B) {
	d := benchDims(b)
	src := benchVolume(d)
	dst := make([]int16, len(src))
	for _, from := range []string{"LPS", "ASL"} {
		ro, err := NewReorient(from, Canonical, d)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(from, func(b *testing.B) {
			b.SetBytes(int64(2 * len(src)))
			for b.Loop() {
				Apply(ro, dst, src)
			}
		})
	}
}

// BenchmarkResample: the volume to the default model's 2.5 x 2.5 x 3 mm, and its labels back.
func BenchmarkResample(b *testing.B) {
	d := benchDims(b)
	src := benchVolume(d)
	mm := [3]float64{240.0 / float64(max(d[0], d[1])), 240.0 / float64(max(d[0], d[1])), 1.2 * 240.0 / float64(max(d[0], d[1]))}
	rs, err := NewResample(d, mm, [3]float64{2.5, 2.5, 3})
	if err != nil {
		b.Fatal(err)
	}
	b.Run(fmt.Sprintf("image_to_%dx%dx%d", rs.Out[0], rs.Out[1], rs.Out[2]), func(b *testing.B) {
		b.SetBytes(int64(2 * len(src)))
		for b.Loop() {
			Image(rs, src)
		}
	})
	ro, _ := NewReorient("LPS", Canonical, d)
	model := make([]uint8, rs.Out[0]*rs.Out[1]*rs.Out[2])
	back := make([]uint8, len(src))
	b.Run("labels_back_LPS", func(b *testing.B) {
		b.SetBytes(int64(len(back)))
		for b.Loop() {
			LabelsBack(back, model, ro, rs)
		}
	})
}
