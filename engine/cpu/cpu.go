package cpu

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"time"
	"voxpipe/engine/engine"
	"voxpipe/internal/hostmem"
	"voxpipe/model"
	"voxpipe/stage"

	"golang.org/x/sync/errgroup"
)

// block is how many output channels the convolution kernels keep in registers at once: in Go,
// 8 float32 accumulators plus the input value and a temporary fit amd64's 15 usable XMM
// registers (16 would spill); in the vector kernels, 8 float32s are one YMM register.
const block = 8

// wide is how many output channels the AVX-512 kernels keep in one ZMM register: two blocks.
const wide = 2 * block

//go:generate go run gen_kernels.go
//go:generate go run ./asm -out kernels_amd64.s -stubs kernels_amd64.go

// Engine is the pure-Go reference engine. It computes a slab's output from the input slices
// within Halo of it; every voxel's arithmetic is the same whatever the slab boundaries (float32,
// accumulated in a fixed order: bias, then taps by dz, dy, dx, input channel), so masks are
// bit-identical for any slab size. Not safe for concurrent use.
type Engine struct {
	m       *model.Model
	workers int

	c, cp, k int // channels, channels rounded up to a block, classes
	chunk    int // input values per kernel chunk: 16 when cp allows, else 8
	kern     kernels

	// Convolution weights transposed for the kernels, output and input channels zero-padded to
	// cp: w1 [block of 8 outputs][tap][8] for voxelConv1; w2, wg3 [block][chunk][i][8] for
	// voxelChunks8/16, a chunk being consecutive values of e (channels of one voxel).
	w1, w2, wg3 [][block]float32
	// With kernelsAVX512, the same rows for each pair of blocks side by side (packWide).
	w1w, w2w, wg3w [][wide]float32
	b1, b2, bg3    []float32 // biases, zero-padded to cp

	xbuf, ebuf []float32 // per slab: normalised input and e, both zero-bordered
	xmap, emap []byte    // their memory, when mapped by slabBuf (nil: the Go heap's)
	scratch    []*workerScratch
	closed     bool
}

var _ engine.Engine = (*Engine)(nil)

// workerScratch is one worker's reusable memory for a row of output. Its counters (conf) change
// at every voxel: the padding keeps other workers' scratch off their cache lines.
type workerScratch struct {
	_    [64]byte
	s, g []float32        // one row of s and g, [x][cp]
	t    []float32        // gateHeadRowVector's transposed rows (vector kernels only)
	f    []float32        // f at one voxel
	offs []int            // offsets of the input segments or chunks of the row being computed
	conf model.Confidence // the worker's share of the volume's confidence (gateHeadRow)
	_    [64]byte
}

// rowVoxels is how many voxels a row of s or g holds: nx, or with the vector kernels nx rounded
// up to 8 (gateHeadRowVector transposes whole blocks of 8).
func (e *Engine) rowVoxels(nx int) int {
	if e.vectorHead() {
		return (nx + 7) &^ 7
	}
	return nx
}

// ScratchBytes is the memory the engine holds for slabs of the given size on NX x NY slices:
// x and e for the slab and its halo (e is 4*C bytes a voxel, so about 64*(slab+4)*NX*NY bytes
// for C=16) plus two rows per worker (and, with the vector kernels, their transposes).
func (e *Engine) ScratchBytes(nx, ny, slab int) int64 {
	x := int64(slab+6) * int64(ny+2) * int64(nx+2)
	ev := int64(slab+4) * int64(ny+4) * int64(nx+4) * int64(e.cp)
	rows := int64(e.workers) * 2 * int64(e.rowVoxels(nx)) * int64(e.cp)
	if e.vectorHead() {
		rows += int64(e.workers) * int64(e.transposedLen(nx))
	}
	return 4 * (x + ev + rows)
}

// New prepares an engine for m (which must be valid; see Model.Validate). workers <= 0
// means GOMAXPROCS.
func New(m *model.Model, workers int) *Engine { return newWithKernels(m, workers, defaultKernels) }

