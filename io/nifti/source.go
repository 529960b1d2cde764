package nifti

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"voxpipe/internal/regular"

	"github.com/klauspost/compress/flate"
	"github.com/klauspost/compress/gzip"
)

// readBufferSize is the bufio size in front of files: the gzip decoder and small slab reads
// then cost one syscall per MiB rather than per call.
const readBufferSize = 1 << 20

// maxDeflateRatio bounds how many bytes deflate can expand one compressed byte into (258-byte
// matches coded in about 2 bits give 1032:1). A header claiming more data than this allows for
// the file's size is rejected before anything is read or allocated.
const maxDeflateRatio = 1032

// dataFile is what Open needs of a file; *os.File in production, in-memory files in fuzz tests.
type dataFile interface {
	io.Reader
	io.ReaderAt
	io.Seeker
	io.Closer
}

type fileOpener func(name string) (dataFile, int64, error)

func osOpen(name string) (dataFile, int64, error) {
	f, st, err := regular.Open(name) // never blocks on a FIFO (a .img of a pair included)
	if err != nil {
		return nil, 0, err // an *fs.PathError naming the file
	}
	return f, st.Size(), nil
}

// source is one file of a volume (the .nii, or the .hdr or .img of a pair), read sequentially
// through bufio and, when it starts with the gzip magic, a gzip decoder. Compression is sniffed
// from the content rather than the name: mislabelled .nii.gz files are common.
type source struct {
	name     string
	f        dataFile
	size     int64 // bytes on disk
	br       *bufio.Reader
	pooled   bool         // br goes back to the free list on Close
	gz       *gzip.Reader // nil when uncompressed
	isize    uint32       // gzip trailer: uncompressed size mod 2^32 of the last member
	consumed int64        // uncompressed bytes read so far
}

func openSource(name string, open fileOpener) (*source, error) {
	f, size, err := open(name)
	if err != nil {
		return nil, err
	}
	s := &source{name: name, f: f, size: size}
	var magic [2]byte
	if n, _ := f.ReadAt(magic[:], 0); n == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		var trailer [4]byte
		if size >= 18 {
			if _, err := f.ReadAt(trailer[:], size-4); err == nil {
				s.isize = binary.LittleEndian.Uint32(trailer[:])
			}
		}
		s.br, s.pooled = getReader(f, size)
		if s.gz, err = gzip.NewReader(s.br); err != nil {
			s.Close()
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return nil, openError(name, fmt.Errorf("%w: the %d-byte file ends inside its gzip header", ErrTruncated, size))
			}
			return nil, openError(name, classifyStreamErr(err, "gzip header"))
		}
		return s, nil
	}
	s.br, s.pooled = getReader(f, size)
	return s, nil
}

// bufferSizeFor keeps small files (tests, fuzzing, masks of tiny volumes) from paying for a
// 1 MiB buffer each.
func bufferSizeFor(fileSize int64) int {
	return int(max(4096, min(fileSize, readBufferSize)))
}

func (s *source) compressed() bool { return s.gz != nil }

func (s *source) Read(p []byte) (int, error) {
	var n int
	var err error
	if s.gz != nil {
		n, err = s.gz.Read(p)
	} else {
		n, err = s.br.Read(p)
	}
	s.consumed += int64(n)
	return n, err
}

// skipTo moves the stream to uncompressed offset off (>= consumed for gzip): a seek for plain
// files, decompress-and-discard for gzip.
func (s *source) skipTo(off int64) error {
	if s.gz == nil {
		if _, err := s.f.Seek(off, io.SeekStart); err != nil {
			return err
		}
		s.br.Reset(s.f)
		s.consumed = off
		return nil
	}
	if off < s.consumed {
		return fmt.Errorf("nifti: internal error: cannot seek back in gzip stream to %d from %d", off, s.consumed)
	}
	_, err := io.CopyN(io.Discard, s, off-s.consumed)
	return err
}

// maxUncompressed is the most uncompressed bytes this file can hold.
func (s *source) maxUncompressed() int64 {
	if s.gz == nil {
		return s.size
	}
	if s.size > (1<<62)/maxDeflateRatio {
		return 1 << 62
	}
	return s.size*maxDeflateRatio + 1<<16
}

func (s *source) Close() error {
	if s.gz != nil {
		s.gz.Close()
	}
	if s.pooled {
		putReader(s.br)
		s.pooled = false
	}
	return s.f.Close()
}

// classifyStreamErr maps decoder errors onto the package sentinels, keeping the original. The
// inflater reports some damaged streams as flate.InternalError (a code-length symbol out of
// range: "unexpected length code"); when decoding, that comes from the input, so it is corruption.
// A stream longer than its header implies (overlongError) is reported as it is.
func classifyStreamErr(err error, what string) error {
	var corrupt flate.CorruptInputError
	var internal flate.InternalError
	var overlong overlongError
	switch {
	case errors.As(err, &overlong):
		return err
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return fmt.Errorf("%w: the file ends inside the %s", ErrTruncated, what)
	case errors.Is(err, gzip.ErrChecksum), errors.Is(err, gzip.ErrHeader), errors.As(err, &corrupt), errors.As(err, &internal):
		return fmt.Errorf("%w: damaged gzip stream in the %s: %w", ErrCorrupt, what, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// pathNames says which files a path names: a single file (.nii, .nii.gz or anything else), or
// one half of a .hdr/.img pair with the candidate names of its partner, same compression first.
type pathNames struct {
	pair    bool
	headers []string // candidates, the first existing one is used
	images  []string
}

func namesOf(path string) pathNames {
	stem, gzSuffix := path, ""
	if len(path) > 3 && strings.EqualFold(path[len(path)-3:], ".gz") {
		stem, gzSuffix = path[:len(path)-3], path[len(path)-3:]
	}
	ext := filepath.Ext(stem)
	base := stem[:len(stem)-len(ext)]
	partners := func(want string) []string {
		if ext == strings.ToUpper(ext) {
			want = strings.ToUpper(want)
		}
		other := ".gz"
		if gzSuffix != "" {
			other = ""
		}
		return []string{base + want + gzSuffix, base + want + other}
	}
	switch strings.ToLower(ext) {
	case ".hdr":
		return pathNames{pair: true, headers: []string{path}, images: partners(".img")}
	case ".img":
		return pathNames{pair: true, headers: partners(".hdr"), images: []string{path}}
	}
	return pathNames{headers: []string{path}}
}

// openFirst opens the first candidate that exists.
func openFirst(candidates []string, open fileOpener) (*source, error) {
	var firstErr error
	for _, name := range candidates {
		s, err := openSource(name, open)
		if err == nil {
			return s, nil
		}
		if !errors.Is(err, os.ErrNotExist) {
			return nil, err
		}
		if firstErr == nil {
			firstErr = err
		}
	}
	if len(candidates) > 1 {
		return nil, openError(candidates[0], fmt.Errorf("no such file, nor %s: %w", strings.Join(candidates[1:], ", "), os.ErrNotExist))
	}
	return nil, firstErr
}
