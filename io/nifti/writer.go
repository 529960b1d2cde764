package nifti

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"unicode/utf8"

	"github.com/klauspost/compress/gzip"
)

// DefaultLevel in WriteOptions.Level picks defaultGzipLevel.
const DefaultLevel = -1

// defaultGzipLevel is BestSpeed: on label masks and smooth MR images, klauspost's level 1
// compresses within a few percent of level 6 at several times the speed (see
// BenchmarkWriteMask), and the writer sits on the batch's critical path.
const defaultGzipLevel = gzip.BestSpeed

// WriteOptions tunes Write and Create. The zero value stores without compression (Level 0);
// DefaultWriteOptions is what most callers want.
type WriteOptions struct {
	Level   int // gzip level for .gz paths: DefaultLevel (-1), 0 = stored blocks, 1 (fast) .. 9
	Workers int // goroutines compressing 1 MiB blocks in parallel (blockGzip); 0 = GOMAXPROCS
}

// DefaultWriteOptions returns Level DefaultLevel and as many workers as GOMAXPROCS.
func DefaultWriteOptions() WriteOptions { return WriteOptions{Level: DefaultLevel} }

// MaskHeader derives the header of a uint8 label mask from the header of the image it
// segments. Everything that places voxels in space is kept bit for bit (dims, pixdim,
// xyzt_units, qform/sform codes, quaternion, offsets, srow vectors, slice timing), as are the
// NIfTI version and byte order. The mask is a single volume: dims 4..7 are reset to 1 when the
// reference has several volumes (dim[0] becomes 3), and kept as they are otherwise. The intent
// is NIFTI_INTENT_LABEL, scaling identity, cal_min..cal_max = 0..maxLabel, and descrip
// "voxpipe <descrip>" (callers name the model there), cut to 79 bytes. The image's header
// extensions are not carried over (they describe the image); callers set Extensions to record
// the mask's own, e.g. its provenance as an ExtCodeComment.
func MaskHeader(ref *Header, maxLabel uint8, descrip string) *Header {
	h := *ref
	if h.Dim[0] > 3 {
		multi := false
		for i := int64(4); i <= min(h.Dim[0], 7); i++ {
			multi = multi || h.Dim[i] > 1
		}
		if multi {
			h.Dim[0] = 3
			for i := 4; i <= 7; i++ {
				h.Dim[i] = 1
			}
		}
	}
	h.Datatype, h.BitPix = Uint8, 8
	h.IntentCode, h.IntentName = IntentLabel, ""
	h.IntentP1, h.IntentP2, h.IntentP3 = 0, 0, 0
	h.SclSlope, h.SclInter = 1, 0
	h.CalMin, h.CalMax = 0, float64(maxLabel)
	h.Descrip = truncateUTF8(strings.TrimSpace("voxpipe "+descrip), 79)
	h.VoxOffset, h.ExtensionLen, h.Magic = 0, 0, ""
	h.Extensions = nil
	if h.ByteOrder == nil {
		h.ByteOrder = hostOrder
	}
	return &h
}

// truncateUTF8 cuts s to at most n bytes without splitting a UTF-8 sequence.
func truncateUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// TempPattern is the filepath.Glob pattern matching the temporaries a Writer creates for the
// file final: ".<name>.tmp-*" in the same folder. A .hdr/.img pair has one per file, so clean
// up both TempPattern(x.hdr) and TempPattern(x.img).
func TempPattern(final string) string {
	dir, base := filepath.Split(final)
	return filepath.Join(dir, "."+escapeGlob(base)+".tmp-*")
}