// newWithKernels is New with the kernel set k (which this CPU must run).
func newWithKernels(m *model.Model, workers int, k kernels) *Engine {
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	c := m.Channels
	cp := (c + block - 1) / block * block
	e := &Engine{m: m, workers: workers, c: c, cp: cp, k: m.Classes, chunk: block, kern: k}
	if cp%16 == 0 {
		e.chunk = 16
	}
	nb := cp / block

	e.b1 = padBias(m.C1B, cp)
	e.b2 = padBias(m.C2B, cp)
	e.bg3 = padBias(m.CGB, cp)

	// conv1: segments are (dz, dy) rows of 3 input values (dx); i = dx.
	e.w1 = make([][block]float32, nb*27)
	for co := 0; co < c; co++ {
		b, k := co/block, co%block
		for t := 0; t < 27; t++ {
			e.w1[b*27+t][k] = m.C1W[co*27+t]
		}
	}
	// conv2 reads, for each (dz, dy), 3 voxels of cp channels in a row: input index
	// (dz*3+dy)*3*cp + dx*cp + ci. The dilated conv reads single voxels: (dz*9+dy*3+dx)*cp + ci.
	// Chunk c, value i is input index c*chunk+i, so both sum by dz, dy, dx, ci.
	e.w2 = make([][block]float32, nb*27*cp)
	e.wg3 = make([][block]float32, nb*27*cp)
	for co := 0; co < c; co++ {
		b, k := co/block, co%block
		for ci := 0; ci < c; ci++ {
			for t := 0; t < 27; t++ {
				src := (co*c+ci)*27 + t
				e.w2[b*27*cp+t*cp+ci][k] = m.C2W[src]
				e.wg3[b*27*cp+t*cp+ci][k] = m.CGW[src]
			}
		}
	}
	if e.kern == kernelsAVX512 {
		e.w1w, e.w2w, e.wg3w = packWide(e.w1, 27), packWide(e.w2, 27*cp), packWide(e.wg3, 27*cp)
	}
	e.scratch = make([]*workerScratch, workers)
	for i := range e.scratch {
		e.scratch[i] = &workerScratch{f: make([]float32, c), offs: make([]int, 27*cp/block), conf: model.Confidence{Labels: paddedCounts(e.k)}}
	}
	return e
}

func padBias(b []float32, n int) []float32 {
	out := make([]float32, n)
	copy(out, b)
	return out
}

// Name implements Engine.
func (e *Engine) Name() string { return "cpu" }

// Close releases the engine's buffers; later calls get ErrEngineClosed. It may be called more
// than once.
func (e *Engine) Close() error {
	e.closed = true
	e.xbuf, e.ebuf = nil, nil
	for _, m := range []*[]byte{&e.xmap, &e.emap} {
		if *m != nil {
			hostmem.Unmap(*m)
			*m = nil
		}
	}
	for _, ws := range e.scratch {
		ws.s, ws.g = nil, nil
	}
	return nil
}

// Segment implements Engine: slabs of opt.Slab output slices in order, one StageSegment Event per
// slab (Bytes: the input slices it read, halo included; Voxels: its output voxels), then
// OnSlabDone for that slab (its labels are final once the slab's passes have returned).
// Cancellation is checked before every row of every stage.
func (e *Engine) Segment(ctx context.Context, vol *model.Volume, out []uint8, opt engine.Options) error {
	if e.closed {
		return engine.ErrEngineClosed
	}
	if err := engine.CheckVolume(vol, out); err != nil {
		return err
	}
	if opt.Slab < 1 {
		return fmt.Errorf("%w: slab of %d slices", engine.ErrBadVolume, opt.Slab)
	}
	start := time.Now()
	plane := vol.NX * vol.NY
	for _, ws := range e.scratch {
		clear(ws.conf.Labels)
		ws.conf = model.Confidence{Labels: ws.conf.Labels}
	}
	for i, z0 := 0, 0; z0 < vol.NZ; i, z0 = i+1, z0+opt.Slab {
		z1 := min(z0+opt.Slab, vol.NZ)
		t0 := time.Now()
		if err := e.slab(ctx, vol, z0, z1, out[z0*plane:z1*plane]); err != nil {
			return fmt.Errorf("segment slab %d (z %d..%d): %w", i, z0, z1, err)
		}
		if opt.OnEvent != nil {
			in0, in1 := max(z0-model.Halo, 0), min(z1+model.Halo, vol.NZ)
			opt.OnEvent(engine.Event{
				Stage:    stage.Segment,
				Slab:     i,
				Start:    t0.Sub(start),
				Duration: time.Since(t0),
				Bytes:    int64(in1-in0) * int64(plane) * int64(vol.ElemSize()),
				Voxels:   int64(z1-z0) * int64(plane),
			})
		}
		if opt.OnSlabDone != nil {
			opt.OnSlabDone(z0, z1)
		}
	}
	if opt.Confidence != nil {
		c := model.Confidence{Labels: make([]int64, e.k)}
		for _, ws := range e.scratch {
			c.Add(ws.conf)
		}
		*opt.Confidence = c
	}
	return nil
}

