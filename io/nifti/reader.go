package nifti

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"runtime"
)

// OpenOption configures Open.
type OpenOption func(*openConfig)

type openConfig struct {
	volume    int64
	volumeSet bool
	open      fileOpener // nil: the OS file system; in-memory files in fuzz tests
	// inflateThreads > 1: gzipped data files may be inflated whole on that many goroutines
	// (WithInflateThreads), stopping when ctx (nil: never) is done.
	inflateThreads int
	ctx            context.Context
	inflateInto    func(prefix int, dataBytes int64, dt DataType, swapped bool) []byte
	// headerOnly: Open stops after the header, its extensions and the checks against the
	// files' sizes; the Reader cannot read voxels (ReadHeader).
	headerOnly bool
	// raw, when set, receives what could be decoded of the header even when Open fails
	// (ReadHeaderRaw).
	raw *RawHeader
}

// WithVolume selects volume t (0-based, counting over dims 4..7 in file order) of a
// multi-volume file. Without it such a file is refused with ErrMultiVolume.
func WithVolume(t int) OpenOption {
	return func(c *openConfig) { c.volume, c.volumeSet = int64(t), true }
}

// withOpener makes Open read files through open instead of the OS (fuzz tests, in memory).
func withOpener(open fileOpener) OpenOption {
	return func(c *openConfig) { c.open = open }
}

// Reader streams one 3D volume as consecutive z-slices. It is not safe for concurrent use, but
// it may be driven from one goroutine while others consume the buffers it filled: that, plus
// the read-ahead it runs for compressed files, lets slab k be processed while slab k+1 is
// decompressed. Close it to stop the read-ahead goroutine. Uncompressed volumes can also be
// read by z-range from several goroutines at once (ReadSlicesInt16At and friends, readat.go).
type Reader struct {
	path     string // as given to Open
	dataPath string // the file holding the voxels, for error messages
	hdr      Header
	g        geometry
	volume   int64
	slope    float64
	inter    float64
	swap     bool // file byte order differs from the host's

	sources []*source
	in      io.Reader // positioned at the first voxel of the selected volume
	// lay is where the voxels lie in the data file (uncompressed).
	lay Layout
	// dataAt serves positional reads (readat.go): the uncompressed data file, or the gzipped
	// one inflated whole (mem); nil when the data is streamed from gzip.
	dataAt io.ReaderAt
	ahead  *prefetcher
	mem    *inflated // a gzipped data file inflated whole at Open (WithInflateThreads), or nil
	// sizeKnown: the data was checked to be all there (uncompressed), or the gzip trailer
	// agrees with the header; whole-volume reads then allocate exactly once.
	sizeKnown bool

	next    int   // next z-slice
	pos     int64 // bytes of the volume consumed
	scratch []uint64
	err     error // sticky read error
	closed  bool
}

// Open opens a NIfTI-1 or NIfTI-2 volume: .nii, .nii.gz, or either half of a .hdr/.img pair
// (each possibly gzipped; the partner is found by name). It reads and checks the header and
// positions the reader at the first voxel; nothing is allocated from header values before
// they are checked against the limits and the file size.
func Open(path string, opts ...OpenOption) (*Reader, error) {
	var cfg openConfig
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.open == nil {
		cfg.open = osOpen
	}
	r := &Reader{path: path}
	if err := r.open(cfg); err != nil {
		r.Close()
		if !namesFile(err, path) { // no file, or the pair's other one
			err = openError(path, err)
		}
		return nil, err
	}
	return r, nil
}

// openError is the error of opening file name, "open NAME: err"; Open adds the path it was
// given to errors that do not name it (namesFile).
func openError(name string, err error) error {
	return &fs.PathError{Op: "open", Path: name, Err: err}
}

// namesFile reports whether err's chain holds an *fs.PathError of path.
func namesFile(err error, path string) bool {
	for pe := (*fs.PathError)(nil); errors.As(err, &pe); err = pe.Err {
		if pe.Path == path {
			return true
		}
	}
	return false
}

