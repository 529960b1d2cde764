package nifti

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"sync"
	"sync/atomic"

	"github.com/klauspost/compress/flate"

	"voxpipe/internal/crc32x"
)

// gzipBlockSize is the input of one deflate block of blockGzip.
const gzipBlockSize = 1 << 20

// gatherSmall: gathered input up to this size grows a buffer of its own; more takes a pooled
// block-sized buffer (small files, and the header before the first big write, stay small).
const gatherSmall = 64 << 10

var errGzipClosed = errors.New("gzip writer closed")

// blockGzip writes one standard gzip member (RFC 1952) whose deflate stream is compressed in
// parallel: the input is cut into blocks of blockSize bytes, each compressed on its own (no
// dictionary from the previous block) by one of `workers` goroutines with
// klauspost/compress/flate and ended byte-aligned by a sync flush (Flush), the last one by
// Close (final bit). Concatenated in order, they form one deflate stream any inflater reads.
// Each block's CRC-32 is computed by its worker; a sequencer goroutine writes the blocks in
// order and folds their CRCs together (crc32x.Combine), so for writes of at least a block no
// pass over the data runs on the caller or any other single goroutine. Independent 1 MiB
// blocks compress about as well as blocks primed with the previous one's last 16 KiB, as pgzip
// does (docs/perf.md). Blocks start
// every blockSize bytes of the input whatever the sizes of the writes, so the output bytes
// depend on the data and the level only: the same mask is the same file, however the
// pipeline's slabs happened to reach the writer.
// A file that fits in one block is compressed on the caller, without starting goroutines.
//
// Header: no name, comment or extra field, MTIME 0 ("no time stamp", RFC 1952; pgzip wrote
// uint32(time.Time{}.Unix()), a 2042 date, there), XFL 4 at level 1 and 2 at level 9, OS 255,
// as pgzip and compress/gzip write them.
//
// Write's contract is io.Writer's: p is not modified, and not retained once Write returns.
// Within that contract a Write of at least blockSize bytes is not copied by the caller: its
// whole blocks are handed to the workers as they are (after the pending bytes of earlier
// writes, completed from its start into a block), the rest gathered for the next block, and
// Write returns once the workers are done reading them. The last `workers` blocks of such a
// write are copied by their worker into a pooled buffer before compressing (so Write returns
// when they are copied rather than compressed, and the next Write's blocks can fill the idle
// workers); the others are compressed straight from p. Smaller writes are gathered (copied)
// until they make a block. At most 2*workers+1 blocks are in flight, so memory stays bounded
// whatever the caller writes.
//
// Errors: the first error writing to out wins; from then on no more is written, the remaining
// blocks are dropped without being compressed, and Write and Close return it. Close and Abort
// always stop every goroutine, error or not. A blockGzip is not safe for concurrent use; after
// Close or Abort it can be reset for another file (writerpool.go keeps a few).
type blockGzip struct {
	level, workers, blockSize int

	out     io.Writer
	cur     []byte // gathered input not yet handed off: < blockSize bytes
	closed  bool
	started bool // workers and sequencer running

	jobs  chan *gzJob // to the workers, in stream order
	queue chan *gzJob // to the sequencer, in stream order; its capacity bounds the blocks in flight
	wg    sync.WaitGroup
	call  sync.WaitGroup // blocks of the running Write the workers still read
	stop  atomic.Bool    // failed or aborted: drop what is left

	mu  sync.Mutex
	err error // first error

	// Written by the sequencer (or Close inline), read by Close after the goroutines stopped.
	crc  uint32
	size uint32 // ISIZE: the input's length mod 2^32

	flates  []*flate.Writer // one per worker, reused across blocks and files
	freeIn  chan []byte     // block-sized input buffers
	freeJob chan *gzJob     // jobs, with their output buffers
}

type gzJob struct {
	in     []byte          // the block's input
	own    []byte          // pooled buffer holding in, if any; back to freeIn after compression
	n      int             // len(in)
	borrow *sync.WaitGroup // in is the caller's: Done once no longer read
	copyIn bool            // borrowed, and copied by the worker before it compresses
	final  bool            // last block: Close instead of Flush
	crc    uint32
	out    appendWriter  // the compressed block
	done   chan struct{} // cap 1: the worker's signal to the sequencer
}