// SegmentSlab computes output slices [z0, z1) into out (len (z1-z0)*NX*NY), reading input
// slices z0-Halo..z1+Halo clipped to the volume.
func (e *Engine) SegmentSlab(vol *model.Volume, z0, z1 int, out []uint8) error {
	if e.closed {
		return engine.ErrEngineClosed
	}
	if err := engine.CheckVolume(vol, nil); err != nil {
		return err
	}
	if z0 < 0 || z1 > vol.NZ || z0 >= z1 {
		return fmt.Errorf("%w: slab z %d..%d of a volume of %d slices", engine.ErrBadVolume, z0, z1, vol.NZ)
	}
	if want := (z1 - z0) * vol.NX * vol.NY; len(out) != want {
		return fmt.Errorf("%w: output of %d voxels for a slab of %d", engine.ErrBadVolume, len(out), want)
	}
	return e.slab(context.Background(), vol, z0, z1, out)
}

// slab computes output slices [z0, z1) in three parallel passes: x = Norm(v) for the slices
// within Halo, e for the slices within 2, then s, g and the gate, head and argmax row by row.
// Buffers have zero borders (1 voxel for x, 2 for e, in y and x) and zero planes outside the
// volume, which is the convolutions' zero padding.
func (e *Engine) slab(ctx context.Context, vol *model.Volume, z0, z1 int, out []uint8) error {
	nx, ny := vol.NX, vol.NY
	slices := z1 - z0
	l := slabLayout{
		// x: planes z0-3 .. z1+2, rows and columns with a 1-voxel border.
		xz0: z0 - 3, xPlanes: slices + 6, xpy: ny + 2, xpx: nx + 2,
		// e: planes z0-2 .. z1+1, rows and columns with a 2-voxel border, channels last.
		ez0: z0 - 2, ePlanes: slices + 4, epy: ny + 4, epx: nx + 4,
	}
	e.xbuf = e.slabBuf(&e.xmap, e.xbuf, l.xPlanes*l.xpy*l.xpx)
	e.ebuf = e.slabBuf(&e.emap, e.ebuf, l.ePlanes*l.epy*l.epx*e.cp)
	for _, ws := range e.scratch {
		ws.s = grow(ws.s, e.rowVoxels(nx)*e.cp)
		ws.g = grow(ws.g, e.rowVoxels(nx)*e.cp)
		if e.vectorHead() {
			ws.t = grow(ws.t, e.transposedLen(nx))
		}
	}
	if err := e.normPass(ctx, vol, l); err != nil {
		return err
	}
	if err := e.conv1Pass(ctx, vol, l); err != nil {
		return err
	}
	return e.headPass(ctx, vol, l, z0, slices, out)
}

// slabLayout is where a slab's planes lie in the x and e buffers: the first plane's z, the
// planes, and the padded rows and columns of each.
type slabLayout struct {
	xz0, xPlanes, xpy, xpx int
	ez0, ePlanes, epy, epx int
}

