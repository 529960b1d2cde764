package phantom

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

// fixture is the size of the shipped fixtures; most checks run at it.
var fixture = Params{NX: 96, NY: 96, NZ: 64}

func generate(t testing.TB, p Params) *Phantom {
	t.Helper()
	ph, err := Generate(p)
	if err != nil {
		t.Fatalf("Generate(%+v): %v", p, err)
	}
	return ph
}

// cache keeps the fixture-size phantoms that several tests look at (read only), each made
// once by its seed's sync.OnceValues even when the tests run in parallel.
var cache sync.Map // seed -> func() (*Phantom, error)

func fixturePhantom(t testing.TB, seed uint64) *Phantom {
	t.Helper()
	once, _ := cache.LoadOrStore(seed, sync.OnceValues(func() (*Phantom, error) {
		p := fixture
		p.Seed = seed
		return Generate(p)
	}))
	ph, err := once.(func() (*Phantom, error))()
	if err != nil {
		t.Fatalf("Generate(%+v seed %d): %v", fixture, seed, err)
	}
	return ph
}

func TestSameSeedAnyWorkersSameBytes(t *testing.T) {
	t.Parallel()
	p := Params{NX: 37, NY: 29, NZ: 23, Seed: 7, Workers: 1}
	want := generate(t, p)
	for _, workers := range []int{0, 1, 2, 3, 8, 64} {
		t.Run(fmt.Sprint("workers=", workers), func(t *testing.T) {
			p.Workers = workers
			got := generate(t, p)
			if !slices.Equal(got.Image, want.Image) {
				t.Error("image differs from the one-worker image")
			}
			if !slices.Equal(got.Truth, want.Truth) {
				t.Error("truth differs from the one-worker truth")
			}
			if !reflect.DeepEqual(got.Header, want.Header) {
				t.Error("header differs")
			}
		})
	}
}

func TestSeedsGiveDifferentPhantoms(t *testing.T) {
	t.Parallel()
	a := generate(t, Params{NX: 40, NY: 40, NZ: 24, Seed: 1})
	b := generate(t, Params{NX: 40, NY: 40, NZ: 24, Seed: 2})
	if slices.Equal(a.Truth, b.Truth) {
		t.Error("seeds 1 and 2 give the same truth")
	}
	same := 0
	for i := range a.Image {
		if a.Image[i] == b.Image[i] {
			same++
		}
	}
	if frac := float64(same) / float64(len(a.Image)); frac > 0.05 {
		t.Errorf("seeds 1 and 2 share %.1f%% of image values; the noise should differ", 100*frac)
	}
}