func (r *Reader) open(cfg openConfig) error {
	layout := namesOf(r.path)
	hs, err := openFirst(layout.headers, cfg.open)
	if err != nil {
		return err
	}
	r.sources = append(r.sources, hs)
	if cfg.raw != nil {
		cfg.raw.opened, cfg.raw.FileSize, cfg.raw.Gzipped = true, hs.size, hs.compressed()
	}
	h, err := readHeader(hs, cfg.raw)
	if err != nil {
		return err
	}
	single := h.Magic[1] == '+'
	if !single && !layout.pair {
		return openError(hs.name, fmt.Errorf("%w: magic %q declares a .hdr/.img pair, but this is a single file", ErrCorrupt, h.Magic))
	}
	if h.Extensions, h.ExtensionLen, err = readExtensions(hs, h, single); err != nil {
		return err
	}
	if cfg.raw != nil {
		cfg.raw.Extensions, cfg.raw.ExtensionLen = h.Extensions, h.ExtensionLen
	}
	r.g, err = checkGeometry(h)
	if err != nil {
		return openError(hs.name, err)
	}
	if cfg.volumeSet {
		if cfg.volume < 0 || cfg.volume >= r.g.volumes {
			return openError(hs.name, fmt.Errorf("%w: volume %d requested, the file has %d", ErrMultiVolume, cfg.volume, r.g.volumes))
		}
		r.volume = cfg.volume
	} else if r.g.volumes > 1 {
		return openError(hs.name, fmt.Errorf("%w: %d volumes (dims %v); choose one with --volume N", ErrMultiVolume, r.g.volumes, h.Dim[1:h.Dim[0]+1]))
	}

	ds := hs
	if !single {
		if ds, err = openFirst(layout.images, cfg.open); err != nil {
			return err
		}
		r.sources = append(r.sources, ds)
	}
	r.dataPath = ds.name
	r.lay = r.g.layout(h.VoxOffset) // decodeHeader checked vox_offset
	start, end := r.lay.Volume(r.volume)
	maxSize := ds.maxUncompressed()
	switch {
	case h.VoxOffset > maxSize:
		return openError(ds.name, fmt.Errorf("%w: vox_offset %d is past the end of the %d-byte file", ErrCorrupt, h.VoxOffset, ds.size))
	case end > maxSize && !ds.compressed():
		return openError(ds.name, r.truncatedAt(maxSize-start))
	case end > maxSize:
		return openError(ds.name, fmt.Errorf("%w: the data needs %d bytes, more than a %d-byte gzip file can hold", ErrTruncated, end, ds.size))
	}
	if cfg.headerOnly {
		r.hdr = *h
		return nil
	}
	if err := ds.skipTo(start); err != nil {
		// Only a gzip stream gets here: io.EOF, it ended cleanly; io.ErrUnexpectedEOF, the
		// compressed file is cut short.
		cut := errors.Is(err, io.ErrUnexpectedEOF)
		switch {
		case !cut && !errors.Is(err, io.EOF) && ds.consumed < h.VoxOffset:
			return openError(ds.name, classifyStreamErr(err, "bytes before vox_offset"))
		case !cut && !errors.Is(err, io.EOF):
			return openError(ds.name, classifyStreamErr(err, "data"))
		case cut && ds.consumed < h.VoxOffset:
			return openError(ds.name, fmt.Errorf("%w: the gzip stream ends early (the %d-byte file is cut short), after %d inflated bytes, before vox_offset %d",
				ErrTruncated, ds.size, ds.consumed, h.VoxOffset))
		case ds.consumed < h.VoxOffset:
			return openError(ds.name, fmt.Errorf("%w: vox_offset %d is past the end of the data: the gzip stream inflates to %d bytes", ErrCorrupt, h.VoxOffset, ds.consumed))
		}
		return openError(ds.name, gzipCut(r.truncatedAt(ds.consumed-start), cut))
	}
	r.in = ds
	fileEnd := r.lay.End()
	// Inflated whole only when that costs at most about one more copy of the volume: a long 4D
	// series (fMRI, DWI) would need memory for all of its volumes.
	if ds.compressed() && ds.isize == uint32(fileEnd) && r.g.volumes <= 2 {
		ctx := cfg.ctx
		if ctx == nil {
			ctx = context.Background()
		}
		var into func() []byte
		if cfg.inflateInto != nil && r.g.volumes == 1 {
			into = func() []byte { return cfg.inflateInto(int(start), r.g.volBytes, r.g.dt, h.ByteOrder != hostOrder) }
		}
		if r.mem, err = inflateWhole(ctx, ds, fileEnd, cfg.inflateThreads, into); err != nil {
			return err // stopped, or the caller's memory does not fit: not a reason to stream the file instead
		}
	}
	switch {
	case r.mem != nil:
		runtime.AddCleanup(r, func(m *inflated) { m.release() }, r.mem)
		r.sizeKnown = true
		mem := r.mem.readerAt()
		r.dataAt = mem
		r.in = io.NewSectionReader(mem, start, r.g.volBytes)
	case ds.compressed():
		r.sizeKnown = ds.isize == uint32(fileEnd)
		r.ahead = startPrefetch(ds, r.g.volBytes, r.volume == r.g.volumes-1)
		r.in = r.ahead
		// A Reader dropped without Close would leave the read-ahead blocked forever.
		runtime.AddCleanup(r, (*prefetcher).stop, r.ahead)
	default:
		r.sizeKnown = true
		r.dataAt = ds.f
	}
	h.ExtensionLen = max(h.ExtensionLen, 0)
	r.hdr = *h
	r.swap = h.ByteOrder != hostOrder
	r.slope, r.inter = effectiveScaling(h)
	return nil
}