// normPass fills the x buffer: x = Norm(v), zero outside the volume.
func (e *Engine) normPass(ctx context.Context, vol *model.Volume, l slabLayout) error {
	nx, ny, nz := vol.NX, vol.NY, vol.NZ
	xbuf := e.xbuf
	return e.parallel(ctx, l.xPlanes*l.xpy, func(_ *workerScratch, item int) {
		p, yy := item/l.xpy, item%l.xpy
		row := xbuf[(p*l.xpy+yy)*l.xpx : (p*l.xpy+yy+1)*l.xpx]
		z, y := l.xz0+p, yy-1
		if z < 0 || z >= nz || y < 0 || y >= ny {
			clear(row)
			return
		}
		row[0], row[nx+1] = 0, 0
		normRow(row[1:nx+1], vol, (z*ny+y)*nx, vol.Norm)
	})
}

// conv1Pass fills the e buffer from x: the first convolution, zero outside the volume.
func (e *Engine) conv1Pass(ctx context.Context, vol *model.Volume, l slabLayout) error {
	nx, ny, nz := vol.NX, vol.NY, vol.NZ
	cp := e.cp
	xbuf, ebuf := e.xbuf, e.ebuf
	return e.parallel(ctx, l.ePlanes*l.epy, func(ws *workerScratch, item int) {
		p, yy := item/l.epy, item%l.epy
		rowLen := l.epx * cp
		row := ebuf[(p*l.epy+yy)*rowLen : (p*l.epy+yy+1)*rowLen]
		z, y := l.ez0+p, yy-2
		if z < 0 || z >= nz || y < 0 || y >= ny {
			clear(row)
			return
		}
		clear(row[:2*cp])
		clear(row[(nx+2)*cp:])
		// Taps (dz, dy) read x planes z-1+dz (index z-1+dz-xz0) and rows y-1+dy (index y+dy).
		offs := ws.offs[:9]
		for dz := range 3 {
			for dy := range 3 {
				offs[dz*3+dy] = ((z-1+dz-l.xz0)*l.xpy + y + dy) * l.xpx
			}
		}
		for b := 0; b < cp; b += block {
			if e.convWide(row[2*cp+b:], b, nx, xbuf, offs, e.w1w, 27, e.b1, 3, 1) {
				b += block // and the next block: done too
				continue
			}
			w, bias := e.w1[b/block*27:][:27], (*[block]float32)(e.b1[b:])
			x0 := 0
			if e.kern != kernelsGo {
				x0 = convVector(e.kern, 3, row[2*cp+b:], nx, xbuf, offs, w, bias, 1, cp)
			}
			for x := x0; x < nx; x++ {
				voxelConv1((*[block]float32)(row[(2+x)*cp+b:]), xbuf[x:], offs, w, bias)
			}
		}
	})
}

// headPass computes s, g and the gate, head and argmax of the slab's slices (from z0) row by
// row into out.
func (e *Engine) headPass(ctx context.Context, vol *model.Volume, l slabLayout, z0, slices int, out []uint8) error {
	nx, ny := vol.NX, vol.NY
	cp := e.cp
	ebuf := e.ebuf
	return e.parallel(ctx, slices*ny, func(ws *workerScratch, item int) {
		zi, y := item/ny, item%ny
		z := z0 + zi
		rowLen := l.epx * cp
		chunk := e.chunk
		chunks := cp / chunk // per voxel
		nw := 27 * cp        // weight rows per output block
		// s: taps (dz, dy) read e planes z-1+dz, padded rows y+1+dy, 3 voxels from padded x+1.
		offs := ws.offs[:27*chunks]
		for dz := range 3 {
			for dy := range 3 {
				row := (z-1+dz-l.ez0)*l.epy*rowLen + (y+1+dy)*rowLen + cp
				for j := range 3 * chunks {
					offs[(dz*3+dy)*3*chunks+j] = row + j*chunk
				}
			}
		}
		for b := 0; b < cp; b += block {
			if e.convWide(ws.s[b:], b, nx, ebuf, offs, e.w2w, nw, e.b2, chunk, cp) {
				b += block // and the next block: done too
				continue
			}
			nb := b / block
			e.convChunks(ws.s[b:], nx, ebuf, offs, e.w2[nb*nw:(nb+1)*nw], (*[block]float32)(e.b2[b:]))
		}
		// g: taps (dz, dy, dx) read e planes z-2+2dz, padded rows y+2dy, padded column x+2dx.
		for dz := range 3 {
			for dy := range 3 {
				for dx := range 3 {
					voxel := (z-2+2*dz-l.ez0)*l.epy*rowLen + (y+2*dy)*rowLen + 2*dx*cp
					for j := range chunks {
						offs[((dz*3+dy)*3+dx)*chunks+j] = voxel + j*chunk
					}
				}
			}
		}
		for b := 0; b < cp; b += block {
			if e.convWide(ws.g[b:], b, nx, ebuf, offs, e.wg3w, nw, e.bg3, chunk, cp) {
				b += block // and the next block: done too
				continue
			}
			nb := b / block
			e.convChunks(ws.g[b:], nx, ebuf, offs, e.wg3[nb*nw:(nb+1)*nw], (*[block]float32)(e.bg3[b:]))
		}
		row := out[(zi*ny+y)*nx : (zi*ny+y+1)*nx]
		if e.vectorHead() {
			e.gateHeadRowVector(row, ws, model.MarginPlane(z))
		} else {
			e.gateHeadRow(row, ws, model.MarginPlane(z))
		}
	})
}

