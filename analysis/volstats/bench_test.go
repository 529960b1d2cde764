package volstats

import (
	"testing"

	"voxpipe/internal/benchvol"
	"voxpipe/model"
	"voxpipe/phantom"
)

// BenchmarkCompute computes the statistics of a phantom's truth mask and int16 image, 128x128x100
// unless VOXPIPE_STATS_DIMS says otherwise (512x512x1000 needs ~1 GB and a minute to generate:
// run it by hand), with GOMAXPROCS workers (-cpu sets it).
//
//	VOXPIPE_STATS_DIMS=512x512x1000 go test ./analysis/volstats -run '^$' -bench Compute -benchtime 3x
func BenchmarkCompute(b *testing.B) {
	ph, _ := benchvol.Phantom(b, "VOXPIPE_STATS_DIMS", "128x128x100")
	labels := make([]model.Label, len(phantom.ClassNames))
	for i, n := range phantom.ClassNames {
		labels[i] = model.Label{Value: i, Name: n}
	}
	g := GridOf(ph.Header)
	b.SetBytes(int64(len(ph.Truth)) * 3) // the mask and the int16 image
	b.ReportAllocs()
	var v *Volume
	var err error
	for b.Loop() {
		if v, err = Compute(ph.Truth, ph.Image, g, labels, Options{}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(ph.Truth))*float64(b.N)/b.Elapsed().Seconds()/1e6, "Mvoxel/s")
	for _, l := range v.Labels {
		b.Logf("%s: %d voxels, %.1f mL, mean %.1f, %d components", l.Name, l.Voxels, l.VolumeML, l.IntensityMean, l.Components)
	}
}