// readHeader reads and decodes the header at the start of s. With raw set, it also records
// there whatever of the header it could decode, even when it fails.
func readHeader(s *source, raw *RawHeader) (*Header, error) {
	buf := make([]byte, sizeofHdr2)
	n, err := readFullRaw(s, buf[:4])
	if raw != nil {
		raw.Read = n
	}
	if n < 4 {
		return nil, openError(s.name, shortHeader(s, buf[:n], err, 0))
	}
	version, order, size, err := detectHeader(buf[:4])
	if err != nil {
		return nil, openError(s.name, err)
	}
	m, err := readFullRaw(s, buf[4:size])
	n += m
	if raw != nil {
		// The bytes past n are still zero, and those of a field cut partway are zeroed: the
		// fields not wholly read decode as zero (RawHeader.Has tells them apart).
		zeroPartialFields(buf[:n], version)
		h, voxOffset := decodeFields(buf[:size], version, order)
		raw.Header, raw.Read, raw.StoredVoxOffset = *h, n, voxOffset
	}
	if n < size {
		return nil, openError(s.name, shortHeader(s, buf[:n], err, version))
	}
	h, err := decodeHeader(buf[:size], version, order)
	if err != nil {
		return nil, openError(s.name, err)
	}
	return h, nil
}

// shortHeader says why s ended (err, from readFullRaw) after only the bytes got of a header
// of the given version (0: not known yet, fewer than the 4 bytes of sizeof_hdr were read),
// counting what was actually read or inflated.
func shortHeader(s *source, got []byte, err error, version int) error {
	if err != io.EOF && !errors.Is(err, io.ErrUnexpectedEOF) {
		return classifyStreamErr(err, "header")
	}
	need := fmt.Sprintf("a NIfTI-%d header needs %d", version, headerSize(version))
	if version == 0 {
		need = fmt.Sprintf("a NIfTI header needs %d (NIfTI-1) or %d (NIfTI-2)", sizeofHdr1, sizeofHdr2)
	}
	n := len(got)
	if s.gz != nil && errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("%w: the gzip stream ends early (the %d-byte file is cut short), after %d inflated bytes; %s",
			ErrTruncated, s.size, n, need)
	}
	have := fmt.Sprintf("%d bytes", n)
	if s.gz != nil {
		have = fmt.Sprintf("the %d-byte gzip file inflates to %d bytes", s.size, n)
	}
	switch {
	case version != 0:
		return fmt.Errorf("%w: %s, %s", ErrTruncated, have, need)
	case n == 0 && s.gz == nil:
		return fmt.Errorf("%w: empty file (0 bytes)", ErrNotNIfTI)
	case n == 0:
		return fmt.Errorf("%w: %s", ErrNotNIfTI, have)
	case startsSizeofHdr(got):
		return fmt.Errorf("%w: %s, %s", ErrTruncated, have, need)
	}
	return fmt.Errorf("%w: %s, too short for a NIfTI header and not the start of one (%s)", ErrNotNIfTI, have, need)
}

// startsSizeofHdr reports whether b (shorter than 4 bytes) is the start of a sizeof_hdr of
// either version in either byte order.
func startsSizeofHdr(b []byte) bool {
	for _, size := range []uint32{sizeofHdr1, sizeofHdr2} {
		var le, be [4]byte
		binary.LittleEndian.PutUint32(le[:], size)
		binary.BigEndian.PutUint32(be[:], size)
		if bytes.HasPrefix(le[:], b) || bytes.HasPrefix(be[:], b) {
			return true
		}
	}
	return false
}

