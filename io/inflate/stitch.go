package inflate

import (
	"context"
	"fmt"
	"hash/crc32"
	"runtime/debug"
	"sync"

	"voxpipe/internal/crc32x"
)

// The parallel scheduler: newStitcher hands the chunks of the compressed body, in order and
// bounded by slots, to worker goroutines that find a block start in each and decode it
// speculatively (decodeChunk); run then stitches them in order into dst, adopting a chunk
// whose decoding starts where the previous one ended and decoding in order (sequential) where
// none does, while the markers of adopted chunks are resolved in the background (adopt).

// chunk is one worker's speculative decoding.
type chunk struct {
	start, end int64 // bit positions in the body; start -1: no block found
	final      bool  // its last block is the stream's last
	switched   bool  // its decoding went over from symbols to bytes
	buf        outBuf
	syms       []uint16 // its output (in buf): symbols, then bytes
	bytes      []byte
	err        error
	done       chan struct{}

	// produced is how many values it output (all of them, also where it stopped with
	// errOutputLimit); held how many it drew from the stitcher's budget, given back on release.
	produced, held int
}

// piece is a run of dst whose CRC is known once done.
type piece struct {
	crc uint32
	n   int64 // its length
}

// newPiece is the piece of data b.
func newPiece(b []byte) *piece {
	return &piece{crc: crc32.ChecksumIEEE(b), n: int64(len(b))}
}

type stitcher struct {
	ctx    context.Context
	body   []byte
	dst    []byte
	chunks []chunk
	bounds []int64 // chunk j covers bits bounds[j] .. bounds[j+1] of the body
	bits   int64   // the usual chunk size in bits (the in-order path decodes as much at a time)
	// slots bounds the chunks decoded ahead of the stitching by their compressed size: chunk j
	// holds weight(j) of them, a full-size chunk slotsPerChunk.
	slots chan struct{}
	free  chan outBuf // chunk buffers to reuse
	quit  chan struct{}
	wg    sync.WaitGroup

	// budget bounds the output the chunks hold between them (values, two bytes each while
	// symbols). The chunks in flight of a valid stream hold disjoint parts of the rest of dst,
	// plus what each drew ahead of its output, which the budget's slack covers. A stream that
	// inflates to far more than dst (a gzip bomb whose trailer agrees with dst's size modulo
	// 2^32) exhausts it instead: the chunks stop, and the stitching, decoding in order where a
	// chunk stopped, stops at dst's end.
	budget budget

	seq    decoder // the stitching's own decoder (sequential)
	pieces []*piece
	// adopted, sequentialRuns and switched count the chunks used as decoded in parallel, the
	// runs decoded in order and the adopted chunks that went over to bytes (tests check that
	// these paths are taken).
	adopted, sequentialRuns, switched int

	mu  sync.Mutex
	err error // a resolution's failure
}

// testHook, when set, sees every finished stitcher (tests).
var testHook func(*stitcher)

// chunkBounds cuts a body of n bytes into chunks of size bytes, but for its last threads*size
// bytes (when the body has three times that), cut into chunks of a quarter of that size: the
// workers then run out of chunks within a short chunk's time of each other, where with equal
// chunks most of them idled for up to a chunk's decoding at the end (~15 ms of a 524 MB
// volume's inflate on 16 cores; ~9 ms with the taper, docs/perf.md). Bit positions, first 0,
// last 8n.
func chunkBounds(n, size, threads int) []int64 {
	bounds := []int64{0}
	tail, small := n, size
	if n >= 3*threads*size {
		tail, small = n-threads*size, max(size/4, 1)
	}
	for off := size; off < tail; off += size {
		bounds = append(bounds, int64(off)*8)
	}
	for off := int(bounds[len(bounds)-1]/8) + small; off < n; off += small {
		bounds = append(bounds, int64(off)*8)
	}
	return append(bounds, int64(n)*8)
}

// slotsPerChunk is how many slots a full-size chunk holds; the quarter-size ones at the end
// hold one each. Counted by chunks, the slots all went to the small chunks while the last
// large ones were still being decoded, and the workers idled (14 ms of a 524 MB volume's
// inflate on 16 cores).
const slotsPerChunk = 4

// chunksInFlight is how many full-size chunks are decoded ahead of the stitching: enough that no
// worker waits for it (stitching is quick), few enough to bound the memory (each holds its
// output).
func chunksInFlight(threads int) int { return threads + max(2, threads/2) }

