package nifti

import (
	"errors"
	"fmt"
	"io"

	"github.com/klauspost/compress/gzip"
)

// Read-ahead for compressed data: a goroutine decompresses into a few blocks ahead of the
// consumer, so the decoding into the caller's buffers (and whatever the caller does between
// reads) overlaps with inflate, which is the bottleneck of .nii.gz reading.
const (
	aheadBlockSize = 1 << 20
	aheadBlocks    = 4
	// gzipSlack is how far a gzip stream may run past the end of the data its header implies
	// (vox_offset + volumes x bytes per volume), for the padding some writers add. A stream
	// holding more is refused as corrupt once that much more has been inflated: reading on to
	// its trailer could take without bound (a 4 MB file can inflate to 4 GiB).
	gzipSlack = 64 << 10
)

type aheadChunk struct {
	b   []byte
	err error // after b; io.EOF once all wanted bytes were delivered (and the tail verified)
}

type prefetcher struct {
	full     chan aheadChunk
	free     chan []byte
	stopping chan struct{}
	done     chan struct{}

	cur, curBuf []byte
	err         error
}

// startPrefetch delivers exactly want bytes of src, then io.EOF; with verifyTail (want ends
// the data the header implies) it first reads on to the end of src, at most gzipSlack bytes,
// so that a gzip checksum error or a stream longer than the header implies surfaces as the
// final error instead of passing unnoticed.
func startPrefetch(src *source, want int64, verifyTail bool) *prefetcher {
	p := &prefetcher{
		full:     make(chan aheadChunk, aheadBlocks),
		free:     make(chan []byte, aheadBlocks+1),
		stopping: make(chan struct{}),
		done:     make(chan struct{}),
	}
	for range aheadBlocks + 1 {
		p.free <- nil // allocated on first use: small volumes never need all of them
	}
	go p.run(src, want, verifyTail)
	return p
}

func (p *prefetcher) run(src *source, want int64, verifyTail bool) {
	defer close(p.done)
	for want > 0 {
		var buf []byte
		select {
		case buf = <-p.free:
		case <-p.stopping:
			return
		}
		if buf == nil {
			buf = getChunk()
		}
		buf = buf[:min(int64(len(buf)), want)]
		n, err := readFullRaw(src, buf)
		want -= int64(n)
		if want == 0 {
			if err == nil && verifyTail {
				err = drainToEOF(src)
			}
			if err == nil || endOfMembers(err) {
				err = io.EOF
			}
		}
		select {
		case p.full <- aheadChunk{buf[:n], err}:
		case <-p.stopping:
			return
		}
		if err != nil {
			return
		}
	}
	select { // want was 0 from the start
	case p.full <- aheadChunk{nil, io.EOF}:
	case <-p.stopping:
	}
}

// readFullRaw is io.ReadFull without turning a short read's io.EOF into io.ErrUnexpectedEOF,
// so the consumer sees the source's own error.
func readFullRaw(r io.Reader, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		m, err := r.Read(b[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// drainToEOF reads s to its end, which must come within gzipSlack bytes.
func drainToEOF(s *source) error {
	implied := s.consumed
	var scratch [32 << 10]byte
	for read := 0; ; {
		n, err := s.Read(scratch[:min(len(scratch), gzipSlack+1-read)])
		if read += n; read > gzipSlack {
			return overlongError{implied}
		}
		if endOfMembers(err) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// overlongError: a gzip stream runs more than gzipSlack bytes past the implied bytes that its
// header declares. It wraps ErrCorrupt.
type overlongError struct{ implied int64 }

func (e overlongError) Error() string {
	return fmt.Sprintf("%v: the gzip stream holds more than the %d bytes its header implies", ErrCorrupt, e.implied)
}

func (e overlongError) Unwrap() error { return ErrCorrupt }

// endOfMembers: the gzip stream ended cleanly after the last member, or what follows it is not
// another member (zero padding, which Python's gzip skips too). Either way the members' checksums
// passed: the gzip reader checks them before looking for another member.
func endOfMembers(err error) bool {
	return err == io.EOF || errors.Is(err, gzip.ErrHeader)
}

// Read implements io.Reader. A zero-length read still waits for the terminal error once the
// data is used up, which is how the Reader collects the tail verification.
func (p *prefetcher) Read(b []byte) (int, error) {
	for len(p.cur) == 0 {
		if p.err != nil {
			return 0, p.err
		}
		if p.curBuf != nil {
			p.free <- p.curBuf[:cap(p.curBuf)] // never blocks: free holds every buffer
			p.curBuf = nil
		}
		c := <-p.full
		p.cur, p.curBuf, p.err = c.b, c.b, c.err
	}
	n := copy(b, p.cur)
	p.cur = p.cur[n:]
	return n, nil
}

// stop tells the goroutine to end, without waiting for it. Safe to call more than once, but
// not concurrently.
func (p *prefetcher) stop() {
	select {
	case <-p.stopping:
	default:
		close(p.stopping)
	}
}

// close stops the goroutine and waits for it, so the caller may close the files it reads.
func (p *prefetcher) close() {
	p.stop()
	<-p.done
	// The goroutine is gone: every chunk it did not drop is in free, full or curBuf.
	putChunk(p.curBuf)
	p.curBuf, p.cur = nil, nil
	for {
		select {
		case c := <-p.free:
			putChunk(c)
		case c := <-p.full:
			putChunk(c.b)
		default:
			return
		}
	}
}
