package nifti

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"voxpipe/internal/testexec"
)

func randomBytes(rng *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

// mostlyZero is background with a few label runs, like a mask.
func mostlyZero(rng *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := 0; i < n; {
		run := rng.IntN(4000) + 1
		if rng.IntN(5) == 0 {
			v := byte(rng.IntN(4))
			for k := i; k < min(n, i+run); k++ {
				b[k] = v
			}
		}
		i += run
	}
	return b
}

// gunzipStd inflates a gzip file with the standard library and checks it is one member with
// the header blockGzip promises.
func gunzipStd(t *testing.T, gz []byte, level int) []byte {
	t.Helper()
	r, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		t.Fatalf("gzip header: %v", err)
	}
	r.Multistream(false)
	got, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("inflate: %v", err)
	}
	if rest, _ := io.ReadAll(r); len(rest) != 0 {
		t.Fatalf("more than one member")
	}
	if gz[3] != 0 || !bytes.Equal(gz[4:8], []byte{0, 0, 0, 0}) || gz[9] != 255 {
		t.Errorf("header % x: want FLG 0, MTIME 0, OS 255", gz[:10])
	}
	xfl := map[int]byte{1: 4, 9: 2}[level]
	if gz[8] != xfl {
		t.Errorf("level %d: XFL %d, want %d", level, gz[8], xfl)
	}
	return got
}

// writePieces writes data to z in pieces cut by cuts (offsets, any order, repeats allowed).
func writePieces(t *testing.T, z *blockGzip, data []byte, cuts []int) {
	t.Helper()
	at := 0
	for _, c := range append(cuts, len(data)) {
		c = max(at, min(c, len(data)))
		if n, err := z.Write(data[at:c]); err != nil || n != c-at {
			t.Fatalf("Write(%d bytes) = %d, %v", c-at, n, err)
		}
		at = c
	}
}

// TestBlockGzipRoundTrip: every level, sizes around the block size, random and mostly-zero
// data, written whole and in pieces; compress/gzip must read back exactly the input. Every
// level runs with a 4 KiB block; the real block size runs at level 1, and at levels 0 and 9 for
// several blocks of mostly-zero data (the race detector makes more slow).
func TestBlockGzipRoundTrip(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(3, 4))
	for _, bs := range []int{4096, gzipBlockSize} {
		sizes := []int{0, 1, bs - 1, bs, bs + 1, 5*bs + 7}
		if bs == gzipBlockSize {
			sizes[5] = 3*bs + 7
		}
		for _, size := range sizes {
			for _, kind := range []string{"random", "mostly-zero"} {
				var data []byte
				if kind == "random" {
					data = randomBytes(rng, size)
				} else {
					data = mostlyZero(rng, size)
				}
				for level := 0; level <= 9; level++ {
					if bs == gzipBlockSize && level != 1 && (size < 3*bs || kind == "random" || level != 0 && level != 9) {
						continue
					}
					for _, workers := range []int{1, 3} {
						if bs == gzipBlockSize && workers == 1 {
							continue
						}
						name := fmt.Sprintf("bs=%d/size=%d/%s/level=%d/workers=%d", bs, size, kind, level, workers)
						cutSets := [][]int{nil, {0, 0, 1, bs / 2, bs/2 + 1, 2 * bs, 2*bs + 3}, randomCuts(rng, size, 9)}
						if bs == gzipBlockSize {
							cutSets = cutSets[1:]
						}
						var first []byte // the same bytes whatever the writes' sizes
						for ci, cuts := range cutSets {
							z, err := newBlockGzip(level, workers, bs)
							if err != nil {
								t.Fatal(err)
							}
							var out bytes.Buffer
							z.reset(&out)
							writePieces(t, z, data, cuts)
							if err := z.Close(); err != nil {
								t.Fatalf("%s cuts %d: Close: %v", name, ci, err)
							}
							if got := gunzipStd(t, out.Bytes(), level); !bytes.Equal(got, data) {
								t.Fatalf("%s cuts %d: %d bytes back, want %d, equal prefix %d", name, ci, len(got), len(data), commonPrefix(got, data))
							}
							if ci == 0 {
								first = out.Bytes()
							} else if !bytes.Equal(out.Bytes(), first) {
								t.Fatalf("%s cuts %d: the file differs from cuts 0's (equal prefix %d): its bytes depend on the writes' sizes",
									name, ci, commonPrefix(out.Bytes(), first))
							}
						}
					}
				}
			}
		}
	}
}