func escapeGlob(s string) string {
	if runtime.GOOS == "windows" {
		return s // '\' is the separator there; such names simply will not match
	}
	var b strings.Builder
	for _, c := range s {
		if strings.ContainsRune(`*?[]\`, c) {
			b.WriteByte('\\')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// Write writes a whole image atomically: h describes it (see Create), data holds all its
// samples of h.Datatype in host byte order.
func Write(path string, h *Header, data []byte, opt WriteOptions) error {
	w, err := Create(path, h, opt)
	if err != nil {
		return err
	}
	if int64(len(data)) != w.total {
		w.Abort()
		return fmt.Errorf("write %s: data is %d bytes, the header's dims need %d", path, len(data), w.total)
	}
	if err := w.WriteSlices(data); err != nil {
		w.Abort()
		return err
	}
	return w.Commit()
}

// Writer writes one NIfTI file (or .hdr/.img pair) atomically: the bytes go to temporaries
// named by TempPattern in the destination folder, and Commit fsyncs them, renames them over
// the final names and fsyncs the folder, so a crash never leaves a partial file under a final
// name. It is not safe for concurrent use.
type Writer struct {
	path      string
	parts     []*tempPart // [data] or [header, image]
	data      *tempPart
	bw        *bufio.Writer
	gz        *blockGzip // nil when not compressing
	level     int        // of gz, for handing it back to the free list
	workers   int
	pooledBuf bool      // bw came from the free list
	sink      io.Writer // where samples go: gz or bw
	swap      bool
	elem      int
	slice     int64
	total     int64 // bytes of samples the header declares (all volumes)
	done      int64
	buf       []byte // byte-order scratch
	err       error
	closed    bool // committed or aborted
}

type tempPart struct {
	final, temp string
	f           *os.File
}

// Create starts an atomic write of path: .nii, .nii.gz, or a .hdr/.img pair when path ends in
// .hdr or .img (each gzipped when path ends in .gz; the data in parallel, see blockGzip). h
// gives datatype, dims and every other field; version (0 means 1) and byte order (nil means
// the host's) come from h too. BitPix, VoxOffset and Magic are derived. h.Extensions, if any,
// are written after the header (in the .hdr of a pair), each padded with zeros to a multiple
// of 16 bytes, at most 16 MiB in all; vox_offset of a single file then follows them. The
// samples follow through WriteSlices, in host byte order.
func Create(path string, h *Header, opt WriteOptions) (*Writer, error) {
	lower := strings.ToLower(path)
	gzipped := strings.HasSuffix(lower, ".gz")
	stem := strings.TrimSuffix(lower, ".gz")
	pair := strings.HasSuffix(stem, ".hdr") || strings.HasSuffix(stem, ".img")
	if !pair && !strings.HasSuffix(stem, ".nii") {
		return nil, fmt.Errorf("write %s: unknown extension; want .nii, .nii.gz, .hdr(.gz) or .img(.gz)", path)
	}
	level := opt.Level
	if level == DefaultLevel {
		level = defaultGzipLevel
	}
	if level < 0 || level > 9 || opt.Workers < 0 {
		return nil, fmt.Errorf("write %s: invalid options %+v: level -1..9, workers >= 0", path, opt)
	}
	hdrBytes, lay, err := encodeHeader(h, pair)
	if err != nil {
		return nil, fmt.Errorf("write %s: %w", path, err)
	}
	order := h.ByteOrder
	if order == nil {
		order = hostOrder
	}
	w := &Writer{path: path, swap: order != hostOrder, elem: h.Datatype.Size(), slice: lay.SliceBytes, total: lay.DataBytes()}

	finals := []string{path}
	if pair {
		l := namesOf(path)
		finals = []string{l.headers[0], l.images[0]}
	}
	for _, final := range finals {
		f, err := os.CreateTemp(filepath.Dir(final), "."+filepath.Base(final)+".tmp-*")
		if err != nil {
			w.Abort()
			return nil, fmt.Errorf("write %s: %w", path, err)
		}
		w.parts = append(w.parts, &tempPart{final: final, temp: f.Name(), f: f})
	}
	w.data = w.parts[len(w.parts)-1]
	if pair {
		if err := writeSmallFile(w.parts[0].f, hdrBytes, gzipped, level); err != nil {
			w.Abort()
			return nil, fmt.Errorf("write %s: %w", w.parts[0].final, err)
		}
	}
	if small := lay.End(); small < pooledReaderMin { // the data file's size
		w.bw = bufio.NewWriterSize(w.data.f, int(small))
	} else {
		w.bw = getBuffered(w.data.f)
		w.pooledBuf = true
	}
	w.sink = w.bw
	if gzipped {
		workers := opt.Workers
		if workers == 0 {
			workers = runtime.GOMAXPROCS(0)
		}
		if w.gz, err = getGzip(w.bw, level, workers); err != nil {
			w.Abort()
			return nil, fmt.Errorf("write %s: %w", path, err)
		}
		w.level, w.workers = level, workers
		w.sink = w.gz
	}
	if !pair {
		if _, err := w.sink.Write(hdrBytes); err != nil {
			w.Abort()
			return nil, fmt.Errorf("write %s: %w", path, err)
		}
	}
	return w, nil
}

// writeSmallFile writes a .hdr (gzipped or not) in one go.
func writeSmallFile(f *os.File, b []byte, gzipped bool, level int) error {
	if !gzipped {
		_, err := f.Write(b)
		return err
	}
	z, _ := gzip.NewWriterLevel(f, level)
	if _, err := z.Write(b); err != nil {
		return err
	}
	return z.Close()
}

// WriteSlices appends whole z-slices (of consecutive volumes, for a 4D header) of host-order
// samples. raw is not modified or retained: for .gz paths the compressor reads large writes in
// place (blockGzip), so WriteSlices returns only once it is done reading raw.
func (w *Writer) WriteSlices(raw []byte) error {
	if w.err != nil {
		return w.err
	}
	if w.closed {
		return fmt.Errorf("write %s: writer already committed or aborted", w.path)
	}
	if int64(len(raw))%w.slice != 0 {
		return fmt.Errorf("write %s: %d bytes is not a whole number of %d-byte z-slices", w.path, len(raw), w.slice)
	}
	if w.done+int64(len(raw)) > w.total {
		return fmt.Errorf("write %s: %d more bytes would exceed the %d the header declares", w.path, len(raw), w.total)
	}
	if !w.swap {
		w.write(raw)
	} else {
		if w.buf == nil {
			w.buf = make([]byte, 1<<20)
		}
		for len(raw) > 0 && w.err == nil {
			n := copy(w.buf, raw)
			swapBytes(w.buf[:n], w.elem) // len(w.buf) is a multiple of every sample size
			w.write(w.buf[:n])
			raw = raw[n:]
		}
	}
	return w.err
}

func (w *Writer) write(b []byte) {
	if _, err := w.sink.Write(b); err != nil {
		w.err = fmt.Errorf("write %s: %w", w.data.final, err)
		return
	}
	w.done += int64(len(b))
}

// Commit finishes the file: it fails, removing the temporaries, when fewer slices were written
// than the header declares or anything failed; otherwise the data is flushed, fsynced and
// renamed into place, and the folder fsynced. For a pair the image is renamed before the
// header. Commit after Commit returns nil.
func (w *Writer) Commit() error {
	if w.closed {
		return w.err // nil after a successful Commit
	}
	if w.err == nil && w.done != w.total {
		w.err = fmt.Errorf("write %s: short: %d of %d z-slices written", w.path, w.done/w.slice, w.total/w.slice)
	}
	if w.err == nil {
		w.err = w.finish()
	}
	if w.err != nil {
		w.Abort()
		return w.err
	}
	w.closed = true
	return nil
}

func (w *Writer) finish() error {
	if w.gz != nil {
		if err := w.gz.Close(); err != nil { // its goroutines have stopped, error or not
			return fmt.Errorf("write %s: %w", w.data.final, err)
		}
	}
	if err := w.bw.Flush(); err != nil {
		return fmt.Errorf("write %s: %w", w.data.final, err)
	}
	// Both finished cleanly: the next file can have them.
	if w.gz != nil {
		putGzip(w.gz, w.level, w.workers)
		w.gz = nil
	}
	if w.pooledBuf {
		putBuffered(w.bw)
		w.bw, w.pooledBuf = nil, false
	}
	for _, p := range w.parts {
		if err := p.f.Sync(); err != nil {
			return fmt.Errorf("write %s: fsync: %w", p.final, err)
		}
		err := p.f.Close()
		p.f = nil
		if err != nil {
			return fmt.Errorf("write %s: %w", p.final, err)
		}
		// CreateTemp makes 0600 files; results are ordinary data files.
		if err := os.Chmod(p.temp, 0o644); err != nil {
			return fmt.Errorf("write %s: %w", p.final, err)
		}
	}
	for i := len(w.parts) - 1; i >= 0; i-- { // image first: the header is what gets opened
		p := w.parts[i]
		if err := os.Rename(p.temp, p.final); err != nil {
			return fmt.Errorf("write %s: %w", p.final, err)
		}
		p.temp = ""
	}
	return syncDir(filepath.Dir(w.path))
}

// syncDir makes the renames durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("fsync %s: %w", dir, err)
	}
	defer d.Close()
	// Some file systems cannot fsync a directory; the rename is then as durable as they allow.
	if err := d.Sync(); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOTSUP) {
		return fmt.Errorf("fsync %s: %w", dir, err)
	}
	return nil
}

// Abort discards the write: it stops the compressors and removes the temporaries. It is a no-op
// after a successful Commit and may be called more than once.
func (w *Writer) Abort() error {
	if w.closed && w.err == nil {
		return nil
	}
	w.closed = true
	if w.gz != nil {
		w.gz.Abort() // drops the blocks in flight, writes nothing more, stops its goroutines
		putGzip(w.gz, w.level, w.workers)
		w.gz = nil
	}
	var first error
	for _, p := range w.parts {
		if p.f != nil {
			p.f.Close()
			p.f = nil
		}
		if p.temp != "" {
			if err := os.Remove(p.temp); err != nil && !errors.Is(err, os.ErrNotExist) && first == nil {
				first = err
			}
			p.temp = ""
		}
	}
	if w.err == nil {
		w.err = fmt.Errorf("write %s: aborted", w.path)
	}
	return first
}