// readExtensions reads the 4-byte extender after the header and, when its first byte is set,
// parses the extensions that follow (parseExtensions: leniently, at most maxExtensionBytes).
// The extension area is the bytes between the extender and vox_offset in a single file, the
// rest of the .hdr in a pair. It also returns the area's length (Header.ExtensionLen).
func readExtensions(s *source, h *Header, single bool) ([]Extension, int64, error) {
	hsize := int64(headerSize(h.Version))
	if single && h.VoxOffset < hsize+4 {
		return nil, 0, nil // no room for the extender: old writers put the data right after the header
	}
	var flag [4]byte
	if _, err := io.ReadFull(s, flag[:]); err != nil || flag[0] == 0 {
		return nil, 0, nil // a .hdr without the extender is legal; a single file is checked later
	}
	area := int64(-1) // a gzipped .hdr: up to the end of its stream
	switch {
	case single:
		area = h.VoxOffset - hsize - 4
	case s.gz == nil:
		area = s.size - hsize - 4
	}
	exts, err := parseExtensions(s, area, h.ByteOrder)
	if err != nil {
		return nil, 0, openError(s.name, classifyStreamErr(err, "header extensions"))
	}
	if area >= 0 {
		return exts, area, nil
	}
	if _, err := io.Copy(io.Discard, io.LimitReader(s, 64<<20)); err != nil {
		return nil, 0, openError(s.name, classifyStreamErr(err, "header extensions"))
	}
	return exts, s.consumed - hsize - 4, nil
}

// effectiveScaling applies the rule of nibabel and niftilib: a zero or non-finite slope means
// "no scaling" (real files carry 0 or NaN there). A non-finite intercept with a valid slope is
// taken as 0.
func effectiveScaling(h *Header) (slope, inter float64) {
	s, i := h.SclSlope, h.SclInter
	if s == 0 || math.IsNaN(s) || math.IsInf(s, 0) {
		return 1, 0
	}
	if math.IsNaN(i) || math.IsInf(i, 0) {
		i = 0
	}
	return s, i
}

// gzipCut adds to a truncation error that the data file's gzip stream ends early (cut: the
// stream ended with io.ErrUnexpectedEOF, the compressed file is cut short), as opposed to a
// whole stream of too few bytes.
func gzipCut(err error, cut bool) error {
	if !cut {
		return err
	}
	return fmt.Errorf("%w; the gzip stream ends early (the compressed file is cut short)", err)
}

// truncatedAt describes data that ends after have bytes of the selected volume.
func (r *Reader) truncatedAt(have int64) error {
	vol := ""
	if r.g.volumes > 1 {
		vol = fmt.Sprintf(" of volume %d", r.volume)
	}
	if have < 0 {
		return fmt.Errorf("%w: the file ends before volume %d", ErrTruncated, r.volume)
	}
	z := r.lay.SliceAt(have)
	return fmt.Errorf("%w: the data ends inside z-slice %d of %d%s (%d of %d bytes)", ErrTruncated, z, r.g.nz, vol, have, r.g.volBytes)
}

// Header returns a copy of the header as read (Dim still lists every volume of a 4D file),
// Extensions included.
func (r *Reader) Header() *Header {
	h := r.hdr
	h.Extensions = cloneExtensions(h.Extensions)
	return &h
}

// Path returns the path given to Open.
func (r *Reader) Path() string { return r.path }

// SliceVoxels is the number of voxels of one z-slice, NX*NY.
func (r *Reader) SliceVoxels() int { return r.g.sliceVoxels }

// Depth is the number of z-slices of the volume, NZ.
func (r *Reader) Depth() int { return r.g.nz }

// Datatype is the stored datatype.
func (r *Reader) Datatype() DataType { return r.g.dt }

// Scaling returns the effective scl_slope and scl_inter: (1, 0) when the file's slope is 0,
// NaN or infinite.
func (r *Reader) Scaling() (slope, inter float64) { return r.slope, r.inter }

// ReadSlicesRaw reads the next n z-slices (fewer at the end of the volume) as stored bytes in
// host byte order into dst, which must hold them. It returns the number of slices read, and
// 0, io.EOF when none are left. After an error the contents of dst are undefined and every
// later call returns the same error; the one exception is a gzip checksum failure detected
// after the last slice, returned together with its count.
func (r *Reader) ReadSlicesRaw(dst []byte, n int) (int, error) {
	k, err := r.claim(n, len(dst)/r.g.elemSize)
	if k == 0 {
		return 0, err
	}
	if err := r.readHost(dst[:int64(k)*r.g.sliceBytes]); err != nil {
		return 0, err
	}
	return r.advance(k)
}

// ReadSlicesFloat32 is ReadSlicesRaw for any datatype, with the stored values converted to
// float32 (no scaling; see Scaling). int32, uint32 and float64 values round to float32.
func (r *Reader) ReadSlicesFloat32(dst []float32, n int) (int, error) {
	return readSlicesAs(r, dst, n, Float32, decodeFloat32)
}