func randomCuts(rng *rand.Rand, size, n int) []int {
	cuts := make([]int, n)
	at := 0
	for i := range cuts {
		at += rng.IntN(size/n + 2)
		cuts[i] = at
	}
	return cuts
}

func commonPrefix(a, b []byte) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

// TestBlockGzipDoesNotRetain: once Write has returned, the caller's buffer is its own again;
// overwriting it must not change the file (big writes are read in place, then released).
func TestBlockGzipDoesNotRetain(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(5, 6))
	const bs = 8192
	for _, workers := range []int{1, 2, 5} {
		z, _ := newBlockGzip(1, workers, bs)
		var out bytes.Buffer
		z.reset(&out)
		var want []byte
		buf := make([]byte, 23*bs+100)
		for range 20 {
			n := rng.IntN(len(buf) + 1)
			copy(buf, mostlyZero(rng, n))
			want = append(want, buf[:n]...)
			if _, err := z.Write(buf[:n]); err != nil {
				t.Fatal(err)
			}
			for i := range buf {
				buf[i] = 0xee
			}
		}
		if err := z.Close(); err != nil {
			t.Fatal(err)
		}
		if got := gunzipStd(t, out.Bytes(), 1); !bytes.Equal(got, want) {
			t.Fatalf("workers %d: data changed after Write returned (equal prefix %d of %d)", workers, commonPrefix(got, want), len(want))
		}
	}
}

// TestBlockGzipReuse: one blockGzip writes several files in turn, as the free list reuses them,
// including after an abort and after a failed write.
func TestBlockGzipReuse(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(7, 8))
	z, _ := newBlockGzip(6, 3, 4096)
	for i := range 12 {
		data := mostlyZero(rng, rng.IntN(40000))
		var out bytes.Buffer
		switch i % 3 {
		case 1: // aborted half way
			z.reset(&out)
			z.Write(data[:len(data)/2])
			z.Abort()
			if _, err := z.Write(data); err == nil {
				t.Fatal("Write after Abort succeeded")
			}
			if err := z.Close(); err == nil {
				t.Fatal("Close after Abort succeeded")
			}
		case 2: // failing output
			z.reset(&failingWriter{after: 100})
			z.Write(data)
			if err := z.Close(); err == nil {
				t.Fatal("Close on a failing writer succeeded")
			}
		default:
			z.reset(&out)
			writePieces(t, z, data, randomCuts(rng, len(data), 5))
			if err := z.Close(); err != nil {
				t.Fatal(err)
			}
			if got := gunzipStd(t, out.Bytes(), 6); !bytes.Equal(got, data) {
				t.Fatalf("file %d differs", i)
			}
		}
	}
}

