package pipeline

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
	"time"
	"unsafe"

	"voxpipe/internal/hostmem"
	"voxpipe/io/nifti"
	"voxpipe/jobs"
	"voxpipe/model"
	"voxpipe/stage"
	"voxpipe/telemetry/timing"
)

// testRunner is a read stage for calling it directly.
func testRunner(slab, threads int) *readers {
	r := newServices(Config{
		Workers: Workers{Slab: slab, ReadThreads: threads, Readers: 1},
	}, nil)
	return &readers{services: r}
}

// volumeFile writes a volume of dt with smooth values plus full-mantissa noise (so float sums
// round, and a different summation order would show), in the given byte order and layout.
func volumeFile(t *testing.T, path string, dt nifti.DataType, order binary.ByteOrder, nx, ny, nz int, slope, inter, offset float64) {
	t.Helper()
	n := nx * ny * nz
	raw := make([]byte, n*dt.Size())
	x := uint64(7)
	for i := 0; i < n; i++ {
		x = x*6364136223846793005 + 1442695040888963407
		noise := float64(x>>40) / float64(1<<24) // [0, 1), 24 bits
		v := offset + 60*math.Sin(float64(i%nx)/5) + 40*math.Cos(float64(i/(nx*ny))/3) + 20*noise
		b := raw[i*dt.Size():]
		switch dt {
		case nifti.Uint8:
			b[0] = uint8(v)
		case nifti.Int16:
			binary.NativeEndian.PutUint16(b, uint16(int16(v)))
		case nifti.Int32:
			binary.NativeEndian.PutUint32(b, uint32(int32(v*1000)))
		case nifti.Float32:
			binary.NativeEndian.PutUint32(b, math.Float32bits(float32(v)))
		case nifti.Float64:
			binary.NativeEndian.PutUint64(b, math.Float64bits(v))
		}
	}
	h := &nifti.Header{Version: 1, ByteOrder: order, Datatype: dt, Dim: [8]int64{3, int64(nx), int64(ny), int64(nz), 1, 1, 1, 1},
		PixDim: [8]float64{1, 1, 1, 1}, SclSlope: slope, SclInter: inter}
	if err := nifti.Write(path, h, raw, nifti.WriteOptions{Level: 1}); err != nil {
		t.Fatal(err)
	}
}

// decodeFile runs the read stage on path and returns the volume (a copy) and its norm.
func decodeFile(t *testing.T, r *readers, path string) model.Volume {
	t.Helper()
	vol, _ := decodeInto(t, r, path, hostmem.NewBuffer(nil, inputHeadroom))
	return vol
}

// decodeInto decodes path into buf, reporting whether the file was inflated straight into it.
func decodeInto(t *testing.T, r *readers, path string, buf *hostmem.Buffer) (model.Volume, bool) {
	t.Helper()
	w := &work{job: jobs.Job{Name: "v", Input: path}, mem: held{in: buf}}
	if err := r.decode(context.Background(), 0, w); err != nil {
		t.Fatal(err)
	}
	vol := w.vol
	vol.I16, vol.F32 = slices.Clone(vol.I16), slices.Clone(vol.F32)
	return vol, w.mem.inflatedInto
}

func volumeBytes(v model.Volume) []byte {
	if v.I16 != nil {
		return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(v.I16))), 2*len(v.I16))
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(v.F32))), 4*len(v.F32))
}

