package pipeline

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"

	"voxpipe/internal/hostmem"
	"voxpipe/io/nifti"
	"voxpipe/jobs"
	"voxpipe/telemetry/timing"
)

// The hand-over between a volume's engine worker and its writer, driven by channels alone:
// slabDone never blocks however often the writer lags (wake-ups coalesce), the writer wakes
// for each change and sees the planes ready in order, finish fills the mask, and a slab
// reported out of order fails the volume whatever the engine says after.
func TestSegProgressHandsSlabsToTheWriter(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		p := newSegProgress(12)
		seen := make(chan int, 16)
		go func() { // the writer's loop (writers.writeMask), without the writing
			for written := 0; ; {
				ready, finished, err := p.state()
				if err != nil {
					close(seen)
					return
				}
				if ready == written {
					if finished {
						close(seen)
						return
					}
					<-p.wake
					continue
				}
				seen <- ready
				written = ready
			}
		}()
		synctest.Wait()
		if len(seen) != 0 {
			t.Fatal("the writer went on before any slab was reported")
		}
		p.slabDone(0, 4)
		synctest.Wait()
		if got := <-seen; got != 4 {
			t.Fatalf("writer saw %d planes ready, want 4", got)
		}
		p.slabDone(4, 8) // twice before the writer looks: one pending wake-up, no blocking
		p.slabDone(8, 10)
		if err := p.finish(nil); err != nil {
			t.Fatal(err)
		}
		var last int
		for r := range seen {
			last = r
		}
		if last != 12 {
			t.Errorf("writer's last view: %d planes, want all 12 (finish fills the mask)", last)
		}

		q := newSegProgress(12)
		q.slabDone(4, 8) // z 0..4 never reported
		if err := q.finish(nil); err == nil {
			t.Error("a slab reported out of order did not fail the volume")
		}
		if ready, finished, err := q.state(); ready != 0 || !finished || err == nil {
			t.Errorf("after a broken contract: %d ready, finished %v, %v", ready, finished, err)
		}
	})
}

// testServices are a run's services without stages: one reader, one engine's worth of
// buffers in Go memory, nothing recorded.
func testServices(maxMemory int64) *services {
	return newServices(Config{
		Input:   Input{Jobs: make([]jobs.Job, 1)},
		Workers: Workers{Slab: 1, Readers: 1, Writers: 1, MaxMemory: maxMemory},
	}, nil)
}

// A volume handed to a stage that never takes it is failed, once, when the run's context
// ends, and put says so: no worker has it.
func TestQueuePutFailsTheVolumeOnCancel(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		sv := testServices(0)
		q := make(queue)
		ctx, cancel := context.WithCancel(context.Background())
		w := &work{job: jobs.Job{Name: "v", Input: "v.nii"}}
		done := make(chan error, 1)
		go func() { done <- q.put(ctx, sv.end, w) }()
		synctest.Wait()
		if len(done) != 0 {
			t.Fatal("put returned with no one taking the volume")
		}
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("put: %v, want context.Canceled", err)
		}
		if res := sv.end.result(); res != (Result{Failed: 1}) {
			t.Errorf("result %+v, want the volume failed once", res)
		}
		if w.rec.sum.Status != timing.StatusFailed || w.rec.sum.Error == "" {
			t.Errorf("volume: %q %q, want failed with the cause", w.rec.sum.Status, w.rec.sum.Error)
		}
	})
}

// header3D is a header of nx*ny*nz voxels and nothing else.
func header3D(nx, ny, nz int64) *nifti.Header {
	return &nifti.Header{Dim: [8]int64{3, nx, ny, nz, 1, 1, 1, 1}}
}

