package main

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"voxpipe/io/nifti"
	"voxpipe/store/provenance"
)

func TestInfo(t *testing.T) {
	app := newApp()
	var stdout, stderr bytes.Buffer
	app.Writer, app.ErrWriter = &stdout, &stderr
	if err := app.Run([]string{"voxpipe", "info", "../../fixtures/volumes/phantom_000.nii.gz"}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"NIfTI-1", "96x96x64", "int16", "2.5 x 2.5 x 3", "sform       code 1", "589824 voxels"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("info output lacks %q:\n%s", want, stdout.String())
		}
	}
	bad := filepath.Join(t.TempDir(), "bad.nii")
	os.WriteFile(bad, []byte("not a volume"), 0o644)
	if code := run([]string{"voxpipe", "info", bad}); code != exitFailed {
		t.Errorf("info on a bad file: exit %d, want %d", code, exitFailed)
	}
	if code := run([]string{"voxpipe", "info"}); code != exitUsage {
		t.Errorf("info without a file: exit %d, want %d", code, exitUsage)
	}
}

// infoCLI runs "voxpipe info ARGS..." in process (captureRun).
func infoCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	return captureRun(t, append([]string{"info"}, args...)...)
}

// infoVolume writes a small int16 NIfTI-1 volume (6x5x4, values 0..119, no qform, sform
// code 2) and returns its bytes: 348 header, 4 extender, 240 data.
func infoVolume(t *testing.T, path string) []byte {
	t.Helper()
	h := &nifti.Header{Version: 1, ByteOrder: binary.LittleEndian, Datatype: nifti.Int16,
		Dim: [8]int64{3, 6, 5, 4, 1, 1, 1, 1}, PixDim: [8]float64{1, 0.75, 0.5, 2},
		XYZTUnits: 2, SformCode: 2, SrowX: [4]float64{0.75, 0, 0, -10}, SrowY: [4]float64{0, 0.5, 0, -20},
		SrowZ: [4]float64{0, 0, 2, -30}, SclSlope: 1, Descrip: "info fixture"}
	data := make([]byte, 2*6*5*4)
	for i := range 6 * 5 * 4 {
		binary.LittleEndian.PutUint16(data[2*i:], uint16(i))
	}
	if err := nifti.Write(path, h, data, nifti.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil || len(b) != 352+240 {
		t.Fatalf("%d bytes, %v", len(b), err)
	}
	return b
}

// TestInfoBrokenFiles: files that fail validation still get every field the header holds,
// then the reason on stderr, and exit 1.
// infoBrokenCase is a broken file for info: what stdout shows besides the fields common to
// all, and the error on stderr.
type infoBrokenCase struct {
	name   string
	data   []byte
	stdout []string // besides the fields common to all
	stderr string
}

// infoBrokenCases are infoVolume's bytes (valid) broken in the datatype, the data's length,
// the dims and vox_offset.
func infoBrokenCases(valid []byte) []infoBrokenCase {
	edit := func(f func(b []byte)) []byte { b := bytes.Clone(valid); f(b); return b }
	le := binary.LittleEndian
	gzipped := func(b []byte) []byte {
		var buf bytes.Buffer
		z := gzip.NewWriter(&buf)
		z.Write(b)
		z.Close()
		return buf.Bytes()
	}
	return []infoBrokenCase{
		{"complex64.nii", edit(func(b []byte) { le.PutUint16(b[70:], 32); le.PutUint16(b[72:], 64) }),
			[]string{"datatype    complex64 (code 32, 64 bits, not supported)", "dims        6x5x4 (dim [3 6 5 4])"}, "unsupported datatype: complex64"},
		{"truncated.nii", valid[:352+100],
			[]string{"datatype    int16 (code 4, 16 bits)", "dims        6x5x4"}, "truncated data: the data ends inside z-slice 1 of 4 (100 of 240 bytes)"},
		{"truncated.nii.gz", gzipped(valid[:352+100]),
			[]string{"datatype    int16 (code 4, 16 bits)", "dims        6x5x4"}, "truncated data: the data ends inside z-slice 1 of 4 (100 of 240 bytes)"},
		{"negdim.nii", edit(func(b []byte) { le.PutUint16(b[46:], uint16(0xfffc)) }),
			[]string{"dims        6x5x-4 (dim [3 6 5 -4])"}, "dim[3] = -4, want >= 1"},
		{"voxoffset.nii", edit(func(b []byte) { le.PutUint32(b[108:], math.Float32bits(1e6)) }),
			[]string{"vox_offset  1000000\n"}, "vox_offset 1000000 is past the end of the 592-byte file"},
		{"fraction.nii", edit(func(b []byte) { le.PutUint32(b[108:], math.Float32bits(352.5)) }),
			[]string{"vox_offset  352.5\n"}, "vox_offset 352.5 is not a valid byte offset"},
	}
}

func TestInfoBrokenFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	valid := infoVolume(t, filepath.Join(dir, "valid.nii"))
	cases := infoBrokenCases(valid)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(dir, c.name)
			if err := os.WriteFile(path, c.data, 0o644); err != nil {
				t.Fatal(err)
			}
			code, stdout, stderr := infoCLI(t, path)
			if code != exitFailed {
				t.Errorf("exit %d, want %d", code, exitFailed)
			}
			gz := ""
			if strings.HasSuffix(path, ".gz") {
				gz = ", gzip"
			}
			want := append([]string{path + "\n", fmt.Sprintf("file        %d bytes%s\n", len(c.data), gz),
				`format      NIfTI-1 (little-endian, magic "n+1")`, "pixdim      0.75 x 0.5 x 2 (xyzt_units 2: mm, unknown)",
				"no qform (code 0)", "sform       code 2 (aligned_anat)", "[ 0.75  0  0 -10]", `descrip     "info fixture"`}, c.stdout...)
			for _, w := range want {
				if !strings.Contains(stdout, w) {
					t.Errorf("stdout lacks %q:\n%s", w, stdout)
				}
			}
			if strings.Contains(stdout, "values") {
				t.Errorf("values of a broken file:\n%s", stdout)
			}
			// A gzip stream's data is checked as it is read, after the header.
			op := "open "
			if gz != "" {
				op = "read "
			}
			if !strings.HasPrefix(stderr, "voxpipe: "+op+path) || !strings.Contains(stderr, c.stderr) {
				t.Errorf("stderr %q, want the error naming the file and %q", stderr, c.stderr)
			}
		})
	}

}