func newStitcher(ctx context.Context, body, dst []byte, threads int) *stitcher {
	size := min(max(len(body)/(4*threads), minChunk), maxChunk)
	bounds := chunkBounds(max(len(body), 1), size, threads)
	inFlight := chunksInFlight(threads)
	s := &stitcher{ctx: ctx, body: body, dst: dst, chunks: make([]chunk, len(bounds)-1), bounds: bounds,
		bits: int64(size) * 8, slots: make(chan struct{}, inFlight*slotsPerChunk), free: make(chan outBuf, inFlight+2),
		quit: make(chan struct{})}
	// Beyond dst's size: what the chunks draw ahead of their output (a grantStep at most each;
	// at most one chunk per slot), and as much again per full chunk in flight for the output
	// of false block starts, which is thrown away.
	s.budget.left = len(dst) + (cap(s.slots)+inFlight)*grantStep
	for i := range s.chunks {
		s.chunks[i].done = make(chan struct{})
	}
	// Chunks get their slots in order, so the chunk the stitching waits for always has them.
	todo := make(chan int)
	s.wg.Go(func() {
		defer close(todo)
		for j := range s.chunks {
			for range s.weight(j) {
				select {
				case s.slots <- struct{}{}:
				case <-s.quit:
					return
				}
			}
			select {
			case todo <- j:
			case <-s.quit:
				return
			}
		}
	})
	for range threads {
		s.wg.Go(func() {
			debug.SetPanicOnFault(true) // src may fault (GunzipContext); decodeChunk recovers
			var scratch decoder
			for j := range todo {
				s.decodeChunk(j, &scratch)
			}
		})
	}
	return s
}

func (s *stitcher) wait() {
	select {
	case <-s.quit:
	default:
		close(s.quit)
	}
	s.wg.Wait()
	s.drainBufs()
}

// outBufs keeps chunk buffers (grown to a chunk's output, some MiB) from one Gunzip to the
// next; within one, the stitcher's free list keeps them (the garbage collector empties a
// sync.Pool every cycle, and the inflate allocates enough to run several).
var outBufs sync.Pool

func (s *stitcher) getBuf() outBuf {
	select {
	case b := <-s.free:
		return b
	default:
	}
	if b, ok := outBufs.Get().(*outBuf); ok {
		return *b
	}
	// The decoder allocates symbols and bytes when it needs them (a chunk whose markers last
	// to its end needs no bytes); they grow to a chunk's output on their first use only, as
	// buffers are reused from chunk to chunk.
	return outBuf{}
}

func (s *stitcher) putBuf(b outBuf) {
	if b.syms == nil && b.bytes == nil {
		return
	}
	select {
	case s.free <- b:
	default:
		outBufs.Put(&b)
	}
}

// drainBufs hands the free list to outBufs for the next Gunzip.
func (s *stitcher) drainBufs() {
	for {
		select {
		case b := <-s.free:
			outBufs.Put(&b)
		default:
			return
		}
	}
}

// release gives chunk j's buffers and slot back.
func (s *stitcher) release(j int) {
	c := &s.chunks[j]
	s.putBuf(c.buf)
	c.buf, c.syms, c.bytes = outBuf{}, nil, nil
	s.budget.give(c.held)
	c.held = 0
	for range s.weight(j) {
		<-s.slots
	}
}

// weight is how many slots chunk j holds: its share of a full-size chunk, in quarters rounded
// up (1 to slotsPerChunk).
func (s *stitcher) weight(j int) int {
	n := s.bounds[j+1] - s.bounds[j]
	return int(min(max((n*slotsPerChunk+s.bits-1)/s.bits, 1), slotsPerChunk))
}

// decodeChunk finds chunk j's first block and decodes from it past the chunk's end, with the
// worker's decoder (scratch), its output drawn from the budget: no more than dst's size, as a
// chunk's output placed anywhere in dst must fit.
func (s *stitcher) decodeChunk(j int, scratch *decoder) {
	c := &s.chunks[j]
	defer close(c.done)
	scratch.share = nil // set when the decoding starts
	defer func() {
		if scratch.share != nil {
			c.held = scratch.allow
		}
		if r := recover(); r != nil {
			err := faultErr(r)
			if err == nil {
				panic(r)
			}
			c.start, c.err = -1, err // the stitching then reads there itself, and fails
		}
	}()
	from, stop := s.bounds[j], s.bounds[j+1]
	if j == len(s.chunks)-1 {
		stop = int64(len(s.body))*8 + 1 // to the final block
	}
	c.start = 0
	if s.ctx.Err() != nil {
		c.start = -1 // the stitching has stopped: not worth decoding
		return
	}
	d := scratch // the finder is done with its tables when the decoding starts
	if j == 0 {
		d.startBytes(s.body, 0, s.getBuf(), nil) // the stream's start: no window
	} else {
		if c.start = findBlock(s.body, from, stop, scratch); c.start < 0 {
			return
		}
		d.startSymbols(s.body, c.start, s.getBuf())
		d.limit = stop + maxOvershoot*8
	}
	d.allow, d.ceiling, d.share = 0, len(s.dst), &s.budget
	c.final, c.err = d.run(stop)
	c.end, c.buf, c.switched = d.br.bitPos(), d.buf, d.switched
	c.syms, c.bytes = d.output()
	c.produced = d.produced()
}

