package main

import (
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"

	"voxpipe/internal/regular"
	"voxpipe/io/nifti"
	"voxpipe/phantom"
)

// ---- the foreign set ----

// vol is a foreign volume being made: int16 or float32 values, x fastest.
type vol struct {
	nx, ny, nz int
	mm         [3]float64
	i16        []int16
	f32        []float32
}

func newVol(nx, ny, nz int, mm [3]float64, float bool) *vol {
	v := &vol{nx: nx, ny: ny, nz: nz, mm: mm}
	if float {
		v.f32 = make([]float32, nx*ny*nz)
	} else {
		v.i16 = make([]int16, nx*ny*nz)
	}
	return v
}

// each calls f with every voxel's index and its position in mm from the volume's centre.
func (v *vol) each(f func(i int, x, y, z float64)) {
	for k := range v.nz {
		for j := range v.ny {
			for i := range v.nx {
				f((k*v.ny+j)*v.nx+i, (float64(i)-float64(v.nx-1)/2)*v.mm[0],
					(float64(j)-float64(v.ny-1)/2)*v.mm[1], (float64(k)-float64(v.nz-1)/2)*v.mm[2])
			}
		}
	}
}

func (v *vol) set(i int, val float64) {
	if v.f32 != nil {
		v.f32[i] = float32(val)
		return
	}
	v.i16[i] = int16(math.Max(math.MinInt16, math.Min(math.MaxInt16, math.Round(val))))
}

func (v *vol) write(path string) error {
	h := phantom.NewHeader(phantom.Params{NX: v.nx, NY: v.ny, NZ: v.nz})
	setSpacing(h, v.mm)
	h.Descrip = "voxpipe domaincal foreign volume"
	var data []byte
	if v.f32 != nil {
		h.Datatype, h.BitPix = nifti.Float32, 32
		data = make([]byte, 4*len(v.f32))
		for i, f := range v.f32 {
			binary.LittleEndian.PutUint32(data[4*i:], math.Float32bits(f))
		}
	} else {
		data = make([]byte, 2*len(v.i16))
		for i, s := range v.i16 {
			binary.LittleEndian.PutUint16(data[2*i:], uint16(s))
		}
	}
	return nifti.Write(path, h, data, nifti.DefaultWriteOptions())
}

// setSpacing gives a phantom header another voxel size, centred as phantom.NewHeader centres.
func setSpacing(h *nifti.Header, mm [3]float64) {
	n := [3]int{h.NX(), h.NY(), h.NZ()}
	var off [3]float64
	for a := range 3 {
		off[a] = -mm[a] * float64(n[a]-1) / 2
		h.PixDim[a+1] = mm[a]
	}
	h.QoffsetX, h.QoffsetY, h.QoffsetZ = off[0], off[1], off[2]
	h.SrowX = [4]float64{mm[0], 0, 0, off[0]}
	h.SrowY = [4]float64{0, mm[1], 0, off[1]}
	h.SrowZ = [4]float64{0, 0, mm[2], off[2]}
}

// rng is a small deterministic generator (splitmix64) with a normal deviate.
type rng struct{ s uint64 }

func (r *rng) u() float64 {
	r.s += 0x9e3779b97f4a7c15
	z := r.s
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return float64((z^z>>31)>>11) / (1 << 53)
}

func (r *rng) norm() float64 {
	return math.Sqrt(-2*math.Log(1-r.u())) * math.Cos(2*math.Pi*r.u())
}

func ellipsoid(x, y, z, a, b, c float64) float64 { return (x*x)/(a*a) + (y*y)/(b*b) + (z*z)/(c*c) }

// phantomScaled writes phantom seed with its header's voxel size replaced by mm: the same
// image, another species' size.
func phantomScaled(path string, nx, ny, nz int, seed uint64, mm [3]float64) error {
	ph, err := phantom.Generate(phantom.Params{NX: nx, NY: ny, NZ: nz, Seed: seed})
	if err != nil {
		return err
	}
	setSpacing(ph.Header, mm)
	return nifti.Write(path, ph.Header, ph.ImageBytes(), nifti.DefaultWriteOptions())
}

// phantomMapped writes phantom seed with each label's voxels given another intensity (mean,
// sd by label: background, tissue, fluid, lesion), e.g. Hounsfield units or a T2-like contrast.
func phantomMapped(path string, nx, ny, nz int, seed uint64, mean, sd [4]float64, float bool) error {
	ph, err := phantom.Generate(phantom.Params{NX: nx, NY: ny, NZ: nz, Seed: seed})
	if err != nil {
		return err
	}
	r := rng{seed}
	v := newVol(nx, ny, nz, [3]float64{ph.Header.PixDim[1], ph.Header.PixDim[2], ph.Header.PixDim[3]}, float)
	for i, l := range ph.Truth {
		v.set(i, mean[l]+sd[l]*r.norm())
	}
	return v.write(path)
}