// The parallel positional read gives the sequential read's values and statistics bit for bit
// (the Stats themselves, not only the norm derived from them), for int16, uint8, int32, float32
// and float64 files, both byte orders, scaled, single files and .hdr/.img pairs, any number of
// goroutines, any slab and read piece. And a whole read stage on a .nii equals it on the same
// volume gzipped (which keeps the sequential path).
func TestParallelReadMatchesSequential(t *testing.T) {
	defer func(p int) { readPiece = p }(readPiece)
	cases := []struct {
		dt                   nifti.DataType
		order                binary.ByteOrder
		ext                  string
		slope, inter, offset float64
	}{
		{nifti.Int16, binary.LittleEndian, ".nii", 1, 0, 300},
		{nifti.Int16, binary.BigEndian, ".nii", 2.5, -100, -50},
		{nifti.Uint8, binary.LittleEndian, ".hdr", 1, 0, 100},
		{nifti.Int32, binary.BigEndian, ".nii", 0, 0, 0},
		{nifti.Float32, binary.LittleEndian, ".nii", 1, 0, 0.5},
		{nifti.Float32, binary.BigEndian, ".hdr", 0.25, 3, 3e5}, // large offset, scaled
		{nifti.Float64, binary.LittleEndian, ".nii", -1, 1e3, 17},
	}
	const nx, ny, nz = 23, 19, 29
	for _, c := range cases {
		name := fmt.Sprintf("%s_%s%s_slope%v", c.dt, map[bool]string{true: "be", false: "le"}[c.order == binary.BigEndian], c.ext, c.slope)
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "v"+c.ext)
			volumeFile(t, path, c.dt, c.order, nx, ny, nz, c.slope, c.inter, c.offset)
			gz := filepath.Join(dir, "g"+c.ext+".gz")
			volumeFile(t, gz, c.dt, c.order, nx, ny, nz, c.slope, c.inter, c.offset)
			for _, slab := range []int{1, 4, 7, 64} {
				seqRunner := testRunner(slab, 1)
				seq := readStats(t, seqRunner, path, false)
				whole := decodeFile(t, seqRunner, gz) // gzip: the sequential path
				for _, threads := range []int{1, 2, 3, 16} {
					for _, piece := range []int{1 << 20, 3 * nx * ny * 4, 1} {
						readPiece = piece
						r := testRunner(slab, threads)
						if got := readStats(t, r, path, true); got.stats != seq.stats || !slices.Equal(got.data, seq.data) {
							t.Fatalf("slab %d, %d threads, piece %d: stats %+v, sequential %+v (data equal: %v)",
								slab, threads, piece, got.stats, seq.stats, slices.Equal(got.data, seq.data))
						}
						vol := decodeFile(t, r, path)
						if vol.Norm != whole.Norm || !slices.Equal(volumeBytes(vol), volumeBytes(whole)) {
							t.Fatalf("slab %d, %d threads: read stage of the .nii: norm %+v, of the .nii.gz %+v", slab, threads, vol.Norm, whole.Norm)
						}
					}
				}
			}
		})
	}
}

type readResult struct {
	stats model.Stats
	data  []byte
}

// readStats opens path and reads it with readAt (parallel) or readSequential.
func readStats(t *testing.T, r *readers, path string, parallel bool) readResult {
	t.Helper()
	rd, err := nifti.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	h := rd.Header()
	n := h.NX() * h.NY() * h.NZ()
	w := &work{job: jobs.Job{Name: "v", Input: path}, vol: model.Volume{NX: h.NX(), NY: h.NY(), NZ: h.NZ()}}
	if nifti.Int16Exact(h.Datatype) {
		w.vol.I16 = make([]int16, n)
	} else {
		w.vol.F32 = make([]float32, n)
	}
	var st model.Stats
	if parallel {
		if !rd.Seekable() {
			t.Fatal("not seekable")
		}
		st, err = r.readAt(context.Background(), rd, w, r.cfg.readThreads(), false, "test", time.Now())
	} else {
		st, err = r.readSequential(context.Background(), rd, w, "test", time.Now())
	}
	if err != nil {
		t.Fatal(err)
	}
	return readResult{st, slices.Clone(volumeBytes(w.vol))}
}

// Timing rows: one read and one stats row (slab -1) for a .nii read in parallel, per-slab
// rows for a .nii.gz.
func TestParallelReadRows(t *testing.T) {
	t.Parallel()
	b := newBatch(t, 2) // vola.nii.gz, volb.nii
	out := runBatch(t, context.Background(), b, &signEngine{}, func(c *Config) { c.Workers.ReadThreads = 3 })
	if out.res.OK != 2 {
		t.Fatalf("%+v", out.res)
	}
	for volume, want := range map[string][]int{"vola": {0, 1, 2}, "volb": {-1}} { // vola: 11 slices, slab 4
		for _, st := range []stage.Stage{stage.Read, stage.Stats} {
			var slabs []int
			for _, r := range rowsOf(out.rows, volume, st) {
				slabs = append(slabs, r.Slab)
			}
			if !slices.Equal(slabs, want) {
				t.Errorf("%s %s rows for slabs %v, want %v", volume, st, slabs, want)
			}
		}
	}
}

func TestParallelReadErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "v.nii")
	volumeFile(t, path, nifti.Int16, binary.LittleEndian, 16, 16, 40, 1, 0, 10)
	r := testRunner(4, 4)
	// Cancelled: the context's error.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	w := &work{job: jobs.Job{Name: "v", Input: path}, mem: held{in: hostmem.NewBuffer(nil, inputHeadroom)}}
	if err := r.decode(ctx, 0, w); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled read: %v", err)
	}
	// A file cut after Open checked it: ErrTruncated from whichever goroutine meets the end.
	rd, err := nifti.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	if err := os.Truncate(path, 352+16*16*2*25); err != nil {
		t.Fatal(err)
	}
	w = &work{job: jobs.Job{Name: "v", Input: path}, vol: model.Volume{NX: 16, NY: 16, NZ: 40, I16: make([]int16, 16*16*40)}}
	if _, err := r.readAt(context.Background(), rd, w, 4, false, "test", time.Now()); !errors.Is(err, nifti.ErrTruncated) {
		t.Errorf("file cut after Open: %v, want ErrTruncated", err)
	}
}

func TestReadThreadsRule(t *testing.T) {
	t.Parallel()
	procs := runtime.GOMAXPROCS(0)
	for _, c := range []struct {
		cfg  Config
		want int
	}{
		{Config{
			Input: Input{
				Jobs: make([]jobs.Job, 10),
			},
			Workers: Workers{
				Readers: 2,
			},
		}, max(1, procs/2)},
		{Config{
			Input: Input{
				Jobs: make([]jobs.Job, 1),
			},
			Workers: Workers{
				Readers: 2,
			},
		}, procs},
		{Config{
			Input: Input{
				Jobs: make([]jobs.Job, 100),
			},
			Workers: Workers{
				Readers: 4 * procs,
			},
		}, 1},
		{Config{
			Input: Input{
				Jobs: make([]jobs.Job, 10),
			},
			Workers: Workers{
				Readers:     2,
				ReadThreads: 5,
			},
		}, 5},
		{Config{ // a service: every core for each read
			Input: Input{
				Source: make(chan jobs.Job),
			},
			Workers: Workers{
				Readers: 2,
			},
		}, procs},
	} {
		if got := c.cfg.readThreads(); got != c.want {
			t.Errorf("%d readers, %d jobs, ReadThreads %d: %d threads, want %d", c.cfg.Workers.Readers, len(c.cfg.Input.Jobs), c.cfg.Workers.ReadThreads, got, c.want)
		}
	}
}

// A gzipped volume of a few MiB is inflated whole on the read threads and read by position
// (one read row, slab -1), with the same values and normalisation as streaming it on one
// thread (per-slab rows): inflated straight into an input buffer with headroom (int16 and
// float32 stored in host order), or into the reader's own memory and copied (no headroom, or
// a datatype the engine does not read as stored).
func TestReadInflatesLargeGzip(t *testing.T) {
	t.Parallel()
	const nz = 90
	cases, i16 := writeLargeGzips(t, 160, 160, nz)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			vols, into, rows := decodeThreeWays(t, c.path)
			if into != [3]bool{false, c.inPlace, false} {
				t.Errorf("inflated into the buffer (streaming, headroom, none): %v, want [false %v false]", into, c.inPlace)
			}
			for i := 1; i < 3; i++ {
				if !slices.Equal(vols[i].I16, vols[0].I16) || !slices.Equal(vols[i].F32, vols[0].F32) || vols[i].Norm != vols[0].Norm {
					t.Fatalf("decode %d: values or norm differ from streaming: %+v vs %+v", i, vols[i].Norm, vols[0].Norm)
				}
			}
			if c.name == "int16" && !slices.Equal(vols[0].I16, i16) {
				t.Fatal("streamed values differ from the file's")
			}
			readSlabs := func(rs []timing.Row) (slabs []int) {
				for _, r := range rs {
					if r.Stage == stage.Read {
						slabs = append(slabs, r.Slab)
					}
				}
				return slabs
			}
			if s := readSlabs(rows[0]); len(s) != (nz+15)/16 {
				t.Errorf("one thread: read rows for slabs %v, want one per slab (streaming)", s)
			}
			for i := 1; i < 3; i++ {
				if s := readSlabs(rows[i]); !slices.Equal(s, []int{-1}) {
					t.Errorf("four threads: read rows for slabs %v, want [-1] (inflated whole, read by position)", s)
				}
			}
		})
	}
}