// A header cut short shows the fields it holds, and none past the cut.
func TestInfoCutHeader(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	valid := infoVolume(t, filepath.Join(dir, "valid.nii"))
	path := filepath.Join(dir, "cut.nii")
	os.WriteFile(path, valid[:200], 0o644)
	code, stdout, stderr := infoCLI(t, path)
	for _, w := range []string{"header      cut short: 200 of the 348 bytes of a NIfTI-1 header", "NIfTI-1 (little-endian, magic not read)", "dims        6x5x4", "vox_offset  352"} {
		if !strings.Contains(stdout, w) {
			t.Errorf("cut header: stdout lacks %q:\n%s", w, stdout)
		}
	}
	for _, absent := range []string{"descrip", "sform", "qform"} {
		if strings.Contains(stdout, absent) {
			t.Errorf("cut header: %s shown though past the cut:\n%s", absent, stdout)
		}
	}
	if code != exitFailed || !strings.Contains(stderr, "200 bytes, a NIfTI-1 header needs 348") {
		t.Errorf("cut header: exit %d, %q", code, stderr)
	}

}

// A .hdr/.img pair lists both files; an .img cut short fails after the header is shown.
func TestInfoCutPair(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	valid := infoVolume(t, filepath.Join(dir, "valid.nii"))
	h, err := nifti.ReadHeader(filepath.Join(dir, "valid.nii"))
	if err != nil {
		t.Fatal(err)
	}
	pair := filepath.Join(dir, "pair.img")
	if err := nifti.Write(filepath.Join(dir, "pair.hdr"), h, valid[352:], nifti.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	os.Truncate(pair, 100)
	code, stdout, stderr := infoCLI(t, pair)
	if w := "files       pair.hdr (352 bytes), pair.img (100 bytes)\n"; code != exitFailed || !strings.Contains(stdout, w) ||
		!strings.Contains(stdout, `magic "ni1"`) || !strings.Contains(stderr, "pair.img: nifti: truncated data: the data ends inside z-slice 1 of 4 (100 of 240 bytes)") {
		t.Errorf("cut pair: exit %d, stderr %q, stdout lacks %q:\n%s", code, stderr, w, stdout)
	}

}

// A valid file next to a broken one is shown whole; the exit status is 1.
func TestInfoValidAndBroken(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	valid := infoVolume(t, filepath.Join(dir, "valid.nii"))
	for _, c := range infoBrokenCases(valid) {
		if c.name == "negdim.nii" {
			if err := os.WriteFile(filepath.Join(dir, c.name), c.data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	code, stdout, _ := infoCLI(t, filepath.Join(dir, "valid.nii"), filepath.Join(dir, "negdim.nii"))
	if code != exitFailed || !strings.Contains(stdout, "values      min 0, max 119, mean 59.5 (120 voxels, scaled)") {
		t.Errorf("valid and broken: exit %d\n%s", code, stdout)
	}
}

// TestInfoGzipCutInHeader: the message names the gzip stream cut short and counts what was
// inflated, instead of "not a NIfTI file: 0-byte file".
func TestInfoGzipCutInHeader(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../../fixtures/volumes/phantom_000.nii.gz")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "cut.nii.gz")
	os.WriteFile(path, b[:60], 0o644)
	// What the 60 bytes inflate to, by the standard library's decoder.
	z, err := gzip.NewReader(bytes.NewReader(b[:60]))
	if err != nil {
		t.Fatal(err)
	}
	inflated, err := io.ReadAll(z)
	if !errors.Is(err, io.ErrUnexpectedEOF) || len(inflated) >= 348 {
		t.Fatalf("the fixture's first 60 bytes inflate to %d bytes (%v)", len(inflated), err)
	}
	code, stdout, stderr := infoCLI(t, path)
	want := fmt.Sprintf("nifti: truncated data: the gzip stream ends early (the 60-byte file is cut short), after %d inflated bytes;", len(inflated))
	if code != exitFailed || !strings.Contains(stderr, want) || !strings.Contains(stderr, "header needs 348") || strings.Contains(stderr, "not a NIfTI") {
		t.Errorf("exit %d, stderr %q; want %q", code, stderr, want)
	}
	if !strings.Contains(stdout, "file        60 bytes, gzip") {
		t.Errorf("stdout %q", stdout)
	}
}

// TestInfoGeometryCodes: qform and sform code 0 are said to be absent, not printed as zeros;
// set ones are named with their matrix.
func TestInfoGeometryCodes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "v.nii")
	infoVolume(t, path)
	_, stdout, _ := infoCLI(t, path)
	if !strings.Contains(stdout, "qform       no qform (code 0)\n") || strings.Contains(stdout, "quatern") {
		t.Errorf("qform code 0:\n%s", stdout)
	}
	h, err := nifti.ReadHeader(path)
	if err != nil {
		t.Fatal(err)
	}
	h.SformCode, h.QformCode, h.QoffsetX = 0, 1, -5
	data := make([]byte, 240)
	path = filepath.Join(dir, "nosform.nii.gz")
	if err := nifti.Write(path, h, data, nifti.DefaultWriteOptions()); err != nil {
		t.Fatal(err)
	}
	code, stdout, _ := infoCLI(t, path)
	if code != 0 || !strings.Contains(stdout, "sform       no sform (code 0)\n  intent") || strings.Contains(stdout, "[ 0  0  0  0]") {
		t.Errorf("sform code 0: exit %d\n%s", code, stdout)
	}
	if !strings.Contains(stdout, "qform       code 1 (scanner_anat), quatern (0, 0, 0), offset (-5, 0, 0), qfac 1") {
		t.Errorf("qform code 1:\n%s", stdout)
	}
}

// TestInfoLabelMap: an integer volume with few values gets each one's voxel count and share;
// a voxpipe mask its extensions and provenance; other extensions are listed.
func TestInfoLabelMap(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	vol := 1
	rec := provenance.Record{Generator: provenance.Generator, Version: "1.2.3",
		Model:  provenance.Model{Name: "tiny", SHA256: strings.Repeat("ab", 32)},
		Engine: "cpu", Precision: "fp32",
		Input: provenance.Input{Files: []provenance.File{{Name: "scan.nii.gz", Size: 4242, MTime: "2025-01-02T03:04:05.000000006Z"}},
			XXH3: strings.Repeat("0f", 16), Volume: &vol}}
	long := strings.Repeat("word ", 100)
	h := &nifti.Header{Version: 2, ByteOrder: binary.BigEndian, Datatype: nifti.Uint8,
		Dim: [8]int64{3, 10, 10, 4, 1, 1, 1, 1}, PixDim: [8]float64{1, 1, 1, 1}, SclSlope: 1,
		IntentCode: nifti.IntentLabel, SformCode: 1, SrowX: [4]float64{1}, SrowY: [4]float64{0, 1}, SrowZ: [4]float64{0, 0, 1},
		Extensions: []nifti.Extension{rec.Extension(), {Code: 40, Data: []byte{0, 1, 2, 0xff}}, {Code: 6, Data: []byte(long)}}}
	labels := make([]byte, 400)
	for i := range labels {
		switch {
		case i < 300:
		case i < 390:
			labels[i] = 1
		default:
			labels[i] = 7
		}
	}
	path := filepath.Join(dir, "mask.nii.gz")
	if err := nifti.Write(path, h, labels, nifti.DefaultWriteOptions()); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := infoCLI(t, path)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, w := range []string{
		"labels      3 distinct values\n",
		"     0: 300 voxels (75.00%)\n", "     1: 90 voxels (22.50%)\n", "     7: 10 voxels (2.50%)\n",
		"extensions  3\n",
		`#0 code 6 (comment), esize ` + fmt.Sprint(8+len(rec.Extension().Data)+(16-(8+len(rec.Extension().Data))%16)%16) + `, text: {"generator":"voxpipe","version":"1.2.3"`,
		"#1 code 40 (matlab), esize 16, binary: 00 01 02 ff 00 00 00 00",
		"#2 code 6 (comment), esize 512, text: word word",
		"... (499 characters)\n",
		"provenance  voxpipe mask, written by voxpipe 1.2.3\n",
		"model       tiny (sha256 " + strings.Repeat("ab", 32) + ")\n",
		"engine      cpu, fp32\n",
		"input       scan.nii.gz (4242 bytes, modified 2025-01-02T03:04:05.000000006Z)\n",
		"input vol.  1 (of a 4D input)\n",
		"input hash  " + strings.Repeat("0f", 16),
	} {
		if !strings.Contains(stdout, w) {
			t.Errorf("stdout lacks %q:\n%s", w, stdout)
		}
	}
}

// An integer volume with more than 256 values is no label map; the rule's edges.
func TestInfoLabelMapEdges(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	code, stdout, _ := infoCLI(t, "../../fixtures/volumes/phantom_000.nii.gz")
	if code != 0 || strings.Contains(stdout, "labels") || strings.Contains(stdout, "provenance") {
		t.Errorf("phantom: exit %d\n%s", code, stdout)
	}
	// The rule's edges: one value (an empty mask), 256 and 257 values (uint16).
	for _, c := range []struct {
		values int
		want   string // "" for no labels
	}{{1, "labels      1 distinct value\n"}, {256, "labels      256 distinct values\n"}, {257, ""}} {
		h := &nifti.Header{Version: 1, ByteOrder: binary.LittleEndian, Datatype: nifti.Uint16,
			Dim: [8]int64{3, 20, 20, 2, 1, 1, 1, 1}, PixDim: [8]float64{1, 1, 1, 1}, SclSlope: 1}
		data := make([]byte, 2*800)
		for i := range 800 {
			binary.LittleEndian.PutUint16(data[2*i:], uint16(1000+i%c.values))
		}
		path := filepath.Join(dir, fmt.Sprintf("v%d.nii", c.values))
		if err := nifti.Write(path, h, data, nifti.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
		code, stdout, _ := infoCLI(t, path)
		switch {
		case code != 0:
			t.Errorf("%d values: exit %d", c.values, code)
		case c.want == "" && strings.Contains(stdout, "labels"):
			t.Errorf("%d values listed as labels:\n%s", c.values, stdout)
		case c.want != "" && !strings.Contains(stdout, c.want):
			t.Errorf("%d values: stdout lacks %q:\n%s", c.values, c.want, stdout)
		case c.values == 1 && !strings.Contains(stdout, "  1000: 800 voxels (100.00%)\n"):
			t.Errorf("one value:\n%s", stdout)
		case c.values == 256 && !strings.Contains(stdout, "  1255: 3 voxels (0.38%)\n"):
			t.Errorf("256 values:\n%s", stdout)
		}
	}
}

// TestInfoVolumes: a 4D file lists its volumes; --volume N reads volume N (default 0); a
// volume it does not have, or a negative one, is a usage error.
func TestInfoVolumes(t *testing.T) {
	t.Parallel()
	const nx, ny, nz, nt = 4, 3, 2, 3
	h := &nifti.Header{Version: 1, ByteOrder: binary.LittleEndian, Datatype: nifti.Float32,
		Dim: [8]int64{5, nx, ny, nz, nt, 1, 1, 1}, PixDim: [8]float64{1, 2, 2, 2, 1.5}, XYZTUnits: 10, SclSlope: 1}
	data := make([]byte, 4*nx*ny*nz*nt)
	for i := range nx * ny * nz * nt {
		vol, k := i/(nx*ny*nz), i%(nx*ny*nz)
		binary.LittleEndian.PutUint32(data[4*i:], math.Float32bits(float32(100*vol+k)))
	}
	path := filepath.Join(t.TempDir(), "series.nii")
	if err := nifti.Write(path, h, data, nifti.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := infoCLI(t, path)
	for _, w := range []string{"volumes     3 (dims 4..5: 3 x 1)\n", "pixdim      2 x 2 x 2, t 1.5 (xyzt_units 10: mm, s)",
		"values      min 0, max 23, mean 11.5 (24 voxels, scaled) of volume 0 (of 3)\n"} {
		if code != 0 || !strings.Contains(stdout, w) {
			t.Errorf("exit %d, stdout lacks %q:\n%s%s", code, w, stdout, stderr)
		}
	}
	code, stdout, stderr = infoCLI(t, path, "--volume", "2")
	if w := "values      min 200, max 223, mean 211.5 (24 voxels, scaled) of volume 2 (of 3)\n"; code != 0 || !strings.Contains(stdout, w) {
		t.Errorf("--volume 2: exit %d, stdout lacks %q:\n%s%s", code, w, stdout, stderr)
	}
	code, stdout, stderr = infoCLI(t, path, "--volume", "3")
	if code != exitUsage || !strings.Contains(stderr, "--volume 3: "+path+" has 3 volume(s) (0..2)") || !strings.Contains(stdout, "volumes     3") || strings.Contains(stdout, "values") {
		t.Errorf("--volume 3: exit %d, stderr %q\n%s", code, stderr, stdout)
	}
	for _, bad := range []string{"-1", "x"} {
		if code, _, stderr := infoCLI(t, path, "--volume", bad); code != exitUsage {
			t.Errorf("--volume %s: exit %d, want %d (%s)", bad, code, exitUsage, stderr)
		}
	}
	// A 3D file has volume 0 only.
	if code, _, _ := infoCLI(t, "../../fixtures/volumes/phantom_000.nii.gz", "--volume", "1"); code != exitUsage {
		t.Errorf("--volume 1 of a 3D file: exit %d", code)
	}
}