type appendWriter struct{ b []byte }

func (a *appendWriter) Write(p []byte) (int, error) {
	a.b = append(a.b, p...)
	return len(p), nil
}

func newBlockGzip(level, workers, blockSize int) (*blockGzip, error) {
	if level < flate.NoCompression || level > flate.BestCompression {
		return nil, errors.New("gzip: invalid compression level")
	}
	if workers < 1 || blockSize < 1 {
		return nil, errors.New("gzip: workers and block size must be >= 1")
	}
	return &blockGzip{
		level: level, workers: workers, blockSize: blockSize,
		flates:  make([]*flate.Writer, workers),
		freeIn:  make(chan []byte, workers+2),
		freeJob: make(chan *gzJob, 2*workers+3),
		closed:  true,
	}, nil
}

// reset starts a new gzip member on out: it writes the header. z must be closed or aborted
// (new ones are).
func (z *blockGzip) reset(out io.Writer) {
	z.out, z.cur, z.closed = out, nil, false
	z.stop.Store(false)
	z.err, z.crc, z.size = nil, 0, 0
	hdr := [10]byte{0x1f, 0x8b, 8} // ID1 ID2 CM=deflate; FLG 0, MTIME 0
	switch z.level {
	case flate.BestSpeed:
		hdr[8] = 4
	case flate.BestCompression:
		hdr[8] = 2
	}
	hdr[9] = 255 // OS unknown
	if _, err := out.Write(hdr[:]); err != nil {
		z.fail(err)
	}
}

func (z *blockGzip) fail(err error) {
	z.mu.Lock()
	if z.err == nil {
		z.err = err
	}
	z.mu.Unlock()
	z.stop.Store(true)
}

func (z *blockGzip) error() error {
	z.mu.Lock()
	defer z.mu.Unlock()
	return z.err
}

// Write compresses p (see the type's comment for what it does with p).
func (z *blockGzip) Write(p []byte) (int, error) {
	if z.closed {
		return 0, errGzipClosed
	}
	if err := z.error(); err != nil {
		return 0, err
	}
	n := len(p)
	switch {
	case len(z.cur)+len(p) < z.blockSize:
		z.gather(p)
		return n, nil
	case len(p) < z.blockSize: // completes the pending block; the rest is gathered
		k := z.blockSize - len(z.cur)
		z.gather(p[:k])
		z.handOff(false)
		z.gather(p[k:])
		return n, z.error()
	}
	if len(z.cur) > 0 { // the pending block first, completed from p
		k := z.blockSize - len(z.cur)
		z.gather(p[:k])
		z.handOff(false)
		p = p[k:]
	}
	blocks := len(p) / z.blockSize
	for i := 0; i < blocks && !z.stop.Load(); i++ {
		j := z.getJob()
		j.in = p[i*z.blockSize : (i+1)*z.blockSize]
		j.n, j.borrow, j.copyIn = len(j.in), &z.call, i >= blocks-z.workers
		z.call.Add(1)
		z.dispatch(j)
	}
	z.call.Wait() // p is not read any more
	if !z.stop.Load() {
		z.gather(p[blocks*z.blockSize:]) // less than a block: it starts the next one
	}
	return n, z.error()
}

func (z *blockGzip) gather(p []byte) {
	if need := len(z.cur) + len(p); need > cap(z.cur) && need > gatherSmall {
		z.cur = append(z.getIn(), z.cur...)
	}
	z.cur = append(z.cur, p...)
}

// handOff sends the gathered bytes as a block.
func (z *blockGzip) handOff(final bool) {
	j := z.getJob()
	j.in, j.n, j.final = z.cur, len(z.cur), final
	if cap(z.cur) == z.blockSize {
		j.own = z.cur
	}
	z.cur = nil
	if !final || z.started {
		z.dispatch(j)
		return
	}
	// A file that fits in one block is compressed right here: no goroutines for small files.
	z.compress(j, z.flate(0))
	z.emit(j)
}

func (z *blockGzip) dispatch(j *gzJob) {
	if !z.started {
		z.start()
	}
	z.queue <- j // blocks while 2*workers jobs wait for the sequencer
	z.jobs <- j  // never blocks: at most len(queue)+1 jobs are not yet taken by a worker
}

