package nifti

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
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
	// cleanup releases mem or stops ahead if the Reader is dropped without Close; Close
	// cancels it.
	cleanup runtime.Cleanup
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

// open reads and checks the header, opens the data file, checks it can hold the selected
// volume and sets up where its bytes come from; ReadHeader stops after the checks.
func (r *Reader) open(cfg openConfig) error {
	names := namesOf(r.path)
	hs, h, err := r.openHeader(names, cfg)
	if err != nil {
		return err
	}
	if err := r.selectVolume(hs.name, h, cfg); err != nil {
		return err
	}
	ds := hs
	if h.Magic[1] != '+' { // a pair: the voxels are in the .img
		if ds, err = openFirst(names.images, cfg.open); err != nil {
			return err
		}
		r.sources = append(r.sources, ds)
	}
	r.dataPath = ds.name
	r.lay = r.g.layout(h.VoxOffset) // decodeHeader checked vox_offset
	if err := r.checkDataSize(ds, h); err != nil {
		return err
	}
	if cfg.headerOnly {
		r.hdr = *h
		return nil
	}
	if err := r.seekVolume(ds, h); err != nil {
		return err
	}
	if err := r.serveData(ds, h, cfg); err != nil {
		return err
	}
	h.ExtensionLen = max(h.ExtensionLen, 0)
	r.hdr = *h
	r.swap = h.ByteOrder != hostOrder
	r.slope, r.inter = effectiveScaling(h)
	return nil
}

// openHeader opens the file that holds the header (the first of the candidates that exists)
// and reads the header and its extensions, recording them in cfg.raw when that is set.
func (r *Reader) openHeader(names pathNames, cfg openConfig) (*source, *Header, error) {
	hs, err := openFirst(names.headers, cfg.open)
	if err != nil {
		return nil, nil, err
	}
	r.sources = append(r.sources, hs)
	if cfg.raw != nil {
		cfg.raw.opened, cfg.raw.FileSize, cfg.raw.Gzipped = true, hs.size, hs.compressed()
	}
	h, err := readHeader(hs, cfg.raw)
	if err != nil {
		return nil, nil, err
	}
	single := h.Magic[1] == '+'
	if !single && !names.pair {
		return nil, nil, openError(hs.name, fmt.Errorf("%w: magic %q declares a .hdr/.img pair, but this is a single file", ErrCorrupt, h.Magic))
	}
	if h.Extensions, h.ExtensionLen, err = readExtensions(hs, h, single); err != nil {
		return nil, nil, err
	}
	if cfg.raw != nil {
		cfg.raw.Extensions, cfg.raw.ExtensionLen = h.Extensions, h.ExtensionLen
	}
	return hs, h, nil
}

// selectVolume checks the header's datatype and dims (checkGeometry) and the volume asked
// for: a file of several volumes needs WithVolume. name is the header's file.
func (r *Reader) selectVolume(name string, h *Header, cfg openConfig) error {
	var err error
	if r.g, err = checkGeometry(h); err != nil {
		return openError(name, err)
	}
	switch {
	case cfg.volumeSet && (cfg.volume < 0 || cfg.volume >= r.g.volumes):
		return openError(name, fmt.Errorf("%w: volume %d requested, the file has %d", ErrMultiVolume, cfg.volume, r.g.volumes))
	case cfg.volumeSet:
		r.volume = cfg.volume
	case r.g.volumes > 1:
		return openError(name, fmt.Errorf("%w: %d volumes (dims %v); choose one with --volume N", ErrMultiVolume, r.g.volumes, h.Dim[1:h.Dim[0]+1]))
	}
	return nil
}

// checkDataSize refuses a data file too small to hold the selected volume: an uncompressed
// one by its size, a gzipped one by the most it can inflate to.
func (r *Reader) checkDataSize(ds *source, h *Header) error {
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
	return nil
}

// seekVolume moves the data file's stream to the selected volume's first voxel.
func (r *Reader) seekVolume(ds *source, h *Header) error {
	start, _ := r.lay.Volume(r.volume)
	err := ds.skipTo(start)
	if err == nil {
		return nil
	}
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

// serveData sets up where the volume's bytes come from, ds positioned at its first voxel:
// memory the gzipped file was inflated into whole (WithInflateThreads), the read-ahead over
// the gzip stream, or the uncompressed file (for positional reads too).
func (r *Reader) serveData(ds *source, h *Header, cfg openConfig) error {
	start, _ := r.lay.Volume(r.volume)
	fileEnd := r.lay.End()
	r.in = ds
	// Inflated whole only when that costs at most about one more copy of the volume: a long 4D
	// series (fMRI, DWI) would need memory for all of its volumes.
	if ds.compressed() && ds.isize == uint32(fileEnd) && r.lay.Volumes <= 2 {
		ctx := cfg.ctx
		if ctx == nil {
			ctx = context.Background()
		}
		var into func() []byte
		if cfg.inflateInto != nil && r.lay.Volumes == 1 {
			into = func() []byte { return cfg.inflateInto(int(start), r.lay.VolumeBytes, r.g.dt, h.ByteOrder != hostOrder) }
		}
		var err error
		if r.mem, err = inflateWhole(ctx, ds, fileEnd, cfg.inflateThreads, into); err != nil {
			return err // stopped, or the caller's memory does not fit: not a reason to stream the file instead
		}
	}
	switch {
	case r.mem != nil:
		r.cleanup = runtime.AddCleanup(r, func(m *inflated) { m.release() }, r.mem)
		r.sizeKnown = true
		mem := r.mem.readerAt()
		r.dataAt = mem
		r.in = io.NewSectionReader(mem, start, r.lay.VolumeBytes)
	case ds.compressed():
		r.sizeKnown = ds.isize == uint32(fileEnd)
		r.ahead = startPrefetch(ds, r.lay.VolumeBytes, r.volume == r.lay.Volumes-1)
		r.in = r.ahead
		// A Reader dropped without Close would leave the read-ahead blocked forever.
		r.cleanup = runtime.AddCleanup(r, (*prefetcher).stop, r.ahead)
	default:
		r.sizeKnown = true
		r.dataAt = ds.f
	}
	return nil
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

// Close stops the read-ahead and closes the files. It may be called more than once.
func (r *Reader) Close() error {
	if r.closed {
		return nil
	}
	r.closed = true
	r.cleanup.Stop()
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
