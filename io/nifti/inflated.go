package nifti

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"sync"

	"golang.org/x/sync/errgroup"

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
// gave memory of the wrong size (a caller's mistake). A stream that inflates to more than size,
// its trailer agreeing modulo 2^32, is one that cannot be done: the inflate gives up within a
// few MiB per goroutine past size (io/inflate bounds its chunks' output), and the streaming
// decoder refuses the file as it reaches the end of the data (gzipSlack).
func inflateWhole(ctx context.Context, ds *source, size int64, threads int, into func() []byte) (*inflated, error) {
	if threads < 2 || ds.size < minParallelGzip || size <= 0 || int64(int(size)) != size {
		return nil, nil
	}
	// The compressed file is mapped (the page cache's pages, nothing copied) where it can be,
	// else read whole first. Either is released in the background: unmapping it would sit on
	// the read's critical path (docs/perf.md), and nothing waits for it.
	var src []byte
	if f, ok := ds.f.(*os.File); ok && int64(int(ds.size)) == ds.size {
		if b, err := hostmem.MapFile(f, int(ds.size)); err == nil {
			src = b
			if afterGzipMapped != nil {
				afterGzipMapped(f.Name())
			}
		}
	}
	if src == nil {
		b, err := readGzipWhole(ds.f, ds.size, threads)
		if err != nil {
			return nil, nil
		}
		src = b
	}
	defer func() { go hostmem.Unmap(src) }()
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
	if err := inflate.GunzipContext(ctx, src, m.data, threads); err != nil {
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

// readGzipWhole reads a compressed file that cannot be mapped into memory outside the heap
// (hostmem.Map), in pieces on threads goroutines. (Reading it while inflating it is no faster:
// the copy's CPU time is spent either way, docs/perf.md.)
func readGzipWhole(f dataFile, size int64, threads int) ([]byte, error) {
	if int64(int(size)) != size {
		return nil, errors.New("nifti: file too large to read whole")
	}
	b, err := hostmem.Map(int(size))
	if err != nil {
		return nil, err
	}
	const piece = 8 << 20
	var g errgroup.Group
	g.SetLimit(threads)
	for off := 0; off < len(b); off += piece {
		g.Go(func() error {
			_, err := f.ReadAt(b[off:min(off+piece, len(b))], int64(off))
			return err // a short read is an error (io.EOF) here
		})
	}
	if err := g.Wait(); err != nil {
		hostmem.Unmap(b)
		return nil, err
	}
	return b, nil
}