func (z *blockGzip) start() {
	z.started = true
	z.jobs = make(chan *gzJob, 2*z.workers+1)
	z.queue = make(chan *gzJob, 2*z.workers)
	z.wg.Add(z.workers + 1)
	for i := range z.workers {
		go func() {
			defer z.wg.Done()
			fw := z.flate(i)
			for j := range z.jobs {
				z.compress(j, fw)
				j.done <- struct{}{}
			}
		}()
	}
	go func() {
		defer z.wg.Done()
		for j := range z.queue {
			<-j.done
			z.emit(j)
		}
	}()
}

func (z *blockGzip) flate(i int) *flate.Writer {
	if z.flates[i] == nil {
		z.flates[i], _ = flate.NewWriter(nil, z.level) // level checked by newBlockGzip
	}
	return z.flates[i]
}

// compress runs on a worker (or inline in Close): CRC and deflate of one block.
func (z *blockGzip) compress(j *gzJob, fw *flate.Writer) {
	if j.copyIn {
		if !z.stop.Load() {
			j.own = append(z.getIn(), j.in...)
			j.in = j.own
		}
		j.borrow.Done()
		j.borrow = nil
	}
	if !z.stop.Load() {
		j.crc = crc32.ChecksumIEEE(j.in)
		fw.Reset(&j.out)
		fw.Write(j.in) // appendWriter never fails, so neither does flate
		if j.final {
			fw.Close()
		} else {
			fw.Flush()
		}
	}
	if j.borrow != nil {
		j.borrow.Done()
		j.borrow = nil
	}
	j.in = nil
	if j.own != nil {
		z.putIn(j.own)
		j.own = nil
	}
}

// emit runs on the sequencer (or inline in Close): writes a compressed block, in order.
func (z *blockGzip) emit(j *gzJob) {
	if !z.stop.Load() {
		if _, err := z.out.Write(j.out.b); err != nil {
			z.fail(err)
		} else {
			z.crc = crc32x.Combine(z.crc, j.crc, int64(j.n))
			z.size += uint32(j.n)
		}
	}
	z.putJob(j)
}

// Close compresses what is left as the final block, waits for every block to be written, stops
// the goroutines and writes the trailer (CRC-32, ISIZE). It returns the first error; Close
// after Close returns it again.
func (z *blockGzip) Close() error {
	if z.closed {
		return z.error()
	}
	if z.error() == nil {
		z.handOff(true)
	}
	z.closed = true
	z.shutdown()
	if err := z.error(); err != nil {
		return err
	}
	var tr [8]byte
	binary.LittleEndian.PutUint32(tr[:4], z.crc)
	binary.LittleEndian.PutUint32(tr[4:], z.size)
	if _, err := z.out.Write(tr[:]); err != nil {
		z.fail(err)
	}
	return z.error()
}

// Abort drops everything not yet written and stops the goroutines; nothing more is written to
// out. Write and Close then fail.
func (z *blockGzip) Abort() {
	if !z.closed {
		z.fail(errors.New("gzip: aborted"))
		z.closed = true
	}
	z.shutdown()
}

func (z *blockGzip) shutdown() {
	if z.cur != nil {
		z.putIn(z.cur)
		z.cur = nil
	}
	if !z.started {
		return
	}
	close(z.jobs)
	close(z.queue)
	z.wg.Wait()
	z.started = false
}

func (z *blockGzip) getIn() []byte {
	select {
	case b := <-z.freeIn:
		return b[:0]
	default:
		return make([]byte, 0, z.blockSize)
	}
}

func (z *blockGzip) putIn(b []byte) {
	if cap(b) != z.blockSize {
		return
	}
	select {
	case z.freeIn <- b:
	default:
	}
}

func (z *blockGzip) getJob() *gzJob {
	select {
	case j := <-z.freeJob:
		return j
	default:
		return &gzJob{done: make(chan struct{}, 1)}
	}
}

func (z *blockGzip) putJob(j *gzJob) {
	j.out.b = j.out.b[:0]
	j.final, j.copyIn, j.crc, j.n = false, false, 0, 0
	select {
	case z.freeJob <- j:
	default:
	}
}
