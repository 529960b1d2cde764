package nifti

import (
	"bufio"
	"io"
)

// Compressors and write buffers are reused across files: a blockGzip holds a flate compressor
// per worker (a few hundred KiB each) and its pooled blocks, and a batch writing thousands of
// masks would otherwise churn that much garbage per file, which is what drives a Go process's
// peak memory. The free lists are bounded channels, so they never hold more than a handful of
// idle writers. Idle writers run no goroutines: blockGzip starts them per file and stops them
// in Close and Abort.
const idleWriters = 4

type gzipKey struct{ level, workers int }

var (
	idleGzip = map[gzipKey]chan *blockGzip{}
	idleBufs = make(chan *bufio.Writer, idleWriters)
	poolMu   = make(chan struct{}, 1) // guards idleGzip's map itself
)

func gzipList(k gzipKey) chan *blockGzip {
	poolMu <- struct{}{}
	defer func() { <-poolMu }()
	ch := idleGzip[k]
	if ch == nil {
		ch = make(chan *blockGzip, idleWriters)
		idleGzip[k] = ch
	}
	return ch
}

// getGzip returns a parallel gzip writer of that level and concurrency that has written its
// header to w.
func getGzip(w io.Writer, level, workers int) (*blockGzip, error) {
	var z *blockGzip
	select {
	case z = <-gzipList(gzipKey{level, workers}):
	default:
		var err error
		if z, err = newBlockGzip(level, workers, gzipBlockSize); err != nil {
			return nil, err
		}
	}
	z.reset(w)
	return z, nil
}

// putGzip keeps a closed or aborted writer for the next file.
func putGzip(z *blockGzip, level, workers int) {
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