// run stitches the chunks in order into dst.
func (s *stitcher) run() error {
	var pos int64 // bit position in body up to which dst holds the output
	o := 0        // bytes of dst filled
	final := false
	for j := range s.chunks {
		if final {
			break
		}
		if s.ctx.Err() != nil {
			return context.Cause(s.ctx)
		}
		c := &s.chunks[j]
		select {
		case <-c.done:
		case <-s.ctx.Done():
			return context.Cause(s.ctx)
		}
		if c.err == errOutputLimit && c.start == pos && o+c.produced > len(s.dst) {
			// Decoded from where the stream is (its count is exact, whatever the window): the
			// stream holds more than dst, and is refused before anything more is inflated.
			s.release(j)
			return fmt.Errorf("%w: more data than the trailer's %d bytes", ErrCorrupt, len(s.dst))
		}
		if c.start < 0 || c.err != nil || c.start < pos {
			s.release(j) // no block start found, a false one, or one the stream already passed
			continue
		}
		if pos < c.start {
			var err error
			if pos, o, final, err = s.sequential(pos, o, c.start); err != nil {
				s.release(j)
				return err
			}
			if pos != c.start {
				s.release(j)
				continue
			}
		}
		var err error
		if o, err = s.adopt(j, o); err != nil {
			return err
		}
		pos, final = c.end, c.final
	}
	if !final {
		var err error
		if pos, o, final, err = s.sequential(pos, o, int64(len(s.body))*8+1); err != nil {
			return err
		}
	}
	if !final {
		return fmt.Errorf("%w: deflate stream has no final block", ErrCorrupt)
	}
	if end := (pos + 7) / 8; end != int64(len(s.body)) {
		// Another member follows (pigz --independent, bgzip), or garbage: let a streaming reader decide.
		return fmt.Errorf("%w: the deflate stream ends %d bytes before the trailer", ErrUnsupported, int64(len(s.body))-end)
	}
	if o != len(s.dst) {
		return fmt.Errorf("%w: %d bytes inflated, the trailer says %d", ErrCorrupt, o, len(s.dst))
	}
	return nil
}

// sequential decodes from bit pos, whose preceding output is dst[:o], until a block ends at or
// after stop (or the final block), into dst. It knows the window, so it decodes bytes, into a
// buffer (the decoder writes past its output, and corrupt data past dst) that it copies; a
// chunk's worth of compressed data at a time, and no more output than dst has room for, so
// that its memory stays bounded and a cancelled context stops it.
func (s *stitcher) sequential(pos int64, o int, stop int64) (int64, int, bool, error) {
	s.sequentialRuns++
	buf := s.getBuf()
	defer func() { s.putBuf(buf) }()
	for {
		if err := s.ctx.Err(); err != nil {
			return 0, 0, false, context.Cause(s.ctx)
		}
		d := &s.seq
		d.startBytes(s.body, pos, buf, s.dst[max(0, o-windowSize):o])
		d.allow = len(s.dst) - o
		final, err := d.run(min(stop, pos+s.bits))
		buf = d.buf
		if err == errOutputLimit {
			return 0, 0, false, fmt.Errorf("%w: more data than the trailer's %d bytes", ErrCorrupt, len(s.dst))
		}
		if err != nil {
			return 0, 0, false, err
		}
		_, out := d.output()
		s.pieces = append(s.pieces, newPiece(out))
		copy(s.dst[o:], out)
		pos, o = d.br.bitPos(), o+len(out)
		if final || pos >= stop {
			return pos, o, final, nil
		}
	}
}

// adopt places chunk j's output at dst[o:]: its last 32 KiB (the next chunk's window) now, the
// rest in the background. It returns the new fill level.
func (s *stitcher) adopt(j, o int) (int, error) {
	c := &s.chunks[j]
	s.adopted++
	if c.switched {
		s.switched++
	}
	syms, bytes := c.syms, c.bytes
	n := len(syms) + len(bytes)
	if o+n > len(s.dst) {
		s.release(j)
		return 0, fmt.Errorf("%w: more data than the trailer's %d bytes", ErrCorrupt, len(s.dst))
	}
	split := max(0, n-windowSize)
	if err := place(s.dst, o, syms, bytes, split, n); err != nil {
		s.release(j)
		return 0, err
	}
	body := new(piece) // filled in the background
	s.pieces = append(s.pieces, body, newPiece(s.dst[o+split:o+n]))
	s.wg.Go(func() {
		defer s.release(j)
		if err := place(s.dst, o, syms, bytes, 0, split); err != nil {
			s.mu.Lock()
			s.err = cmpErr(s.err, err)
			s.mu.Unlock()
			return
		}
		*body = *newPiece(s.dst[o : o+split])
	})
	return o + n, nil
}

func cmpErr(old, err error) error {
	if old != nil {
		return old
	}
	return err
}

// crc combines the pieces' CRCs in order.
func (s *stitcher) crc() uint32 {
	var crc uint32
	for _, p := range s.pieces {
		crc = crc32x.Combine(crc, p.crc, p.n)
	}
	return crc
}
