package inflate

import (
	"bytes"
	"errors"
	"math"
	"runtime"
	"slices"
	"testing"
	"time"

	"voxpipe/internal/gzbomb"
)

// allocatedDuring returns the bytes the process allocated on the heap while f ran (the tests
// of this package run one at a time).
func allocatedDuring(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// The bomb files are what they claim: klauspost/compress reads one, checksum and all.
func TestZerosBomb(t *testing.T) {
	t.Parallel()
	prefix := volumeLike(100000, 20)
	got, err := reference(t, gzbomb.Zeros(prefix, 3))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(prefix)+3<<20 || !bytes.Equal(got[:len(prefix)], prefix) || slices.ContainsFunc(got[len(prefix):], isSet) {
		t.Fatalf("%d bytes, not the prefix and 3 MiB of zeros", len(got))
	}
}

// TestGunzipBomb: a stream that inflates to 4 GiB more than dst, its trailer agreeing with
// dst's size modulo 2^32, is refused with ErrCorrupt quickly and with memory far below what it
// inflates to (the chunks' output is bounded by the budget; before, every chunk decoded on to
// its end: GBs); also where the overflow starts after megabytes of data that the chunks decode
// as usual.
func TestGunzipBomb(t *testing.T) {
	cases := []struct {
		name   string
		prefix int
		lo, hi int // chunk sizes, 0: the package's
	}{
		{"1 MiB", 1 << 20, 0, 0},
		{"1 MiB, small chunks", 1 << 20, 64 << 10, 128 << 10},
		{"16 MiB, small chunks", 16 << 20, 64 << 10, 128 << 10},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.lo > 0 {
				smallChunks(t, c.lo, c.hi)
			}
			prefix := volumeLike(c.prefix, 21)
			gz := gzbomb.Zeros(prefix, 4096)
			dst := make([]byte, len(prefix))
			for _, threads := range []int{1, 2, 4, 8} {
				// All allocated, not the peak, in buffers grown by doubling: the in-order
				// decoder's (up to dst's size: 2x), the chunks' (the budget, dst's size and
				// 1.25 MiB per chunk in flight, in symbols of 2 bytes: 4x), and each chunk
				// buffer's first 3 MiB. Before the bound: 270 MiB to 8 GiB.
				bound := uint64(6*len(dst) + chunksInFlight(threads)*11<<20)
				// Quickly: 2 s for each core it may use, in CPU time (the wall clock counts
				// the neighbours on a shared machine).
				limit := 2 * time.Second * raceSlowdown * time.Duration(min(threads, runtime.NumCPU()))
				alloc, cpu := bombCost(t, gz, dst, threads, bound, limit)
				if alloc > bound {
					t.Errorf("%d threads: %d MiB allocated for %d MiB of output", threads, alloc>>20, len(dst)>>20)
				}
				if cpu > limit {
					t.Errorf("%d threads: took %v of CPU, limit %v", threads, cpu, limit)
				}
			}
		})
	}
}

// bombCost inflates the bomb gz into dst on threads, checks that it fails with ErrCorrupt, and
// returns the least memory allocated and CPU time taken over up to three tries, stopping at the
// first within bound and limit. How many chunks wait for the in-order stitcher, each holding its
// buffer, depends on how the scheduler treats the stitcher: beside another test process on 2
// cores, one try in five went 10 % past the bound. A bomb decoded without its budget costs GBs
// on every try.
func bombCost(t *testing.T, gz, dst []byte, threads int, bound uint64, limit time.Duration) (uint64, time.Duration) {
	t.Helper()
	alloc, cpu := uint64(math.MaxUint64), time.Duration(math.MaxInt64)
	for try := 0; try < 3 && (alloc > bound || cpu > limit); try++ {
		var err error
		start, startCPU := time.Now(), processCPU()
		a := allocatedDuring(func() { err = Gunzip(gz, dst, threads) })
		c := processCPU() - startCPU
		t.Logf("%d threads: %v, %d KiB allocated in %v (%v of CPU)", threads, err, a>>10, time.Since(start), c)
		if !errors.Is(err, ErrCorrupt) {
			t.Errorf("%d threads: %v, want ErrCorrupt", threads, err)
		}
		alloc, cpu = min(alloc, a), min(cpu, c)
	}
	return alloc, cpu
}

