package dicom

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"unsafe"

	"voxpipe/io/nifti"
)

// writeSeries writes specs as files IM<i> in a new folder and scans it.
func writeSeries(t *testing.T, specs []sliceSpec) *Scan {
	t.Helper()
	dir := t.TempDir()
	for i, sp := range specs {
		if err := os.WriteFile(filepath.Join(dir, "IM"+strconv.Itoa(i)), sp.file(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	scan, err := ScanPaths([]string{dir}, 2)
	if err != nil {
		t.Fatal(err)
	}
	return scan
}

// stack makes n axial 3x4 slices 2 mm apart from z = 10, instance numbers as order says.
func stack(n int, instance func(k int) int, mod func(k int, sp *sliceSpec)) []sliceSpec {
	var out []sliceSpec
	for k := range n {
		px := make([]uint16, 12)
		for i := range px {
			px[i] = uint16(100*k + i) // slice k, row i/4, column i%4
		}
		sp := sliceSpec{syntax: ExplicitVRLittleEndian, uid: "1.2.3", instance: instance(k), pos: [3]float64{-5, 7, 10 + 2*float64(k)},
			orient: axial, rows: 3, cols: 4, bitsStored: 16, pixels: px}
		if mod != nil {
			mod(k, &sp)
		}
		out = append(out, sp)
	}
	return out
}

// TestSeriesGeometry: whatever the instance order, the volume ascends along the normal, rows
// are stored bottom-up, and the affine is dcm2niix's (worked out by hand for axial slices:
// column spacing 0.75 along -x, row spacing 0.5 along +y from the last DICOM row, 2 mm slices).
func TestSeriesGeometry(t *testing.T) {
	t.Parallel()
	want := nifti.Affine{{-0.75, 0, 0, 5}, {0, 0.5, 0, -(7 + 2*0.5)}, {0, 0, 2, 10}, {0, 0, 0, 1}}
	orders := map[string]func(k int) int{
		"ascending": func(k int) int { return k + 1 },
		"reversed":  func(k int) int { return 10 - k },
		"shuffled":  func(k int) int { return []int{3, 1, 5, 2, 4}[k] },
	}
	for name, order := range orders {
		scan := writeSeries(t, stack(5, order, nil))
		if len(scan.Series) != 1 {
			t.Fatalf("%s: %d series", name, len(scan.Series))
		}
		s := scan.Series[0]
		h, data, err := s.Volume(2)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if s.Affine != want || h.Affine() != want {
			t.Errorf("%s: affine %v (header %v), want %v", name, s.Affine, h.Affine(), want)
		}
		if h.Datatype != nifti.Int16 || h.NX() != 4 || h.NY() != 3 || h.NZ() != 5 || h.Swapped() {
			t.Errorf("%s: header %v %dx%dx%d", name, h.Datatype, h.NX(), h.NY(), h.NZ())
		}
		vox := unsafe.Slice((*uint16)(unsafe.Pointer(&data[0])), len(data)/2)
		for k := range 5 {
			for j := range 3 {
				for i := range 4 {
					// voxel (i, j, k) is DICOM row 2-j of the slice at z = 10+2k
					if got, want := vox[k*12+j*4+i], uint16(100*k+(2-j)*4+i); got != want {
						t.Fatalf("%s: voxel (%d,%d,%d) = %d, want %d", name, i, j, k, got, want)
					}
				}
			}
		}
	}
}

// TestSeriesRefused: missing slices, varying spacing, tilt and repeated positions are
// ErrGeometry; a spacing jitter below the tolerance is not.
func TestSeriesRefused(t *testing.T) {
	t.Parallel()
	inc := func(k int) int { return k + 1 }
	cases := map[string]func(k int, sp *sliceSpec){
		"missing": func(k int, sp *sliceSpec) {
			if k >= 2 {
				sp.pos[2] += 2
			}
		},
		"varies": func(k int, sp *sliceSpec) {
			if k >= 3 {
				sp.pos[2] += 0.7
			}
		},
		"tilt":     func(k int, sp *sliceSpec) { sp.pos[1] += 0.3 * float64(k) },
		"repeated": func(k int, sp *sliceSpec) { sp.pos[2] = 10 + 2*float64(k/2) },
	}
	for name, mod := range cases {
		s := writeSeries(t, stack(6, inc, mod)).Series
		if len(s) != 1 || !errors.Is(s[0].Err, ErrGeometry) {
			t.Errorf("%s: %d series, err %v; want one with ErrGeometry", name, len(s), s[0].Err)
		}
	}
	s := writeSeries(t, stack(6, inc, func(k int, sp *sliceSpec) { sp.pos[2] += 0.05 * float64(k%2) })).Series
	if s[0].Err != nil {
		t.Errorf("jitter of 0.05 mm: %v", s[0].Err)
	}
}

// TestSeriesSplit: one UID whose files differ in orientation or echo makes several series,
// numbered as parts; two UIDs make two series.
func TestSeriesSplit(t *testing.T) {
	t.Parallel()
	specs := stack(6, func(k int) int { return k + 1 }, func(k int, sp *sliceSpec) {
		if k%2 == 1 && k < 4 {
			sp.echo = 2
		}
		if k >= 4 {
			sp.uid = "9.9"
		}
	})
	scan := writeSeries(t, specs)
	if len(scan.Series) != 3 {
		t.Fatalf("%d series, want 3", len(scan.Series))
	}
	parts := map[string][]int{}
	for _, s := range scan.Series {
		parts[s.UID] = append(parts[s.UID], s.Part)
	}
	if len(parts["1.2.3"]) != 2 || parts["1.2.3"][0] == parts["1.2.3"][1] || parts["9.9"][0] != 0 {
		t.Errorf("parts %v", parts)
	}
	names := Names(scan.Series, "%s")
	if names[0] == names[1] || names[1] == names[2] || names[0] == names[2] {
		t.Errorf("names not unique: %v", names)
	}
}

// TestSeriesPixels: BitsStored masks and sign-extends; slopes that vary by slice give float32
// rescaled values; uint16 values above 32767 stay uint16.
func TestSeriesPixels(t *testing.T) {
	t.Parallel()
	s := writeSeries(t, stack(2, func(k int) int { return k + 1 }, func(k int, sp *sliceSpec) {
		sp.bitsStored, sp.signed = 12, true
		sp.pixels[0] = 0xF800 | 0x0FFF // garbage above bit 11; 12-bit -1
		sp.pixels[1] = 0x7FF           // 12-bit 2047
	})).Series[0]
	_, data, err := s.Volume(1)
	if err != nil {
		t.Fatal(err)
	}
	vox := unsafe.Slice((*int16)(unsafe.Pointer(&data[0])), len(data)/2)
	if vox[8] != -1 || vox[9] != 2047 { // DICOM row 0 is stored as j = 2
		t.Errorf("12-bit signed: %d %d, want -1 2047", vox[8], vox[9])
	}

	s = writeSeries(t, stack(2, func(k int) int { return k + 1 }, func(k int, sp *sliceSpec) {
		sp.slope, sp.inter = float64(k+1), -10
	})).Series[0]
	h, data, err := s.Volume(1)
	if err != nil || h.Datatype != nifti.Float32 || h.SclSlope != 1 {
		t.Fatalf("varying slope: %v, %v slope %v", err, h.Datatype, h.SclSlope)
	}
	f := unsafe.Slice((*float32)(unsafe.Pointer(&data[0])), len(data)/4)
	if f[8] != 0*1-10 || f[12+8] != 100*2-10 {
		t.Errorf("rescaled: %v %v", f[8], f[12+8])
	}

	s = writeSeries(t, stack(2, func(k int) int { return k + 1 }, func(k int, sp *sliceSpec) {
		sp.slope, sp.inter = 2, 1
		sp.pixels[3] = 40000
	})).Series[0]
	h, _, err = s.Volume(1)
	if err != nil || h.Datatype != nifti.Uint16 || h.SclSlope != 2 || h.SclInter != 1 {
		t.Errorf("uint16: %v %v %v %v", err, h.Datatype, h.SclSlope, h.SclInter)
	}
}

// TestSeriesMultiFrame reads an enhanced-style file (per-frame positions, frames in reverse
// order), native and RLE, as one volume ascending along the normal.
func TestSeriesMultiFrame(t *testing.T) {
	t.Parallel()
	for _, ts := range []TransferSyntax{ExplicitVRLittleEndian, ImplicitVRLittleEndian, RLELossless} {
		var all []uint16
		var pos [][3]float64
		for k := range 4 {
			for i := range 12 {
				all = append(all, uint16(100*k+i))
			}
			pos = append(pos, [3]float64{-5, 7, 16 - 2*float64(k)}) // frame 0 is the top slice
		}
		sp := sliceSpec{syntax: ts, uid: "5.5", instance: 1, orient: axial, rows: 3, cols: 4, bitsStored: 16,
			numberOfFrames: 4, framePositions: pos, pixelsAllFrames: all}
		s := writeSeries(t, []sliceSpec{sp}).Series
		if len(s) != 1 || s[0].Err != nil {
			t.Fatalf("%v: %d series, %v", ts, len(s), s[0].Err)
		}
		_, data, err := s[0].Volume(1)
		if err != nil {
			t.Fatal(err)
		}
		vox := unsafe.Slice((*uint16)(unsafe.Pointer(&data[0])), len(data)/2)
		// k = 0 is the lowest slice (z = 10): frame 3; its voxel (0, 0) is DICOM row 2.
		if vox[0] != 300+8 || vox[3*12] != 0+8 || s[0].Affine[2][3] != 10 {
			t.Errorf("%v: voxels %d %d, z origin %v", ts, vox[0], vox[3*12], s[0].Affine[2][3])
		}
	}
}

// TestNames: templates expand, sanitise, and are checked.
func TestNames(t *testing.T) {
	t.Parallel()
	s := &Series{UID: "1.2", PatientID: "PID 42/x", StudyDate: "20240102", Number: 7, Description: " T1 (axial) ü"}
	if got := s.Name("%i_%t_%s_%d"); got != "PID_42_x_20240102_7_T1_axial" {
		t.Errorf("Name = %q", got)
	}
	if got := s.Name(DefaultName); got != "series_7_"+s.ID() {
		t.Errorf("default name %q, want series_7_%s (no patient data)", got, s.ID())
	}
	if got := s.Name("%%i"); got != "i" {
		t.Errorf("%%%%: %q", got)
	}
	if got := (&Series{UID: "1"}).Name("%d"); got != (&Series{UID: "1"}).ID() || len(got) != 12 {
		t.Errorf("empty name: %q", got)
	}
	if CheckName("%i_%n") == nil || CheckName("a%") == nil || CheckName(DefaultName) != nil {
		t.Error("CheckName accepts %n or a trailing %, or refuses the default")
	}
}
