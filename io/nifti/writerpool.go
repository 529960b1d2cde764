package nifti

import (
	"bufio"
	"io"

	"github.com/klauspost/pgzip"
)

// Compressors and write buffers are reused across files: a pgzip writer holds a few MiB of
// blocks and flate state, and a batch writing thousands of masks would otherwise churn that
// much garbage per file, which is what drives a Go process's peak memory. The free lists are
// bounded channels, so they never hold more than a handful of idle writers.
const idleWriters = 4

type gzipKey struct{ level, workers int }

var (
	idleGzip = map[gzipKey]chan *pgzip.Writer{}
	idleBufs = make(chan *bufio.Writer, idleWriters)
	poolMu   = make(chan struct{}, 1) // guards idleGzip's map itself
)

func gzipList(k gzipKey) chan *pgzip.Writer {
	poolMu <- struct{}{}
	defer func() { <-poolMu }()
	ch := idleGzip[k]
	if ch == nil {
		ch = make(chan *pgzip.Writer, idleWriters)
		idleGzip[k] = ch
	}
	return ch
}

// getGzip returns a parallel gzip writer of that level and concurrency writing to w.
func getGzip(w io.Writer, level, workers int) (*pgzip.Writer, error) {
	select {
	case z := <-gzipList(gzipKey{level, workers}):
		z.Reset(w)
		if err := z.SetConcurrency(1<<20, workers); err != nil {
			return nil, err
		}
		return z, nil
	default:
	}
	z, err := pgzip.NewWriterLevel(w, level)
	if err != nil {
		return nil, err
	}
	if err := z.SetConcurrency(1<<20, workers); err != nil {
		return nil, err
	}
	return z, nil
}

// putGzip keeps a writer that was closed without error for the next file.
func putGzip(z *pgzip.Writer, level, workers int) {
	select {
	case gzipList(gzipKey{level, workers}) <- z:
	default:
	}
}

// getBuffered returns a 1 MiB buffered writer on w.
func getBuffered(w io.Writer) *bufio.Writer {
	select {
	case b := <-idleBufs:
		b.Reset(w)
		return b
	default:
		return bufio.NewWriterSize(w, 1<<20)
	}
}

func putBuffered(b *bufio.Writer) {
	b.Reset(nil)
	select {
	case idleBufs <- b:
	default:
	}
}

// Read-side buffers are reused the same way: the 1 MiB bufio readers in front of files and the
// read-ahead's 1 MiB chunks.
var (
	idleReaders = make(chan *bufio.Reader, idleWriters)
	idleChunks  = make(chan []byte, 4*(aheadBlocks+1))
)

// pooledReaderMin is the file size from which a file gets a pooled full-size reader; smaller
// files (tests, fuzzing, tiny masks) get one of their own size.
const pooledReaderMin = 64 << 10

func getReader(r io.Reader, fileSize int64) (*bufio.Reader, bool) {
	if fileSize < pooledReaderMin {
		return bufio.NewReaderSize(r, bufferSizeFor(fileSize)), false
	}
	select {
	case b := <-idleReaders:
		b.Reset(r)
		return b, true
	default:
		return bufio.NewReaderSize(r, readBufferSize), true
	}
}

func putReader(b *bufio.Reader) {
	b.Reset(nil)
	select {
	case idleReaders <- b:
	default:
	}
}

func getChunk() []byte {
	select {
	case c := <-idleChunks:
		return c
	default:
		return make([]byte, aheadBlockSize)
	}
}

func putChunk(c []byte) {
	if cap(c) != aheadBlockSize {
		return
	}
	select {
	case idleChunks <- c[:aheadBlockSize]:
	default:
	}
}