// TestGoldenDigests pins the exact output, so that a change of the generator (which would
// silently change every fixture and benchmark input) shows up here. Refresh with -update.
func TestGoldenDigests(t *testing.T) {
	if !*update {
		t.Parallel() // only reads testdata; -update rewrites it
	}
	cases := []Params{
		{NX: 96, NY: 96, NZ: 64, Seed: 1},
		{NX: 33, NY: 47, NZ: 19, Seed: 12345},
		{NX: 64, NY: 64, NZ: 64, Seed: SeedFor(99, 3)},
	}
	var out strings.Builder
	for _, p := range cases {
		ph := generate(t, p)
		fmt.Fprintf(&out, "%dx%dx%d seed=%d image=%x truth=%x\n", p.NX, p.NY, p.NZ, p.Seed,
			sha256.Sum256(ph.ImageBytes()), sha256.Sum256(ph.Truth))
	}
	golden := filepath.Join("testdata", "digests.golden")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(golden, []byte(out.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if out.String() != string(want) {
		t.Errorf("digests changed (run with -update if intended):\ngot:\n%swant:\n%s", out.String(), want)
	}
}

func TestSeedFor(t *testing.T) {
	t.Parallel()
	seen := map[uint64]string{}
	for _, base := range []uint64{0, 1, 2, math.MaxUint64} {
		for i := range 100 {
			s := SeedFor(base, i)
			if s != SeedFor(base, i) {
				t.Fatalf("SeedFor(%d, %d) is not deterministic", base, i)
			}
			key := fmt.Sprintf("base %d index %d", base, i)
			if prev, ok := seen[s]; ok {
				t.Errorf("%s and %s both give seed %d", prev, key, s)
			}
			seen[s] = key
		}
	}
}

func TestSizesScale(t *testing.T) {
	t.Parallel()
	small := newScene(Params{NX: 96, NY: 96, NZ: 64, Seed: 3})
	big := newScene(Params{NX: 512, NY: 512, NZ: 1000, Seed: 3})
	if len(big.lesions) <= 10*len(small.lesions) {
		t.Errorf("%d lesions at 512x512x1000 vs %d at 96x96x64: want many more", len(big.lesions), len(small.lesions))
	}
	// Radii 2-6 voxels at fixture size, each semi-axis within [0.8, 1.25] of the radius.
	for _, b := range small.lesions {
		if b.amin < 2*0.8-1e-9 || b.reach > 6*1.25*(1+b.wobMax)+pvHalf*zBlur+1+1e-9 {
			t.Errorf("fixture-size lesion with smallest semi-axis %.2f and reach %.2f: want radius 2-6", b.amin, b.reach)
		}
	}
	ratio := big.head.reach / small.head.reach
	if ratio < 5 {
		t.Errorf("head reach grows %.1fx from 96 to 512 voxels: it should fill the volume", ratio)
	}
}

func TestOddSizes(t *testing.T) {
	t.Parallel()
	for _, p := range []Params{{NX: 1, NY: 1, NZ: 1}, {NX: 3, NY: 5, NZ: 2}, {NX: 8, NY: 8, NZ: 8}, {NX: 200, NY: 16, NZ: 3}} {
		ph := generate(t, p)
		if len(ph.Image) != p.NX*p.NY*p.NZ || len(ph.Truth) != len(ph.Image) {
			t.Errorf("%+v: %d image and %d truth voxels", p, len(ph.Image), len(ph.Truth))
		}
		for _, l := range ph.Truth {
			if l > MaxLabel {
				t.Fatalf("%+v: label %d", p, l)
			}
		}
	}
}

func TestBadDims(t *testing.T) {
	t.Parallel()
	for _, p := range []Params{{NX: 0, NY: 1, NZ: 1}, {NX: 4, NY: -1, NZ: 4}, {NX: 1 << 40, NY: 1 << 40, NZ: 2}} {
		if _, err := Generate(p); !errors.Is(err, ErrBadDims) {
			t.Errorf("Generate(%+v) = %v, want ErrBadDims", p, err)
		}
	}
}

func TestParseDims(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in         string
		nx, ny, nz int
		ok         bool
	}{
		{"96x96x64", 96, 96, 64, true},
		{" 512X512x1000 ", 512, 512, 1000, true},
		{"96x96", 0, 0, 0, false},
		{"96x0x64", 0, 0, 0, false},
		{"axbxc", 0, 0, 0, false},
		{"1x2x3x4", 0, 0, 0, false},
	}
	for _, c := range cases {
		nx, ny, nz, err := ParseDims(c.in)
		if c.ok != (err == nil) || nx != c.nx || ny != c.ny || nz != c.nz {
			t.Errorf("ParseDims(%q) = %d, %d, %d, %v", c.in, nx, ny, nz, err)
		}
		if err != nil && !errors.Is(err, ErrBadDims) {
			t.Errorf("ParseDims(%q) error %v is not ErrBadDims", c.in, err)
		}
	}
}

func TestImageBytesLittleEndian(t *testing.T) {
	t.Parallel()
	ph := generate(t, Params{NX: 9, NY: 7, NZ: 5, Seed: 1})
	want := make([]byte, 2*len(ph.Image))
	for i, v := range ph.Image {
		binary.LittleEndian.PutUint16(want[2*i:], uint16(v))
	}
	if !bytes.Equal(ph.ImageBytes(), want) {
		t.Error("ImageBytes is not the little-endian image")
	}
}