// A valid stream that inflates about 1000:1 (long runs of zeros) still decodes in parallel:
// the budget covers the chunks of a stream no longer than dst.
func TestGunzipHighRatio(t *testing.T) {
	smallChunks(t, 8<<10, 16<<10)
	stats := countStitching(t)
	prefix := volumeLike(1<<20, 22)
	gz := gzbomb.Zeros(prefix, 64)
	for _, threads := range []int{2, 4, 8} {
		dst := make([]byte, len(prefix)+64<<20)
		if err := Gunzip(gz, dst, threads); err != nil {
			t.Fatalf("%d threads: %v", threads, err)
		}
		if !bytes.Equal(dst[:len(prefix)], prefix) || slices.ContainsFunc(dst[len(prefix):], isSet) {
			t.Fatalf("%d threads: output differs", threads)
		}
		if stats[0] < 4 {
			t.Errorf("%d threads: %d chunks decoded in parallel were used (%d runs in order)", threads, stats[0], stats[1])
		}
	}
}

// The decoder stops once its output passes its allowance, drawing more from a shared budget
// where it has one, and only from there; between two draws it resumes mid-block, with the
// same output as without a bound.
func TestDecoderAllowance(t *testing.T) {
	t.Parallel()
	data := volumeLike(4<<20, 23)
	gz := klauspostGzip(6)(data)
	start, _ := headerLen(gz)
	body := gz[start : len(gz)-8]
	end := int64(len(body))*8 + 1
	n := len(data)

	// output returns what d decoded as bytes: a decoder started on symbols at the stream's
	// start has no markers to resolve.
	output := func(d *decoder) []byte {
		syms, b := d.output()
		out := make([]byte, 0, len(syms)+len(b))
		for _, s := range syms {
			if s >= windowMarker {
				t.Fatal("a marker at the stream's start")
			}
			out = append(out, byte(s))
		}
		return append(out, b...)
	}
	var d decoder
	for _, symbols := range []bool{false, true} {
		begin := func() {
			if symbols {
				d.startSymbols(body, 0, outBuf{})
			} else {
				d.startBytes(body, 0, outBuf{}, nil)
			}
		}
		begin()
		d.allow = n
		if _, err := d.run(end); err != nil || !bytes.Equal(output(&d), data) {
			t.Fatalf("symbols %v, allowed all: %v", symbols, err)
		}
		begin()
		d.allow = n - 1
		if _, err := d.run(end); err != errOutputLimit {
			t.Fatalf("symbols %v, allowed one byte less: %v", symbols, err)
		}
		if p := d.produced(); p < n-1 || p > n+maxMatch+64 {
			t.Errorf("symbols %v: stopped after %d values, allowed %d", symbols, p, n-1)
		}

		// From a budget of exactly the output: many draws, the same output, all of it held.
		share := &budget{left: n}
		begin()
		d.allow, d.ceiling, d.share = 0, noLimit, share
		if _, err := d.run(end); err != nil || !bytes.Equal(output(&d), data) {
			t.Fatalf("symbols %v, from a budget: %v", symbols, err)
		}
		if d.allow+share.left != n || d.allow != n {
			t.Errorf("symbols %v: the decoder holds %d, the budget has %d left, of %d", symbols, d.allow, share.left, n)
		}
		// A budget of half, or a ceiling of half: it stops within a block's reach of it.
		for _, half := range []struct{ left, ceiling int }{{n / 2, noLimit}, {n, n / 2}} {
			share := &budget{left: half.left}
			begin()
			d.allow, d.ceiling, d.share = 0, half.ceiling, share
			if _, err := d.run(end); err != errOutputLimit {
				t.Fatalf("symbols %v, %+v: %v", symbols, half, err)
			}
			if d.allow > n/2 || d.produced() <= d.allow || d.produced() > n/2+1<<16+maxMatch+64 {
				t.Errorf("symbols %v, %+v: allowed %d, stopped after %d", symbols, half, d.allow, d.produced())
			}
			if d.allow+share.left != half.left {
				t.Errorf("symbols %v, %+v: the decoder holds %d, the budget has %d left", symbols, half, d.allow, share.left)
			}
		}
	}
}
