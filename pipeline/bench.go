package pipeline

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"
	"voxpipe/engine/engine"
	"voxpipe/internal/hostmem"

	"golang.org/x/sync/errgroup"

	"voxpipe/jobs"
	"voxpipe/model"
)

// BenchRun is one timed engine call on a volume already in (pinned, when the engine has a
// HostAllocator) host memory: pinned input in, mask in pinned host memory out.
type BenchRun struct {
	Wall   time.Duration   // host clock around Segment
	GPU    engine.GPUStats // zero for engines without GPU stats
	Events []engine.Event
}

// BenchEngine copies vol into the engine's host memory, runs warmup untimed calls, then runs
// timed calls. The volume's data must be int16. It returns the runs and the mask.
func BenchEngine(ctx context.Context, eng engine.Engine, vol *model.Volume, slab, warmup, runs int) ([]BenchRun, []uint8, error) {
	if vol.I16 == nil {
		return nil, nil, fmt.Errorf("pipeline: bench needs an int16 volume")
	}
	alloc := hostAlloc(eng)
	n := vol.NX * vol.NY * vol.NZ
	in, mask := hostmem.NewBuffer(alloc, 0), hostmem.NewBuffer(alloc, 0)
	defer in.Free()
	defer mask.Free()
	if err := in.Ensure(2 * n); err != nil {
		return nil, nil, err
	}
	if err := mask.Ensure(n); err != nil {
		return nil, nil, err
	}
	copy(in.Int16s(n), vol.I16)
	pinnedVol := *vol
	pinnedVol.I16 = in.Int16s(n)
	out := mask.Bytes()[:n]

	var result []BenchRun
	for i := 0; i < warmup+runs; i++ {
		var events []engine.Event
		opt := engine.Options{Slab: slab, OnEvent: func(ev engine.Event) { events = append(events, ev) }}
		start := time.Now()
		if err := eng.Segment(ctx, &pinnedVol, out, opt); err != nil {
			return nil, nil, err
		}
		run := BenchRun{Wall: time.Since(start), Events: events}
		if r, ok := eng.(engine.GPUStatsReporter); ok {
			run.GPU = r.LastStats()
		}
		if i >= warmup {
			result = append(result, run)
		}
	}
	return result, append([]uint8(nil), out...), nil
}

var discardLogger = slog.New(slog.DiscardHandler)

// Spread is the median and range of a set of durations, in milliseconds.
type Spread struct{ Median, Min, Max float64 }

// SpreadOf summarises durations.
func SpreadOf(ds []time.Duration) Spread {
	if len(ds) == 0 {
		return Spread{}
	}
	ms := make([]float64, len(ds))
	for i, d := range ds {
		ms[i] = float64(d) / float64(time.Millisecond)
	}
	slices.Sort(ms)
	med := ms[len(ms)/2]
	if len(ms)%2 == 0 {
		med = (ms[len(ms)/2-1] + ms[len(ms)/2]) / 2
	}
	return Spread{Median: med, Min: ms[0], Max: ms[len(ms)-1]}
}

func (s Spread) String() string {
	return fmt.Sprintf("%.2f ms [%.2f-%.2f]", s.Median, s.Min, s.Max)
}

// ReadAll reads (decodes and normalises) every job's volume with nReaders in parallel and does
// nothing else: the readers-alone throughput that a batch run is measured against. It runs
// the read stage of Run itself (each volume on as many goroutines as Config.readThreads says
// for nReaders readers: uncompressed ones by z-ranges, statistics fused, gzipped ones inflated
// whole first when there are several goroutines, else in order), into
// buffers it allocates as Run does (plain host memory: an engine's pinned allocator is not
// used). It returns the wall time and the voxels read.
func ReadAll(ctx context.Context, batch []jobs.Job, nReaders, slab int) (time.Duration, int64, error) {
	r := newServices(Config{
		Input:   Input{Jobs: batch},
		Workers: Workers{Readers: nReaders, Slab: slab},
	}, nil)
	defer r.mem.freeAll()
	todo := make(chan jobs.Job)
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		defer close(todo)
		for _, j := range batch {
			select {
			case todo <- j:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	})
	rd := &readers{services: r}
	var mu sync.Mutex
	var voxels int64
	for i := 0; i < nReaders; i++ {
		g.Go(func() error {
			for j := range todo {
				w := &work{job: j}
				if !rd.read(ctx, i, w) {
					return fmt.Errorf("pipeline: read %s: %s", j.Input, w.rec.sum.Error)
				}
				r.mem.inputs.Put(w.mem.in)
				mu.Lock()
				voxels += w.rec.sum.Voxels
				mu.Unlock()
			}
			return nil
		})
	}
	err := g.Wait()
	return time.Since(r.rec.t0), voxels, err
}