// TestBlockGzipErrors: the first write error wins and comes back from Write or Close; nothing
// is written after it; no goroutine outlives Close or Abort, error or not.
func TestBlockGzipErrors(t *testing.T) {
	// In a bubble, so that stableGoroutines can wait for the compressor's goroutines.
	synctest.Test(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(9, 10))
		data := randomBytes(rng, 50*4096)
		base, _ := bubbleGoroutines()
		for _, after := range []int{0, 5, 4096, 20 * 4096, 40 * 4096} {
			for _, abort := range []bool{false, true} {
				fw := &countingFailer{after: after}
				z, _ := newBlockGzip(0, 4, 4096)
				z.reset(fw)
				var werr error
				for at := 0; at < len(data) && werr == nil; at += 10000 {
					_, werr = z.Write(data[at:min(len(data), at+10000)])
				}
				var cerr error
				if abort {
					z.Abort()
				} else {
					cerr = z.Close()
				}
				if !abort && cerr == nil {
					t.Errorf("after %d: Close succeeded", after)
				}
				for _, err := range []error{werr, cerr} {
					if err != nil && !strings.Contains(err.Error(), "disk full") {
						t.Errorf("after %d: error %v is not the write error", after, err)
					}
				}
				if fw.callsAfterError > 0 {
					t.Errorf("after %d: %d writes after the first error", after, fw.callsAfterError)
				}
				stableGoroutines(t, base)
			}
		}
		// Abort with blocks in flight, and Close/Abort repeated.
		for range 20 {
			z, _ := newBlockGzip(9, 4, 4096)
			z.reset(io.Discard)
			z.Write(data)
			z.Abort()
			z.Abort()
			z.Close()
			stableGoroutines(t, base)
		}
	})
}

type countingFailer struct {
	after           int
	failed          bool
	callsAfterError int
}

func (f *countingFailer) Write(p []byte) (int, error) {
	if f.failed {
		f.callsAfterError++
	}
	if f.after -= len(p); f.after < 0 {
		f.failed = true
		return 0, errors.New("disk full (simulated)")
	}
	return len(p), nil
}

// TestWriterLevels writes a volume of several blocks through Create/WriteSlices (header first,
// then 7-slice chunks, so block and write boundaries fall anywhere) at every level the writer
// accepts, and reads it back with compress/gzip and with this package's reader.
func TestWriterLevels(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(11, 12))
	dir := t.TempDir()
	nx, ny, nz := 300, 211, 22 // 1.3 MiB
	h := testHeader(Uint8, 1, binary.LittleEndian, int64(nx), int64(ny), int64(nz))
	data := mostlyZero(rng, nx*ny*nz)
	copy(data[len(data)/2:], randomBytes(rng, 300000))
	for level := DefaultLevel; level <= 9; level++ {
		path := filepath.Join(dir, fmt.Sprintf("l%d.nii.gz", level))
		w, err := Create(path, h, WriteOptions{Level: level, Workers: 3})
		if err != nil {
			t.Fatal(err)
		}
		for z := 0; z < nz; z += 7 {
			if err := w.WriteSlices(data[z*nx*ny : min(nz, z+7)*nx*ny]); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Commit(); err != nil {
			t.Fatal(err)
		}
		gz, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		want := level
		if level == DefaultLevel {
			want = defaultGzipLevel
		}
		raw := gunzipStd(t, gz, want)
		if len(raw) != dataStart1+len(data) || !bytes.Equal(raw[dataStart1:], data) {
			t.Fatalf("level %d: data differs", level)
		}
		if _, got, err := ReadUint8(path); err != nil || !bytes.Equal(got, data) {
			t.Fatalf("level %d: ReadUint8: %v", level, err)
		}
	}
}

