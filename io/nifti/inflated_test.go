package nifti

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// inflateAlways lets WithInflateThreads take files of any size.
func inflateAlways(t testing.TB) {
	old := minParallelGzip
	minParallelGzip = 0
	t.Cleanup(func() { minParallelGzip = old })
}

// With WithInflateThreads, gzipped volumes are inflated whole at Open and read by position
// like uncompressed ones; every value equals the streaming decoder's, for single files and
// pairs, both byte orders, a scaled file and a volume of a 4D file.
func TestInflateThreadsMatchesStreaming(t *testing.T) {
	inflateAlways(t)
	type tc struct {
		dt      DataType
		order   binary.ByteOrder
		ext     string
		nt, vol int
	}
	cases := []tc{
		{Int16, binary.LittleEndian, ".nii.gz", 1, 0},
		{Float64, binary.BigEndian, ".nii.gz", 1, 0},
		{Int16, binary.BigEndian, ".hdr.gz", 1, 0},
		{Float32, binary.LittleEndian, ".img.gz", 1, 0},
		{Uint16, binary.LittleEndian, ".nii.gz", 2, 1},
	}
	const nx, ny, nz = 61, 47, 19
	for _, c := range cases {
		t.Run(fmt.Sprintf("%s_%s%s_vol%dof%d", c.dt, orderName(c.order), c.ext, c.vol, c.nt), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "v"+c.ext)
			dims := []int64{nx, ny, nz}
			if c.nt > 1 {
				dims = append(dims, int64(c.nt))
			}
			h := testHeader(c.dt, 1, c.order, dims...)
			h.SclSlope, h.SclInter = 1.5, -3
			if err := Write(path, h, formulaData(c.dt, nx, ny, nz, c.nt), DefaultWriteOptions()); err != nil {
				t.Fatal(err)
			}
			var opts []OpenOption
			if c.nt > 1 {
				opts = append(opts, WithVolume(c.vol))
			}
			r, err := Open(path, append(opts, WithInflateThreads(4))...)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			if !r.Seekable() {
				t.Fatal("inflated data not Seekable")
			}
			if slope, inter := r.Scaling(); slope != 1.5 || inter != -3 {
				t.Errorf("Scaling %v %v", slope, inter)
			}
			want := readSeq(t, path, opts, c.dt.Size(), (*Reader).ReadSlicesRaw) // streaming
			if raw := readAt(t, r, 4, c.dt.Size(), r.ReadSlicesRawAt); !bytes.Equal(raw, want) {
				t.Error("positional reads of the inflated file differ from the streaming read")
			}
			f32 := readAt(t, r, 3, 1, r.ReadSlicesFloat32At)
			if wantF := readSeq(t, path, opts, 1, (*Reader).ReadSlicesFloat32); !bytes.Equal(bytesOf(f32), bytesOf(wantF)) {
				t.Error("float32 values differ from the streaming read")
			}
			if seq := readSeq(t, path, append(opts, WithInflateThreads(4)), c.dt.Size(), (*Reader).ReadSlicesRaw); !bytes.Equal(seq, want) {
				t.Error("the sequential API on the inflated file differs from the streaming read")
			}
			r.Close()
			if _, err := r.ReadSlicesRawAt(make([]byte, nx*ny*c.dt.Size()), 0, 1); err == nil {
				t.Error("read after Close succeeded")
			}
		})
	}
}