// foreignSet is the foreign set in the order it is written: each volume's name (the file
// DIR/NAME.nii.gz) and the function that writes it.
var foreignSet = []struct {
	name string
	make func(path string) error
}{
	// CT of a head: air, skull, brain, CSF in Hounsfield units, at CT's usual voxel sizes.
	{"ct_head", ctHead},
	// The phantom's own anatomy in Hounsfield units (-1000 air, 40 tissue, 8 fluid, 70
	// lesions): head-shaped and head-sized, only the intensities are CT's.
	{"ct_phantom", ctPhantom},
	// A CT of the abdomen: body ellipse, fat, organs, spine, lungs.
	{"ct_abdomen", ctAbdomen},
	// T2-like contrast on the phantom's anatomy: fluid bright, lesions dark.
	{"t2_phantom", t2Phantom},
	// Shapes that are not heads, with MR-like intensities, at the phantoms' size and spacing.
	{"cube", cube},
	{"checkerboard", checkerboard},
	{"tubes", tubes},
	{"torus", torus},
	// Other species: a phantom head 10 mm across at 0.1 mm (a mouse brain), and one of
	// 2 m at 20 mm (a whale's head).
	{"mouse_brain", mouseBrain},
	{"whale_head", whaleHead},
	// Noise.
	{"noise_gauss", noiseGauss},
	{"noise_uniform", noiseUniform},
	{"noise_sparse", noiseSparse},
}

// ctHead writes the foreign volume ct_head.
func ctHead(path string) error {
	v := newVol(192, 192, 96, [3]float64{1.25, 1.25, 2}, false)
	r := rng{1}
	v.each(func(i int, x, y, z float64) {
		e := ellipsoid(x, y, z, 80, 95, 75)
		hu := -1000.0
		switch {
		case e < 0.8 && ellipsoid(x, y-10, z, 12, 25, 15) < 1:
			hu = 8 // ventricles
		case e < 0.8:
			hu = 35
		case e < 1:
			hu = 1100 // skull
		case e < 1.15:
			hu = 20 // scalp
		}
		v.set(i, hu+6*r.norm())
	})
	return v.write(path)
}

// ctPhantom writes the foreign volume ct_phantom.
func ctPhantom(path string) error {
	return phantomMapped(path, 96, 96, 64, 101, [4]float64{-1000, 40, 8, 70}, [4]float64{15, 5, 5, 5}, false)
}

// ctAbdomen writes the foreign volume ct_abdomen.
func ctAbdomen(path string) error {
	v := newVol(128, 96, 48, [3]float64{3, 3, 5}, false)
	r := rng{2}
	v.each(func(i int, x, y, z float64) {
		hu := -1000.0
		if e := ellipsoid(x, y, 0, 170, 120, 1); e < 1 {
			hu = -100 // fat
			switch {
			case ellipsoid(x, y+80, 0, 18, 18, 1) < 1:
				hu = 700 // spine
			case ellipsoid(x-70, y+10, z-60, 45, 60, 60) < 1 || ellipsoid(x+70, y+10, z-60, 45, 60, 60) < 1:
				hu = -850 // lungs
			case e < 0.75:
				hu = 50 // organs
			}
		}
		v.set(i, hu+10*r.norm())
	})
	return v.write(path)
}

// t2Phantom writes the foreign volume t2_phantom.
func t2Phantom(path string) error {
	return phantomMapped(path, 96, 96, 64, 102, [4]float64{0, 600, 1500, 300}, [4]float64{20, 30, 30, 30}, false)
}

// cube writes the foreign volume cube.
func cube(path string) error {
	v := newVol(96, 96, 64, mri, false)
	r := rng{3}
	v.each(func(i int, x, y, z float64) {
		val := 0.0
		if math.Abs(x) < 90 && math.Abs(y) < 90 && math.Abs(z) < 70 {
			val = 1000
		}
		v.set(i, val+40*r.norm())
	})
	return v.write(path)
}

// checkerboard writes the foreign volume checkerboard.
func checkerboard(path string) error {
	v := newVol(96, 96, 64, mri, false)
	r := rng{4}
	v.each(func(i int, x, y, z float64) {
		c := (int(math.Floor(x/20)) + int(math.Floor(y/20)) + int(math.Floor(z/20))) & 1
		v.set(i, 300+700*float64(c)+40*r.norm())
	})
	return v.write(path)
}