// TestOtherInflaters has zlib (through Python's gzip and zlib modules: what nibabel and
// gzread use) and gzip(1) read files blockGzip wrote. Skipped where neither is installed.
func TestOtherInflaters(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(13, 14))
	dir := t.TempDir()
	type file struct {
		path string
		sum  string
	}
	var files []file
	for i, size := range []int{0, 1, gzipBlockSize - 1, gzipBlockSize, gzipBlockSize + 1, 2*gzipBlockSize + 5} {
		for _, level := range []int{0, 1, 9} {
			data := mostlyZero(rng, size)
			if i%2 == 1 {
				copy(data, randomBytes(rng, size/3))
			}
			z, _ := newBlockGzip(level, 3, gzipBlockSize)
			var out bytes.Buffer
			z.reset(&out)
			writePieces(t, z, data, randomCuts(rng, size, 3))
			if err := z.Close(); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, fmt.Sprintf("f%d_%d.gz", i, level))
			if err := os.WriteFile(path, out.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
			s := sha256.Sum256(data)
			files = append(files, file{path, hex.EncodeToString(s[:])})
		}
	}
	ran := false
	if py, err := exec.LookPath("python3"); err == nil {
		ran = true
		// One interpreter for all the files (its start dominates): a line per file.
		script := `import gzip, zlib, hashlib, sys
for p in sys.argv[1:]:
    b = open(p, 'rb').read()
    a = hashlib.sha256(gzip.decompress(b)).hexdigest()
    z = hashlib.sha256(zlib.decompress(b, 31)).hexdigest()
    with gzip.open(p, 'rb') as g:
        s = hashlib.sha256(g.read()).hexdigest()
    print(a, z, s)`
		args := []string{"-c", script}
		for _, f := range files {
			args = append(args, f.path)
		}
		out, err := testexec.Cmd(t, py, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("python3: %v\n%s", err, out)
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		if len(lines) != len(files) {
			t.Fatalf("python3: %d lines for %d files\n%s", len(lines), len(files), out)
		}
		for i, f := range files {
			if got := strings.Fields(lines[i]); len(got) != 3 || got[0] != f.sum || got[1] != f.sum || got[2] != f.sum {
				t.Errorf("python3 on %s: %s, want %s", f.path, lines[i], f.sum)
			}
		}
	}
	if gz, err := exec.LookPath("gzip"); err == nil {
		ran = true
		for _, f := range files {
			out, err := testexec.Cmd(t, gz, "-dc", f.path).Output()
			if err != nil {
				t.Fatalf("gzip -dc %s: %v", f.path, err)
			}
			if s := sha256.Sum256(out); hex.EncodeToString(s[:]) != f.sum {
				t.Errorf("gzip -dc %s: data differs", f.path)
			}
		}
	}
	if !ran {
		t.Skip("neither python3 nor gzip installed")
	}
}

var fuzzGzips = map[[3]int]*blockGzip{}

// FuzzBlockGzip: any data, cut anywhere, at any level and small block sizes, round-trips.
func FuzzBlockGzip(f *testing.F) {
	f.Add([]byte("hello, hello, hello"), []byte{3, 0, 7}, uint8(1), uint8(2), uint8(1))
	f.Add(make([]byte, 1000), []byte{200, 1, 1, 255}, uint8(9), uint8(3), uint8(0))
	f.Add([]byte{}, []byte{}, uint8(0), uint8(1), uint8(0))
	f.Fuzz(func(t *testing.T, data, cuts []byte, level, workers, bsSel uint8) {
		// At most ~8 blocks: resetting a level 7-9 compressor clears ~640 KiB of tables.
		bs := []int{1, 7, 64, 1000}[bsSel%4]
		for bs*8 < len(data) {
			bs *= 2
		}
		var offs []int
		at := 0
		for _, c := range cuts {
			at += int(c)
			offs = append(offs, at)
		}
		key := [3]int{int(level % 10), int(workers%4) + 1, bs}
		z := fuzzGzips[key] // reused, as the free list reuses them (and cheaper)
		if z == nil {
			var err error
			if z, err = newBlockGzip(key[0], key[1], key[2]); err != nil {
				t.Fatal(err)
			}
			fuzzGzips[key] = z
		}
		var out bytes.Buffer
		z.reset(&out)
		writePieces(t, z, data, offs)
		if err := z.Close(); err != nil {
			t.Fatal(err)
		}
		if got := gunzipStd(t, out.Bytes(), int(level%10)); !bytes.Equal(got, data) {
			t.Fatalf("round trip differs")
		}
		var whole bytes.Buffer // one write: the same bytes
		z.reset(&whole)
		if _, err := z.Write(data); err != nil {
			t.Fatal(err)
		}
		if err := z.Close(); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(whole.Bytes(), out.Bytes()) {
			t.Fatalf("the file depends on the writes' sizes (equal prefix %d of %d)", commonPrefix(whole.Bytes(), out.Bytes()), out.Len())
		}
	})
}
