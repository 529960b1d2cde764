package nifti

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"testing"
	"unsafe"

	"github.com/klauspost/compress/gzip"
)

const benchN = 256

// smoothVolume is a 256^3 int16 volume shaped like an MR head (smooth tissue intensities plus
// a little noise), so gzip ratios and inflate speed are realistic.
func smoothVolume() []int16 {
	v := make([]int16, benchN*benchN*benchN)
	seed := uint32(1)
	i := 0
	for z := range benchN {
		for y := range benchN {
			for x := range benchN {
				dx, dy, dz := float64(x-128)/100, float64(y-128)/110, float64(z-128)/90
				r := dx*dx + dy*dy + dz*dz
				val := 0.0
				if r < 1 {
					val = 600 + 300*math.Sin(float64(x)/9)*math.Cos(float64(y)/11) + 200*math.Sin(float64(z)/7)
				}
				seed = seed*1664525 + 1013904223
				v[i] = int16(val) + int16(seed>>28) - 8
				i++
			}
		}
	}
	return v
}

// BenchmarkRead streams a 256^3 int16 volume in 16-slice slabs; MB/s counts stored bytes
// (32 MiB per volume). The files were just written, so they are in the page cache.
func BenchmarkRead(b *testing.B) {
	dir := b.TempDir()
	data := bytesOf(smoothVolume())
	h := testHeader(Int16, 1, binary.LittleEndian, benchN, benchN, benchN)
	for _, ext := range []string{".nii", ".nii.gz"} {
		path := filepath.Join(dir, "vol"+ext)
		if err := Write(path, h, data, WriteOptions{Level: 6}); err != nil {
			b.Fatal(err)
		}
		st, _ := os.Stat(path)
		b.Logf("%s: %d bytes on disk (%.2fx)", ext, st.Size(), float64(len(data))/float64(st.Size()))
	}
	const slab = 16
	sliceVoxels := benchN * benchN
	raw := make([]byte, slab*sliceVoxels*2)
	i16 := make([]int16, slab*sliceVoxels)
	f32 := make([]float32, slab*sliceVoxels)
	apis := []struct {
		name string
		read func(r *Reader) (int, error)
	}{
		{"raw", func(r *Reader) (int, error) { return r.ReadSlicesRaw(raw, slab) }},
		{"int16", func(r *Reader) (int, error) { return r.ReadSlicesInt16(i16, slab) }},
		{"float32", func(r *Reader) (int, error) { return r.ReadSlicesFloat32(f32, slab) }},
	}
	for _, ext := range []string{".nii", ".nii.gz"} {
		for _, api := range apis {
			b.Run(fmt.Sprintf("%s/%s", ext[1:], api.name), func(b *testing.B) {
				b.SetBytes(int64(len(data)))
				defer reportCPU(b, len(data))()
				for b.Loop() {
					r, err := Open(filepath.Join(dir, "vol"+ext))
					if err != nil {
						b.Fatal(err)
					}
					for {
						if _, err := api.read(r); err == io.EOF {
							break
						} else if err != nil {
							b.Fatal(err)
						}
					}
					r.Close()
				}
			})
		}
		b.Run(ext[1:]+"/ReadFloat32-whole", func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			defer reportCPU(b, len(data))()
			for b.Loop() {
				if _, _, err := ReadFloat32(filepath.Join(dir, "vol"+ext)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// labelMask is a 256^3 segmentation-like mask: background with three nested blobs.
func labelMask() []byte {
	m := make([]byte, benchN*benchN*benchN)
	i := 0
	for z := range benchN {
		for y := range benchN {
			for x := range benchN {
				dx, dy, dz := float64(x-128)/90, float64(y-120)/100, float64(z-128)/80
				r := dx*dx + dy*dy + dz*dz + 0.05*math.Sin(float64(x+y)/5)
				switch {
				case r < 0.1:
					m[i] = 3
				case r < 0.4:
					m[i] = 2
				case r < 1:
					m[i] = 1
				}
				i++
			}
		}
	}
	return m
}

// BenchmarkWriteMask writes a 256^3 uint8 mask (16 MiB) atomically, fsync included; MB/s
// counts uncompressed bytes.
func BenchmarkWriteMask(b *testing.B) {
	dir := b.TempDir()
	mask := labelMask()
	h := MaskHeader(testHeader(Int16, 1, binary.LittleEndian, benchN, benchN, benchN), 3, "bench")
	for _, c := range []struct {
		name string
		ext  string
		opt  WriteOptions
	}{
		{"nii", ".nii", WriteOptions{}},
		{"nii.gz/level=0", ".nii.gz", WriteOptions{Level: 0}},
		{"nii.gz/level=1(default)", ".nii.gz", DefaultWriteOptions()},
		{"nii.gz/level=6", ".nii.gz", WriteOptions{Level: 6}},
		{"nii.gz/level=1/workers=1", ".nii.gz", WriteOptions{Level: 1, Workers: 1}},
		{"nii.gz/level=6/workers=1", ".nii.gz", WriteOptions{Level: 6, Workers: 1}},
	} {
		b.Run(c.name, func(b *testing.B) {
			path := filepath.Join(dir, "mask"+c.ext)
			b.SetBytes(int64(len(mask)))
			defer reportCPU(b, len(mask))()
			for b.Loop() {
				if err := Write(path, h, mask, c.opt); err != nil {
					b.Fatal(err)
				}
			}
			st, _ := os.Stat(path)
			b.ReportMetric(float64(len(mask))/float64(st.Size()), "ratio")
		})
	}
}

// reportCPU starts measuring process CPU time; the returned func reports "cpu-MB/s", the bytes
// per op over CPU seconds per op (read-ahead and compression goroutines and GC included).
func reportCPU(b *testing.B, bytesPerOp int) func() {
	start := processCPU()
	return func() {
		if used := processCPU() - start; used > 0 && b.N > 0 {
			b.ReportMetric(float64(bytesPerOp)*float64(b.N)/used.Seconds()/1e6, "cpu-MB/s")
		}
	}
}

// largeMask is a 512x512x1000 uint8 mask (250 MiB), mostly background with three nested,
// slightly wavy ellipsoids: the shape of the masks a batch of 512x512x1000 volumes writes.
// Rows are filled by spans, so building it takes well under a second.
func largeMask() (data []byte, nx, ny, nz int) {
	nx, ny, nz = 512, 512, 1000
	data = make([]byte, nx*ny*nz)
	for z := range nz {
		for y := range ny {
			row := data[(z*ny+y)*nx:][:nx]
			dy, dz := float64(y-250)/200, float64(z-480)/380
			wobble := 0.04 * math.Sin(float64(y)/7+float64(z)/11)
			for _, s := range []struct {
				r2    float64
				label byte
			}{{0.9, 1}, {0.35, 2}, {0.08, 3}} {
				rest := s.r2 + wobble - dy*dy - dz*dz
				if rest <= 0 {
					continue
				}
				half := int(math.Sqrt(rest) * 210)
				lo, hi := max(0, 260-half), min(nx, 260+half)
				for x := lo; x < hi; x++ {
					row[x] = s.label
				}
			}
		}
	}
	return data, nx, ny, nz
}

// BenchmarkWriteMaskLarge writes the 512x512x1000 mask of largeMask as .nii.gz at the default
// level, in one call (Write) and in 32-plane chunks as the pipeline's writer does (slab 32);
// MB/s counts uncompressed bytes, fsync included.
func BenchmarkWriteMaskLarge(b *testing.B) {
	mask, nx, ny, nz := largeMask()
	h := MaskHeader(testHeader(Int16, 1, binary.LittleEndian, int64(nx), int64(ny), int64(nz)), 3, "bench")
	path := filepath.Join(b.TempDir(), "mask.nii.gz")
	chunk := 32 * nx * ny
	for _, c := range []struct {
		name  string
		write func() error
	}{
		{"whole", func() error { return Write(path, h, mask, DefaultWriteOptions()) }},
		{"chunks-of-32-planes", func() error {
			w, err := Create(path, h, DefaultWriteOptions())
			if err != nil {
				return err
			}
			for i := 0; i < len(mask); i += chunk {
				if err := w.WriteSlices(mask[i:min(i+chunk, len(mask))]); err != nil {
					w.Abort()
					return err
				}
			}
			return w.Commit()
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(mask)))
			defer reportCPU(b, len(mask))()
			for b.Loop() {
				if err := c.write(); err != nil {
					b.Fatal(err)
				}
			}
			st, _ := os.Stat(path)
			b.ReportMetric(float64(len(mask))/float64(st.Size()), "ratio")
		})
	}
}

// BenchmarkReadAhead measures what the read-ahead (prefetch.go) buys the sequential read of a
// .nii.gz, the path of gzipped volumes not inflated whole (one read thread, files under
// minParallelGzip, series of more than two volumes): the pipeline's read loop, slab by slab,
// each slab summed (as the statistics do) after it is read, through a Reader (inflate on the
// read-ahead goroutine, overlapping the sums) and inline (the same inflate on the caller's
// goroutine, no read-ahead). docs/perf.md has the figures:
//
//	go test -run '^$' -bench ReadAhead -count 5 ./io/nifti
func BenchmarkReadAhead(b *testing.B) {
	path := filepath.Join(b.TempDir(), "vol.nii.gz")
	data := bytesOf(smoothVolume())
	h := testHeader(Int16, 1, binary.LittleEndian, benchN, benchN, benchN)
	if err := Write(path, h, data, WriteOptions{Level: 6}); err != nil {
		b.Fatal(err)
	}
	hdr, err := ReadHeader(path)
	if err != nil {
		b.Fatal(err)
	}
	const slab = 16
	vox := make([]int16, slab*benchN*benchN)
	sum := func(v []int16) (s float64) {
		for _, x := range v {
			s += float64(x) * float64(x) // as the statistics' sum of squares
		}
		return s
	}
	b.Run("read-ahead", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			r, err := Open(path)
			if err != nil {
				b.Fatal(err)
			}
			for {
				n, err := r.ReadSlicesInt16(vox, slab)
				if err == io.EOF {
					break
				} else if err != nil {
					b.Fatal(err)
				}
				sum(vox[:n*benchN*benchN])
			}
			r.Close()
		}
	})
	b.Run("inline", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		raw := unsafe.Slice((*byte)(unsafe.Pointer(&vox[0])), 2*len(vox))
		for b.Loop() {
			f, err := os.Open(path)
			if err != nil {
				b.Fatal(err)
			}
			gz, err := gzip.NewReader(bufio.NewReaderSize(f, 1<<20))
			if err != nil {
				b.Fatal(err)
			}
			if _, err := io.CopyN(io.Discard, gz, hdr.VoxOffset); err != nil {
				b.Fatal(err)
			}
			for range benchN / slab {
				if _, err := io.ReadFull(gz, raw); err != nil {
					b.Fatal(err)
				}
				sum(vox)
			}
			f.Close()
		}
	})
}