// parallel runs fn for items 0..n-1 on the engine's workers, each with its own scratch, items
// handed out one at a time. It stops early, with ctx's error, once ctx is done.
func (e *Engine) parallel(ctx context.Context, n int, fn func(ws *workerScratch, item int)) error {
	var next atomic.Int64
	done := ctx.Done()
	var g errgroup.Group
	for w := range min(e.workers, n) {
		ws := e.scratch[w]
		g.Go(func() error {
			for {
				select {
				case <-done:
					return ctx.Err()
				default:
				}
				item := int(next.Add(1) - 1)
				if item >= n {
					return nil
				}
				fn(ws, item)
			}
		})
	}
	return g.Wait()
}

// normRow writes Norm(v) for the n stored values of vol starting at index from.
func normRow(dst []float32, vol *model.Volume, from int, norm model.Norm) {
	if vol.I16 != nil {
		src := vol.I16[from : from+len(dst)]
		for i, v := range src {
			dst[i] = norm.Apply(float32(v))
		}
		return
	}
	src := vol.F32[from : from+len(dst)]
	for i, v := range src {
		dst[i] = norm.Apply(v)
	}
}

// convWide computes output channels b..b+15 of a convolution at nx consecutive voxels (outputs
// cp float32s apart, inputs inStride apart, chunks of chunk values) with the AVX-512 kernels
// when the engine runs them and b starts a pair of blocks, and reports whether it did. ww holds
// rows packed weight rows per pair of blocks, bias every channel's bias.
func (e *Engine) convWide(dst []float32, b, nx int, in []float32, offs []int, ww [][wide]float32, rows int, bias []float32, chunk, inStride int) bool {
	cp := e.cp
	if e.kern != kernelsAVX512 || b%wide != 0 || b+wide > cp || nx <= 0 {
		return false
	}
	p := b / wide
	convWide(chunk, dst, nx, in, offs, ww[p*rows:(p+1)*rows], (*[wide]float32)(bias[b:]), inStride, cp)
	return true
}

// convChunks computes one block of 8 output channels of a C -> C convolution at nx
// consecutive voxels: dst[x*cp+k] from in at offsets offs shifted by x*cp (see voxelChunks16),
// with the engine's vector kernels where it has them, else (or for what they leave) in Go.
func (e *Engine) convChunks(dst []float32, nx int, in []float32, offs []int, w [][block]float32, bias *[block]float32) {
	cp := e.cp
	x0 := 0
	if e.kern != kernelsGo {
		x0 = convVector(e.kern, e.chunk, dst, nx, in, offs, w, bias, cp, cp)
	}
	kernel := voxelChunks8
	if e.chunk == 16 {
		kernel = voxelChunks16
	}
	for x := x0; x < nx; x++ {
		kernel((*[block]float32)(dst[x*cp:]), in[x*cp:], offs, w, bias)
	}
}