// largeGzip is a gzipped test volume of TestReadInflatesLargeGzip.
type largeGzip struct {
	name    string
	path    string
	inPlace bool // inflated into an input buffer with headroom
}

// writeLargeGzips writes nx*ny*nz volumes of random int16, float32 and uint16 values, gzipped
// and above nifti's 4 MiB threshold, and returns them with the int16 values.
func writeLargeGzips(t *testing.T, nx, ny, nz int) ([]largeGzip, []int16) {
	t.Helper()
	x := uint64(11)
	rnd := func() uint64 {
		x = x*6364136223846793005 + 1442695040888963407
		return x >> 32
	}
	dir := t.TempDir()
	write := func(name string, dt nifti.DataType, bitpix int16, raw []byte) string {
		path := filepath.Join(dir, name)
		h := &nifti.Header{Version: 1, ByteOrder: binary.LittleEndian, Datatype: dt, BitPix: bitpix,
			Dim: [8]int64{3, int64(nx), int64(ny), int64(nz), 1, 1, 1, 1}, PixDim: [8]float64{1, 1, 1, 1}, SclSlope: 1, Magic: "n+1"}
		if err := nifti.Write(path, h, raw, nifti.DefaultWriteOptions()); err != nil {
			t.Fatal(err)
		}
		if st, err := os.Stat(path); err != nil || st.Size() < 4<<20 {
			t.Fatalf("test file too small for the parallel inflate: %v %v", st.Size(), err)
		}
		return path
	}
	i16 := make([]int16, nx*ny*nz)
	f32 := make([]float32, nx*ny*nz)
	u16 := make([]uint16, nx*ny*nz)
	for i := range i16 {
		v := rnd()
		i16[i], f32[i], u16[i] = int16(v>>16), float32(int32(v))/(1<<20), uint16(v>>8)
	}
	raw := func(p unsafe.Pointer, n int) []byte { return unsafe.Slice((*byte)(p), n) }
	return []largeGzip{
		{"int16", write("i16.nii.gz", nifti.Int16, 16, raw(unsafe.Pointer(unsafe.SliceData(i16)), 2*len(i16))), true},
		{"float32", write("f32.nii.gz", nifti.Float32, 32, raw(unsafe.Pointer(unsafe.SliceData(f32)), 4*len(f32))), true},
		{"uint16", write("u16.nii.gz", nifti.Uint16, 16, raw(unsafe.Pointer(unsafe.SliceData(u16)), 2*len(u16))), false},
	}, i16
}

// decodeThreeWays decodes path on one thread (streaming), then on four into a buffer with
// headroom and into one without, and returns the volumes, whether each was inflated into its
// buffer, and each decode's timing rows (slabs of 16).
func decodeThreeWays(t *testing.T, path string) (vols [3]model.Volume, into [3]bool, rows [3][]timing.Row) {
	t.Helper()
	for i, threads := range []int{1, 4, 4} {
		r := testRunner(16, threads)
		csv := filepath.Join(t.TempDir(), "timings.csv")
		f, err := timing.CreateCSV[timing.Row](csv)
		if err != nil {
			t.Fatal(err)
		}
		r.rec.tel.Timings = f
		buf := hostmem.NewBuffer(nil, inputHeadroom)
		if i == 2 {
			buf = hostmem.NewBuffer(nil, 0)
		}
		vols[i], into[i] = decodeInto(t, r, path, buf)
		f.Close()
		if rows[i], err = timing.ReadRows(csv); err != nil {
			t.Fatal(err)
		}
	}
	return vols, into, rows
}
