package phantom

import (
	"fmt"
	"os"
	"testing"
)

// BenchmarkGenerate renders one phantom per iteration, 96x96x64 unless VOXPIPE_PHANTOM_DIMS
// says otherwise (e.g. 512x512x1000: too big for CI, run it by hand), with
// VOXPIPE_PHANTOM_WORKERS workers (default GOMAXPROCS).
//
//	VOXPIPE_PHANTOM_DIMS=256x256x256 go test ./phantom -run '^$' -bench Generate -benchtime 3x
func BenchmarkGenerate(b *testing.B) {
	dims := os.Getenv("VOXPIPE_PHANTOM_DIMS")
	if dims == "" {
		dims = "96x96x64"
	}
	nx, ny, nz, err := ParseDims(dims)
	if err != nil {
		b.Fatal(err)
	}
	workers := 0
	if w := os.Getenv("VOXPIPE_PHANTOM_WORKERS"); w != "" {
		if _, err := fmt.Sscan(w, &workers); err != nil {
			b.Fatalf("VOXPIPE_PHANTOM_WORKERS=%q: %v", w, err)
		}
	}
	voxels := float64(nx) * float64(ny) * float64(nz)
	b.SetBytes(int64(nx * ny * nz * 3)) // int16 image + uint8 truth
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if _, err := Generate(Params{NX: nx, NY: ny, NZ: nz, Seed: uint64(i), Workers: workers}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(voxels*float64(b.N)/b.Elapsed().Seconds()/1e6, "Mvoxel/s")
}
