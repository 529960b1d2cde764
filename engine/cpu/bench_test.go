package cpu

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"voxpipe/engine/engine"
	"voxpipe/internal/enginetest"
	"voxpipe/model"
)

// BenchmarkCPUEngine measures the reference engine on a 96x96x16 volume (C=16, K=4, slabs of
// 8) with one worker and with all cores, in GFLOP by FLOPsPerVoxel: per wall-clock second, per
// core (wall figure / workers), and per CPU-second of the process (robust to other load).
//
//	go test -run '^$' -bench Engine -benchtime 5x ./engine/cpu/
func BenchmarkCPUEngine(b *testing.B) {
	m := model.RandomModel(16, 4, 1)
	vol := enginetest.RandomVolume(96, 96, 16, 3, true)
	out := make([]uint8, vol.NX*vol.NY*vol.NZ)
	flops := model.FLOPsPerVoxel(m.Channels, m.Classes) * float64(len(out))
	for _, workers := range []int{1, runtime.GOMAXPROCS(0)} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
			e := New(m, workers)
			opt := engine.Options{Slab: 8}
			if err := e.Segment(context.Background(), vol, out, opt); err != nil {
				b.Fatal(err)
			}
			cpu0 := processCPUSeconds()
			for b.Loop() {
				if err := e.Segment(context.Background(), vol, out, opt); err != nil {
					b.Fatal(err)
				}
			}
			cpu := processCPUSeconds() - cpu0
			total := flops * float64(b.N) / 1e9
			b.ReportMetric(total/b.Elapsed().Seconds(), "GFLOP/s")
			b.ReportMetric(total/b.Elapsed().Seconds()/float64(workers), "GFLOP/s/core")
			if cpu > 0 {
				b.ReportMetric(total/cpu, "GFLOP/cpu-s")
			}
			b.ReportMetric(float64(len(out))*float64(b.N)/b.Elapsed().Seconds()/1e6, "Mvoxel/s")
		})
	}
}
