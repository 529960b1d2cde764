package nifti

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"

	"voxpipe/internal/hostmem"
	"voxpipe/io/inflate"
)

// minParallelGzip is the least compressed size for which Open inflates a file on several
// cores: smaller ones stream just as fast. A variable for tests.
var minParallelGzip int64 = 4 << 20

// WithInflateThreads lets Open decompress a gzipped data file of at least a few MiB on up to n
// goroutines (package io/inflate, ~n times faster than one core): Open then inflates the whole
// file into memory outside the Go heap, and the Reader serves the volume from there, positional
// reads (ReadSlices*At, Seekable) included, like an uncompressed file. If the parallel inflate
// cannot be used (n < 2, a small file, a 4D file of more than two volumes, several gzip members,
// a size that does not match the header) or fails for any reason, the file streams through the
// sequential decoder as before, which then reports any damage: the parallel path never decides
// an error.
func WithInflateThreads(n int) OpenOption {
	return func(c *openConfig) { c.inflateThreads = n }
}

// WithInflateInto lets Open inflate a gzipped data file of one volume (WithInflateThreads) into
// memory the caller owns instead of its own. When the parallel inflate applies, Open calls into
// with the bytes before the voxels in the uncompressed file (vox_offset), the voxels' bytes,
// their datatype and whether their byte order differs from the host's; into returns a slice of
// exactly prefix + dataBytes bytes, whose [prefix:] then receives the voxels as stored (no
// conversion), or nil to decline (Open then inflates into its own memory, as without the
// option). InflatedInto reports whether it happened. If the inflate fails, the slice holds
// garbage and the file streams as usual.
func WithInflateInto(into func(prefix int, dataBytes int64, dt DataType, swapped bool) []byte) OpenOption {
	return func(c *openConfig) { c.inflateInto = into }
}

// InflatedInto reports whether Open inflated the data into the caller's memory
// (WithInflateInto): the volume is then already in it. Reads still work (they copy from it).
func (r *Reader) InflatedInto() bool { return r.mem != nil && !r.mem.own }

// WithContext makes Open stop inflating a file whole (WithInflateThreads) soon after ctx is
// done, returning the context's cause. The streaming reads that follow Open do not use it.
func WithContext(ctx context.Context) OpenOption {
	return func(c *openConfig) { c.ctx = ctx }
}

// inflated is a data file decompressed into memory.
type inflated struct {
	data []byte // the whole uncompressed file
	own  bool   // data is from hostmem.Map (else the caller's: WithInflateInto)
	once sync.Once
}

// release frees the memory if it is the Reader's; later calls do nothing (Close, and the
// cleanup of a Reader dropped without Close).
func (m *inflated) release() error {
	var err error
	m.once.Do(func() {
		if m.own {
			err = hostmem.Unmap(m.data)
		}
	})
	return err
}

// afterGzipMapped, when set, runs once inflateWhole has mapped a compressed file (tests cut
// the file short there).
var afterGzipMapped func(path string)

// inflateWhole decompresses ds (whose uncompressed size must be size) on threads goroutines,
// into the memory that into (nil, or declining) gives, else its own. It returns nil when that
// cannot be done (the caller streams the file), and an error only when ctx stopped it or into
// gave memory of the wrong size (a caller's mistake).
func inflateWhole(ctx context.Context, ds *source, size int64, threads int, into func() []byte) (*inflated, error) {
	if threads < 2 || ds.size < minParallelGzip || size <= 0 || int64(int(size)) != size {
		return nil, nil
	}
	// The compressed file is mapped (the page cache's pages, nothing copied) where it can be,
	// else read while it is inflated (gzipArrival). Either is released in the background:
	// unmapping a 326 MB copy took 19 ms of the read's critical path on the GPU machine, and
	// the readers may still be finishing after a failed inflate; nothing waits for either.
	var src []byte
	var ready func(int) error
	if f, ok := ds.f.(*os.File); ok && int64(int(ds.size)) == ds.size {
		if b, err := hostmem.MapFile(f, int(ds.size)); err == nil {
			src = b
			defer func() { go hostmem.Unmap(b) }()
			if afterGzipMapped != nil {
				afterGzipMapped(f.Name())
			}
		}
	}
	if src == nil {
		a, err := startGzipRead(ctx, ds.f, ds.size, threads)
		if err != nil {
			return nil, nil
		}
		defer func() { go a.release() }()
		src, ready = a.buf, a.ready
	}
	m := &inflated{}
	if into != nil {
		if m.data = into(); m.data != nil && int64(len(m.data)) != size {
			return nil, fmt.Errorf("nifti: WithInflateInto gave %d bytes for a %d-byte file", len(m.data), size)
		}
	}
	if m.data == nil {
		var err error
		if m.data, err = hostmem.Map(int(size)); err != nil {
			return nil, nil
		}
		m.own = true
	}
	// A mapped file cut short meanwhile fails here with inflate.ErrFault, and streams.
	if err := inflate.GunzipArriving(ctx, src, ready, m.data, threads); err != nil {
		m.release()
		if ctx.Err() != nil {
			return nil, context.Cause(ctx)
		}
		return nil, nil
	}
	return m, nil
}