// The mask is prewarmed from the header the producer hands over, not before; without one
// (the first job not to be done, a cancelled run) nothing is allocated; under a budget too
// tight for it, nothing either, and the budget is left as it was.
func TestPrewarmMaskTakesTheProducersHeader(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		mem := testServices(0).mem
		first := make(chan *nifti.Header, 1)
		done := make(chan struct{})
		go func() {
			mem.prewarmMask(context.Background(), first)
			close(done)
		}()
		synctest.Wait()
		if maskBytes(t, mem) != 0 {
			t.Fatal("a mask was sized before the producer read a header")
		}
		first <- header3D(4, 5, 6)
		<-done
		if n := maskBytes(t, mem); n < 4*5*6 {
			t.Errorf("prewarmed mask holds %d bytes, want at least %d", n, 4*5*6)
		}

		for name, hand := range map[string]func(chan *nifti.Header, context.CancelFunc){
			"no header": func(c chan *nifti.Header, _ context.CancelFunc) { close(c) },
			"cancelled": func(_ chan *nifti.Header, cancel context.CancelFunc) { cancel() },
		} {
			mem := testServices(0).mem
			c := make(chan *nifti.Header, 1)
			ctx, cancel := context.WithCancel(context.Background())
			hand(c, cancel)
			mem.prewarmMask(ctx, c)
			cancel()
			if n := maskBytes(t, mem); n != 0 {
				t.Errorf("%s: %d bytes allocated", name, n)
			}
		}

		tight := testServices(100).mem
		c := make(chan *nifti.Header, 1)
		c <- header3D(4, 5, 6)
		tight.prewarmMask(context.Background(), c)
		if n := maskBytes(t, tight); n != 0 {
			t.Errorf("under a 100-byte budget: %d bytes allocated for a 120-byte mask", n)
		}
		if !tight.budget.TryAcquire(100) {
			t.Error("prewarming kept part of the budget")
		}
	})
}

// maskBytes is the bytes the idle mask buffers of mem hold.
func maskBytes(t *testing.T, mem *memory) int {
	t.Helper()
	bufs := mem.masks.Drain()
	n := 0
	for _, b := range bufs {
		n += b.Allocated()
	}
	for _, b := range bufs {
		mem.masks.Put(b)
	}
	t.Cleanup(func() {
		if err := hostmem.FreeAll(mem.masks); err != nil {
			t.Error(err)
		}
	})
	return n
}

// gatedAlloc allocates Go memory once gate is closed, signalling asked first.
type gatedAlloc struct{ asked, gate chan struct{} }

func (g gatedAlloc) alloc(n int) (hostmem.Block, error) {
	close(g.asked)
	<-g.gate
	return heapBlock(make([]byte, n)), nil
}

type heapBlock []byte

func (b heapBlock) Bytes() []byte { return b }
func (b heapBlock) Free() error   { return nil }

// A reader that must wait for memory while the prewarming holds the mask buffer (sizing it:
// the reader's trim cannot free it) is served once the prewarming gives the buffer back: it
// is freed for the waiter, not kept idle in the pool while the reader waits forever.
func TestPrewarmGivesTheMaskBackToAWaitingReader(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		g := gatedAlloc{asked: make(chan struct{}), gate: make(chan struct{})}
		h := header3D(4, 5, 6)
		mem := &memory{
			inputs:      hostmem.NewPool(hostmem.NewBuffer(nil, inputHeadroom)),
			masks:       hostmem.NewPool(hostmem.NewBuffer(g.alloc, 0)),
			readThreads: 1,
			log:         discardLogger,
		}
		in, mask, scratch, prep := mem.volumeNeeds(h, nil, nil)
		mem.budget = hostmem.NewBudget(in + mask + scratch + prep) // one volume exactly
		first := make(chan *nifti.Header, 1)
		first <- h
		go mem.prewarmMask(context.Background(), first)
		<-g.asked // prewarming holds the mask buffer and its bytes of the budget
		buf, err := mem.inputs.Get(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		w := &work{job: jobs.Job{Name: "v", Input: "v.nii"}, src: source{hdr: h}, mem: held{in: buf}}
		admitted := make(chan error, 1)
		go func() { admitted <- mem.admit(context.Background(), w) }()
		synctest.Wait()
		if len(admitted) != 0 || !mem.budget.Waiting() {
			t.Fatal("the reader did not wait for the memory the prewarming holds")
		}
		close(g.gate)
		if err := <-admitted; err != nil {
			t.Fatal(err)
		}
		if w.mem.reserved != in+mask+scratch+prep {
			t.Errorf("reserved %d bytes, want the volume's %d", w.mem.reserved, in+mask+scratch+prep)
		}
		if n := maskBytes(t, mem); n != 0 {
			t.Errorf("the prewarmed mask kept %d bytes while the reader waited", n)
		}
	})
}