// Files the parallel inflate does not take, or fails on, stream as before: a file of two gzip
// members reads correctly, a damaged one fails with ErrCorrupt or ErrTruncated as it does
// without the option, and small files are left to the streaming decoder.
func TestInflateThreadsFallsBack(t *testing.T) {
	const nx, ny, nz = 40, 30, 12
	data := formulaData(Int16, nx, ny, nz, 1)
	plain := filepath.Join(t.TempDir(), "v.nii")
	if err := Write(plain, testHeader(Int16, 1, binary.LittleEndian, nx, ny, nz), data, WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	file, err := os.ReadFile(plain)
	if err != nil {
		t.Fatal(err)
	}
	member := func(p []byte) []byte {
		var b bytes.Buffer
		w := gzip.NewWriter(&b)
		w.Write(p)
		w.Close()
		return b.Bytes()
	}
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	two := write("two.nii.gz", append(member(file[:len(file)/3]), member(file[len(file)/3:])...))
	whole := member(file)
	crc := bytes.Clone(whole)
	crc[len(crc)-8] ^= 0xff
	badCRC := write("crc.nii.gz", crc)

	t.Run("small", func(t *testing.T) {
		r, err := Open(write("small.nii.gz", whole), WithInflateThreads(8))
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		if r.Seekable() {
			t.Error("a file below minParallelGzip was inflated whole")
		}
	})
	inflateAlways(t)
	t.Run("4D, three volumes", func(t *testing.T) {
		p := filepath.Join(dir, "4d.nii.gz")
		if err := Write(p, testHeader(Int16, 1, binary.LittleEndian, nx, ny, nz, 3), formulaData(Int16, nx, ny, nz, 3), DefaultWriteOptions()); err != nil {
			t.Fatal(err)
		}
		r, err := Open(p, WithVolume(1), WithInflateThreads(4))
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		if r.Seekable() {
			t.Error("a three-volume series was inflated whole")
		}
	})
	t.Run("two members", func(t *testing.T) {
		got := readSeq(t, two, []OpenOption{WithInflateThreads(4)}, 2, (*Reader).ReadSlicesRaw)
		if !bytes.Equal(got, data) {
			t.Error("values differ")
		}
	})
	t.Run("bad crc", func(t *testing.T) {
		for _, opts := range [][]OpenOption{nil, {WithInflateThreads(4)}} {
			r, err := Open(badCRC, opts...)
			if err == nil {
				_, err = r.ReadSlicesRaw(make([]byte, len(data)), nz)
				r.Close()
			}
			wantErr(t, err, ErrCorrupt, badCRC)
		}
	})
}

// A done context stops Open while it inflates a file whole, with the context's cause, rather
// than sending the file down the streaming path.
func TestInflateThreadsContext(t *testing.T) {
	inflateAlways(t)
	path := writeFormula(t, "v.nii.gz", Int16, 40, 30, 12, DefaultWriteOptions())
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r, err := Open(path, WithInflateThreads(4), WithContext(ctx))
	if err == nil {
		r.Close()
	}
	wantErr(t, err, context.Canceled, path)
	r, err = Open(path, WithContext(ctx)) // nothing to inflate whole: the context is not used
	if err != nil {
		t.Fatalf("streaming open with a done context: %v", err)
	}
	r.Close()
}

// WithInflateInto puts the voxels, as stored, into the caller's memory after the header's bytes;
// it is asked only for one-volume files, may decline, and a damaged file streams (and fails)
// as without it, never reporting InflatedInto.
func TestInflateInto(t *testing.T) {
	inflateAlways(t)
	for _, c := range []struct {
		dt    DataType
		order binary.ByteOrder
	}{{Int16, binary.LittleEndian}, {Float32, binary.BigEndian}, {Uint8, binary.LittleEndian}} {
		t.Run(fmt.Sprintf("%s_%s", c.dt, orderName(c.order)), func(t *testing.T) { inflateIntoType(t, c.dt, c.order) })
	}
	path := writeFormula(t, "v.nii.gz", Int16, intoNX, intoNY, intoNZ, DefaultWriteOptions())
	t.Run("declined", func(t *testing.T) {
		r, err := Open(path, WithInflateThreads(4), WithInflateInto(func(int, int64, DataType, bool) []byte { return nil }))
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		if r.InflatedInto() || !r.Seekable() {
			t.Errorf("declined: InflatedInto %v, Seekable %v (want false, true: inflated into its own memory)", r.InflatedInto(), r.Seekable())
		}
	})
	t.Run("wrong size", func(t *testing.T) {
		r, err := Open(path, WithInflateThreads(4), WithInflateInto(func(prefix int, n int64, _ DataType, _ bool) []byte {
			return make([]byte, int64(prefix)+n-1)
		}))
		if err == nil {
			r.Close()
			t.Fatal("a slice of the wrong size was accepted")
		}
	})
	t.Run("4D", func(t *testing.T) {
		p := filepath.Join(t.TempDir(), "4d.nii.gz")
		if err := Write(p, testHeader(Int16, 1, binary.LittleEndian, intoNX, intoNY, intoNZ, 2), formulaData(Int16, intoNX, intoNY, intoNZ, 2), DefaultWriteOptions()); err != nil {
			t.Fatal(err)
		}
		r, err := Open(p, WithVolume(1), WithInflateThreads(4), WithInflateInto(func(int, int64, DataType, bool) []byte {
			t.Error("asked for memory for a volume of a 4D file")
			return nil
		}))
		if err != nil {
			t.Fatal(err)
		}
		r.Close()
	})
	t.Run("damaged", func(t *testing.T) { inflateIntoDamaged(t, path) })
}

// The volume TestInflateInto inflates.
const intoNX, intoNY, intoNZ = 37, 29, 11

// inflateIntoType: a volume of dt in order is inflated into the caller's memory, asked for
// once with the right size and type, holding the voxels as stored; positional reads match
// the streaming read; Close leaves the memory alone.
func inflateIntoType(t *testing.T, dt DataType, order binary.ByteOrder) {
	const nx, ny, nz = intoNX, intoNY, intoNZ
	path := filepath.Join(t.TempDir(), "v.nii.gz")
	h := testHeader(dt, 1, order, nx, ny, nz)
	if err := Write(path, h, formulaData(dt, nx, ny, nz, 1), DefaultWriteOptions()); err != nil {
		t.Fatal(err)
	}
	want := readSeq(t, path, nil, dt.Size(), (*Reader).ReadSlicesRaw)
	var mem []byte
	calls := 0
	r, err := Open(path, WithInflateThreads(4), WithInflateInto(func(prefix int, dataBytes int64, asked DataType, swapped bool) []byte {
		calls++
		if asked != dt || swapped != (order != hostOrder) || dataBytes != int64(len(want)) || prefix < sizeofHdr1 {
			t.Errorf("asked for prefix %d, %d bytes of %s, swapped %v", prefix, dataBytes, asked, swapped)
		}
		mem = make([]byte, int64(prefix)+dataBytes)
		return mem
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if calls != 1 || !r.InflatedInto() {
		t.Fatalf("into called %d times, InflatedInto %v", calls, r.InflatedInto())
	}
	stored := bytes.Clone(want) // ReadSlicesRaw gives host order
	if order != hostOrder {
		for i := 0; i < len(stored); i += dt.Size() {
			slices.Reverse(stored[i : i+dt.Size()])
		}
	}
	if got := mem[len(mem)-len(want):]; !bytes.Equal(got, stored) {
		t.Error("the caller's memory does not hold the voxels as stored")
	}
	if raw := readAt(t, r, 3, dt.Size(), r.ReadSlicesRawAt); !bytes.Equal(raw, want) {
		t.Error("positional reads differ from the streaming read")
	}
	r.Close()
	if mem[len(mem)-1] != stored[len(stored)-1] {
		t.Error("Close touched the caller's memory")
	}
}

// inflateIntoDamaged: a file failing its CRC, inflated into the caller's memory, fails with
// ErrCorrupt (at Open or at the read) and does not report InflatedInto.
func inflateIntoDamaged(t *testing.T, path string) {
	const nx, ny, nz = intoNX, intoNY, intoNZ
	gz, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	gz[len(gz)-8] ^= 0xff // the trailer's CRC
	bad := filepath.Join(t.TempDir(), "bad.nii.gz")
	if err := os.WriteFile(bad, gz, 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := Open(bad, WithInflateThreads(4), WithInflateInto(func(prefix int, n int64, _ DataType, _ bool) []byte {
		return make([]byte, int64(prefix)+n)
	}))
	if err == nil {
		if r.InflatedInto() {
			t.Error("a file failing its CRC reported InflatedInto")
		}
		_, err = r.ReadSlicesRaw(make([]byte, nx*ny*nz*2), nz)
		r.Close()
	}
	wantErr(t, err, ErrCorrupt, bad)
}

// testFile is a dataFile over bytes whose positional reads can be made to fail.
type testFile struct {
	*bytes.Reader
	failAt int64 // reads that cover this offset fail (-1: none)
}

var errTestRead = errors.New("test: read failed")

func (f *testFile) ReadAt(p []byte, off int64) (int, error) {
	if f.failAt >= off && f.failAt < off+int64(len(p)) {
		return 0, errTestRead
	}
	return f.Reader.ReadAt(p, off)
}

func (f *testFile) Close() error { return nil }

// readGzipWhole, for files that cannot be mapped, gives the file's bytes, and fails when a
// read does.
func TestReadGzipWhole(t *testing.T) {
	t.Parallel()
	data := make([]byte, 20<<20+12345)
	for i := range data {
		data[i] = byte(i * 7 / 3)
	}
	size := int64(len(data))
	b, err := readGzipWhole(&testFile{bytes.NewReader(data), -1}, size, 3)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b, data) {
		t.Error("bytes differ from the file's")
	}
	if _, err := readGzipWhole(&testFile{bytes.NewReader(data), 9<<20 + 5}, size, 2); !errors.Is(err, errTestRead) {
		t.Errorf("a read failing: %v, want its error", err)
	}
}

// A .nii.gz cut short by another process while it is inflated from its mapping streams
// instead, and fails as a short file does: no crash (the mapping's SIGBUS is recovered).
func TestInflateMappedFileCutShort(t *testing.T) {
	inflateAlways(t)
	// Stored blocks, 4 MiB: a third of it is more than Open's 1 MiB read buffer holds.
	const nx, ny, nz = 256, 256, 32
	path := writeFormula(t, "v.nii.gz", Int16, nx, ny, nz, WriteOptions{Level: 0})
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	mapped := false
	afterGzipMapped = func(p string) {
		mapped = true
		if err := os.Truncate(p, st.Size()/3); err != nil {
			t.Error(err)
		}
	}
	t.Cleanup(func() { afterGzipMapped = nil })
	r, err := Open(path, WithInflateThreads(4))
	if err == nil {
		_, err = r.ReadSlicesRaw(make([]byte, nx*ny*nz*2), nz)
		r.Close()
	}
	if !mapped {
		t.Skip("the file was not mapped (no mmap here)")
	}
	if err == nil {
		t.Fatal("a file cut short while inflated read without error")
	}
	if !errors.Is(err, ErrTruncated) && !errors.Is(err, ErrCorrupt) {
		t.Errorf("got %v, want ErrTruncated or ErrCorrupt", err)
	}
}