// readerAt serves positional reads from the inflated file.
func (m *inflated) readerAt() *bytes.Reader { return bytes.NewReader(m.data) }

// gzipArrival is a compressed file being read into memory outside the heap (hostmem.Map) by
// goroutines that take its pieces in order, while inflate.GunzipArriving decodes what has
// arrived: for files that cannot be mapped.
type gzipArrival struct {
	buf  []byte
	stop atomic.Bool // the readers take no more pieces
	wg   sync.WaitGroup
	// stopWatch ends the watch on the context (context.AfterFunc).
	stopWatch func() bool

	mu      sync.Mutex
	cond    *sync.Cond
	arrived []bool // per piece
	mark    int    // buf[:mark] has arrived
	err     error  // the first failed read, or the context's cause
}

// gzipPiece is what one read call reads: small, so that the inflate's first chunks (a few
// MiB each) start soon after their bytes are in.
const gzipPiece = 1 << 20

// gzipReaders is how many goroutines read a compressed file for an inflate on threads: a
// quarter of them, 1 to 4 (four read several times faster than 16 inflate). As many as the
// inflate's threads kept every P in a pread (a goroutine in a system call keeps its P until
// the scheduler's monitor takes it back, after up to 10 ms when it has been idle), so the
// goroutines they woke, the inflate's, waited: its first chunk started 24 ms late on the GPU
// machine, after the whole file was read (docs/perf.md).
func gzipReaders(threads int) int { return min(max(threads/4, 1), 4) }

// startGzipRead maps size bytes, reads the file's last 8 bytes (the gzip trailer, which the
// inflate checks first), and starts gzipReaders(threads) goroutines reading the rest.
func startGzipRead(ctx context.Context, f dataFile, size int64, threads int) (*gzipArrival, error) {
	if int64(int(size)) != size || size < 8 {
		return nil, errors.New("nifti: compressed file too large or too small to read whole")
	}
	b, err := hostmem.Map(int(size))
	if err != nil {
		return nil, err
	}
	if _, err := f.ReadAt(b[size-8:], size-8); err != nil {
		hostmem.Unmap(b)
		return nil, err
	}
	pieces := (len(b) + gzipPiece - 1) / gzipPiece
	a := &gzipArrival{buf: b, arrived: make([]bool, pieces)}
	a.cond = sync.NewCond(&a.mu)
	a.stopWatch = context.AfterFunc(ctx, func() { a.failed(-1, context.Cause(ctx)) })
	var next atomic.Int64
	for range min(gzipReaders(threads), pieces) {
		a.wg.Go(func() {
			for !a.stop.Load() {
				i := int(next.Add(1) - 1)
				if i >= pieces {
					return
				}
				lo, hi := i*gzipPiece, min((i+1)*gzipPiece, len(b))
				if _, err := f.ReadAt(b[lo:hi], int64(lo)); err != nil { // a short read is an error (io.EOF) here
					a.failed(i, err)
					return
				}
				a.done(i)
			}
		})
	}
	return a, nil
}

func (a *gzipArrival) done(i int) {
	a.mu.Lock()
	a.arrived[i] = true
	for a.mark < len(a.buf) && a.arrived[a.mark/gzipPiece] {
		a.mark = min(a.mark+gzipPiece, len(a.buf))
	}
	a.cond.Broadcast()
	a.mu.Unlock()
}

func (a *gzipArrival) failed(i int, err error) {
	a.stop.Store(true)
	a.mu.Lock()
	if a.err == nil {
		if i >= 0 {
			err = fmt.Errorf("read compressed data at %d: %w", int64(i)*gzipPiece, err)
		}
		a.err = err
	}
	a.cond.Broadcast()
	a.mu.Unlock()
}

// ready waits until buf[:n] has arrived, or returns the error that stopped the reading.
func (a *gzipArrival) ready(n int) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	for a.mark < n && a.err == nil {
		a.cond.Wait()
	}
	if a.mark >= n {
		return nil
	}
	return a.err
}

// release stops the readers, waits for them and unmaps the memory.
func (a *gzipArrival) release() {
	a.stop.Store(true)
	a.wg.Wait()
	a.stopWatch()
	hostmem.Unmap(a.buf)
}
