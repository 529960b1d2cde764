//go:build cuda

package hostmem

import (
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"gorgonia.org/cu"
)

// pinnedWithContext runs f on a locked OS thread with device 0's primary context current.
func pinnedWithContext(t testing.TB, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		dev := cu.Device(0)
		ctx, err := dev.RetainPrimaryCtx()
		if err != nil {
			t.Errorf("retain primary context: %v", err)
			return
		}
		defer dev.ReleasePrimaryCtx()
		if err := cu.SetCurrentContext(ctx); err != nil {
			t.Errorf("set context: %v", err)
			return
		}
		f()
	}()
	<-done
}

// pinnedMmapTouched maps n anonymous bytes and touches their pages from workers goroutines.
func pinnedMmapTouched(t testing.TB, n, workers int) []byte {
	b, err := syscall.Mmap(-1, 0, n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	chunk := (n/workers + 4095) &^ 4095
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(lo int) {
			defer wg.Done()
			for i := lo; i < min(lo+chunk, n); i += 4096 {
				b[i] = 1
			}
		}(w * chunk)
	}
	wg.Wait()
	return b
}

// BenchmarkPinnedCost times the ways of getting 512 MiB of page-locked host memory (the input
// of one 512x512x1000 int16 volume): what a single-volume run pays before its first copy. Each
// way's wall time is logged as a TABLE line. On the GPU machine (scripts/gpu-check.sh runs it
// with GPU_CHECK_PINNED_COST=1):
//
//	bin/pinned.test -test.run '^$' -test.bench PinnedCost -test.benchtime 1x
func BenchmarkPinnedCost(b *testing.B) {
	for range b.N {
		pinnedCost(b)
	}
}

func pinnedCost(t testing.TB) {
	const n = 512 << 20
	report := func(what string, d time.Duration) {
		t.Logf("TABLE|pinned 512 MiB: %s|%.1f ms (%.2f GB/s)", what, float64(d)/1e6, float64(n)/d.Seconds()/1e9)
	}
	pinnedWithContext(t, func() {
		pinnedCostAllocs(t, n, report)
		pinnedCostRegister(t, n, report)
	})
	pinnedCostThreads(t, n, report)
}

// pinnedCostAllocs times cuMemHostAlloc (one call, then 16 chunks) and AllocRegistered of n
// bytes, and their frees (a context current).
func pinnedCostAllocs(t testing.TB, n int, report func(string, time.Duration)) {
	const chunk = 32 << 20
	var t0 time.Time
	t0 = time.Now()
	p, err := AllocPinned(n)
	if err != nil {
		t.Fatal(err)
	}
	report("cuMemHostAlloc one call", time.Since(t0))
	t0 = time.Now()
	if err := FreePinned(p); err != nil {
		t.Fatal(err)
	}
	report("cuMemFreeHost", time.Since(t0))

	t0 = time.Now()
	p, err = AllocRegistered(n)
	if err != nil {
		t.Fatal(err)
	}
	report("AllocRegistered (what the engine uses)", time.Since(t0))
	t0 = time.Now()
	if err := FreeRegistered(p, n); err != nil {
		t.Fatal(err)
	}
	report("FreeRegistered", time.Since(t0))

	t0 = time.Now()
	var ps []unsafe.Pointer
	for i := 0; i < n/chunk; i++ {
		p, err := AllocPinned(chunk)
		if err != nil {
			t.Fatal(err)
		}
		ps = append(ps, p)
	}
	report("cuMemHostAlloc 16 x 32 MiB, one thread", time.Since(t0))
	for _, p := range ps {
		_ = FreePinned(p)
	}
}

// pinnedCostRegister times mmap with the pages touched by 1 and 16 goroutines, then
// cuMemHostRegister of touched and of untouched memory (a context current).
func pinnedCostRegister(t testing.TB, n int, report func(string, time.Duration)) {
	var t0 time.Time
	for _, workers := range []int{1, 16} {
		t0 = time.Now()
		b := pinnedMmapTouched(t, n, workers)
		report("mmap + touch, "+strconv.Itoa(workers)+" goroutines", time.Since(t0))
		t0 = time.Now()
		if err := Pin(unsafe.Pointer(&b[0]), n); err != nil {
			t.Fatal(err)
		}
		report("cuMemHostRegister of touched memory", time.Since(t0))
		t0 = time.Now()
		if err := Unpin(unsafe.Pointer(&b[0])); err != nil {
			t.Fatal(err)
		}
		report("cuMemHostUnregister", time.Since(t0))
		_ = syscall.Munmap(b)
	}
	b, err := syscall.Mmap(-1, 0, n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	t0 = time.Now()
	if err := Pin(unsafe.Pointer(&b[0]), n); err != nil {
		t.Fatal(err)
	}
	report("cuMemHostRegister of untouched mmap", time.Since(t0))
	_ = Unpin(unsafe.Pointer(&b[0]))
	_ = syscall.Munmap(b)
}

// pinnedCostThreads times cuMemHostAlloc of n bytes in 32 MiB chunks over 4 and 16 threads, each
// with the primary context: does the driver serialise?
func pinnedCostThreads(t testing.TB, n int, report func(string, time.Duration)) {
	const chunk = 32 << 20
	var t0 time.Time
	for _, threads := range []int{4, 16} {
		var wg sync.WaitGroup
		ps := make([][]unsafe.Pointer, threads)
		t0 = time.Now()
		for i := 0; i < threads; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				pinnedWithContext(t, func() {
					for j := 0; j < n/chunk/threads; j++ {
						p, err := AllocPinned(chunk)
						if err != nil {
							t.Error(err)
							return
						}
						ps[i] = append(ps[i], p)
					}
				})
			}()
		}
		wg.Wait()
		report("cuMemHostAlloc 16 x 32 MiB over "+strconv.Itoa(threads)+" threads", time.Since(t0))
		pinnedWithContext(t, func() {
			for _, l := range ps {
				for _, p := range l {
					_ = FreePinned(p)
				}
			}
		})
	}
}