// tubes writes the foreign volume tubes: a bundle of bright rods, like vessels or bowel.
func tubes(path string) error {
	v := newVol(96, 96, 64, mri, false)
	r := rng{5}
	v.each(func(i int, x, y, z float64) {
		val := 50.0
		if d := math.Hypot(math.Mod(x+300, 30)-15, math.Mod(y+300, 30)-15); d < 6 {
			val = 1200
		}
		v.set(i, val+40*r.norm())
	})
	return v.write(path)
}

// torus writes the foreign volume torus.
func torus(path string) error {
	v := newVol(96, 96, 64, mri, false)
	r := rng{6}
	v.each(func(i int, x, y, z float64) {
		val := 0.0
		if d := math.Hypot(math.Hypot(x, y)-70, z); d < 35 {
			val = 1000
		}
		v.set(i, val+40*r.norm())
	})
	return v.write(path)
}

// mouseBrain writes the foreign volume mouse_brain.
func mouseBrain(path string) error {
	return phantomScaled(path, 128, 128, 96, 103, [3]float64{0.1, 0.1, 0.1})
}

// whaleHead writes the foreign volume whale_head.
func whaleHead(path string) error {
	return phantomScaled(path, 96, 96, 64, 104, [3]float64{20, 20, 24})
}

// noiseGauss writes the foreign volume noise_gauss.
func noiseGauss(path string) error {
	v := newVol(96, 96, 64, mri, true)
	r := rng{7}
	v.each(func(i int, _, _, _ float64) { v.set(i, 500+200*r.norm()) })
	return v.write(path)
}

// noiseUniform writes the foreign volume noise_uniform.
func noiseUniform(path string) error {
	v := newVol(96, 96, 64, mri, false)
	r := rng{8}
	v.each(func(i int, _, _, _ float64) { v.set(i, 2000*r.u()) })
	return v.write(path)
}

// noiseSparse writes the foreign volume noise_sparse: mostly dark, a few bright speckles.
func noiseSparse(path string) error {
	v := newVol(96, 96, 64, mri, false)
	r := rng{9}
	v.each(func(i int, _, _, _ float64) {
		val := 10 * math.Abs(r.norm())
		if r.u() < 0.02 {
			val = 1500
		}
		v.set(i, val)
	})
	return v.write(path)
}

// mri is the phantoms' voxel size (mm), which the shapes that are not heads take.
var mri = [3]float64{2.5, 2.5, 3}

func foreign(args []string) error {
	fs := flag.NewFlagSet("foreign", flag.ExitOnError)
	out := fs.String("o", "", "output folder")
	fs.Parse(args)
	if *out == "" {
		return errors.New("foreign: -o is required")
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	p := func(name string) string { return filepath.Join(*out, name+".nii.gz") }
	for _, s := range foreignSet {
		if err := s.make(p(s.name)); err != nil {
			return fmt.Errorf("foreign %s: %w", s.name, err)
		}
	}
	for _, real := range fs.Args() {
		data, err := regular.ReadFile(real)
		if err != nil {
			return err
		}
		base := filepath.Base(real)
		if err := os.WriteFile(filepath.Join(*out, "real_"+base), data, 0o644); err != nil {
			return err
		}
		name := strings.TrimSuffix(strings.TrimSuffix(base, ".gz"), ".nii")
		if err := padded(real, filepath.Join(*out, "real_"+name+"_padded.nii.gz")); err != nil {
			return fmt.Errorf("foreign %s: %w", real, err)
		}
	}
	return nil
}

// padMM is the field of view padded reals are brought to at least, on every axis: a head's.
const padMM = 180

// padded writes a real image centred in a field of view of at least padMM on every axis, the
// rest its lowest value (background), as float32 at its own spacing: a brain image that only
// its content, not its field of view, can tell from a head.
func padded(path, out string) error {
	h, data, err := nifti.ReadFloat32(path, nifti.WithVolume(0))
	if err != nil {
		return err
	}
	n := [3]int{h.NX(), h.NY(), h.NZ()}
	var mm [3]float64
	var m [3]int
	for a := range 3 {
		mm[a] = h.PixDim[a+1] * h.MMPerUnit()
		m[a] = max(n[a], int(math.Ceil(padMM/mm[a])))
	}
	low := float32(math.Inf(1))
	for _, v := range data {
		low = min(low, v)
	}
	v := newVol(m[0], m[1], m[2], mm, true)
	for i := range v.f32 {
		v.f32[i] = low
	}
	off := [3]int{(m[0] - n[0]) / 2, (m[1] - n[1]) / 2, (m[2] - n[2]) / 2}
	for k := range n[2] {
		for j := range n[1] {
			src := data[(k*n[1]+j)*n[0]:][:n[0]]
			copy(v.f32[((k+off[2])*m[1]+j+off[1])*m[0]+off[0]:], src)
		}
	}
	return v.write(out)
}