// ReadSlicesInt16 is ReadSlicesRaw with the stored values as int16. Only files whose datatype
// converts exactly (Int16Exact: int16, uint8, int8) are accepted; others get an error wrapping
// ErrUnsupportedDatatype.
func (r *Reader) ReadSlicesInt16(dst []int16, n int) (int, error) {
	if !Int16Exact(r.g.dt) {
		return 0, fmt.Errorf("read %s: %w: %s is not representable as int16", r.dataPath, ErrUnsupportedDatatype, r.g.dt)
	}
	return readSlicesAs(r, dst, n, Int16, decodeInt16)
}

// readSlicesAs reads slices into typed samples: straight into dst when the file stores that
// type (native), else through the scratch buffer and decode.
func readSlicesAs[T int16 | float32](r *Reader, dst []T, n int, native DataType, decode func([]T, []byte, DataType)) (int, error) {
	k, err := r.claim(n, len(dst))
	if k == 0 {
		return 0, err
	}
	out := dst[:k*r.g.sliceVoxels]
	if r.g.dt == native {
		err = r.readHost(bytesOf(out))
	} else {
		err = r.readConverted(len(out), func(raw []byte, at, count int) {
			decode(out[at:at+count], raw, r.g.dt)
		})
	}
	if err != nil {
		return 0, err
	}
	return r.advance(k)
}

// claim checks the call and returns how many slices it will read.
func (r *Reader) claim(n, dstVoxels int) (int, error) {
	switch {
	case r.closed:
		return 0, fmt.Errorf("read %s: reader is closed", r.path)
	case r.err != nil:
		return 0, r.err
	case n < 1:
		return 0, fmt.Errorf("read %s: asked for %d slices", r.path, n)
	case r.next == r.g.nz:
		return 0, io.EOF
	}
	k := min(n, r.g.nz-r.next)
	if dstVoxels < k*r.g.sliceVoxels {
		return 0, fmt.Errorf("read %s: buffer of %d voxels is too small for %d slices of %d: %w", r.path, dstVoxels, k, r.g.sliceVoxels, io.ErrShortBuffer)
	}
	return k, nil
}

// advance accounts for k slices read and, after the last one of a gzip file, collects the
// read-ahead's verdict on the trailer checksum.
func (r *Reader) advance(k int) (int, error) {
	r.next += k
	if r.next < r.g.nz || r.ahead == nil {
		return k, nil
	}
	if _, err := r.ahead.Read(nil); err != io.EOF {
		r.err = fmt.Errorf("read %s: %w", r.dataPath, classifyStreamErr(err, "gzip trailer"))
		return k, r.err
	}
	return k, nil
}

// readHost fills b with the next stored bytes, in host order.
func (r *Reader) readHost(b []byte) error {
	if err := r.readFull(b); err != nil {
		return err
	}
	if r.swap {
		swapBytes(b, r.g.elemSize)
	}
	return nil
}

// readConverted reads count samples in cache-sized chunks through the scratch buffer and hands
// each chunk, in host order, to convert.
func (r *Reader) readConverted(count int, convert func(raw []byte, at, count int)) error {
	const chunkBytes = 256 << 10
	if r.scratch == nil {
		r.scratch = make([]uint64, chunkBytes/8) // []uint64: aligned for every sample type
	}
	chunk := chunkBytes / r.g.elemSize
	raw := bytesOf(r.scratch)
	for at := 0; at < count; at += chunk {
		m := min(chunk, count-at)
		b := raw[:m*r.g.elemSize]
		if err := r.readHost(b); err != nil {
			return err
		}
		convert(b, at, m)
	}
	return nil
}

func (r *Reader) readFull(b []byte) error {
	n, err := io.ReadFull(r.in, b)
	r.pos += int64(n)
	if err == nil {
		return nil
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		// io.ReadFull turns a short read's io.EOF into io.ErrUnexpectedEOF; the read-ahead
		// keeps the gzip stream's own error.
		cut := r.ahead != nil && errors.Is(r.ahead.err, io.ErrUnexpectedEOF)
		r.err = fmt.Errorf("read %s: %w", r.dataPath, gzipCut(r.truncatedAt(r.pos), cut))
	} else {
		z := r.lay.SliceAt(r.pos)
		r.err = fmt.Errorf("read %s: %w", r.dataPath, classifyStreamErr(err, fmt.Sprintf("data (z-slice %d of %d)", z, r.g.nz)))
	}
	return r.err
}

// Close stops the read-ahead and closes the files. It may be called more than once.
func (r *Reader) Close() error {
	if r.closed {
		return nil
	}
	r.closed = true
	if r.ahead != nil {
		r.ahead.close()
	}
	var first error
	if r.mem != nil {
		first = r.mem.release()
		r.mem = nil
	}
	for _, s := range r.sources {
		if err := s.Close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}
