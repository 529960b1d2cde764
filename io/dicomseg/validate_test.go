package dicomseg

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"voxpipe/internal/testexec"
	"voxpipe/io/nifti"
)

// requireTool returns the path of a validator (testexec.Tool).
func requireTool(t *testing.T, name string) string {
	t.Helper()
	return testexec.Tool(t, name, "dicom3tools, python3-pydicom, python3-nibabel")
}

// python is Debian's python3 (debianPython), which has pydicom and nibabel (the one first on
// PATH may not); missing, the test skips, or fails under testexec.RequireToolsEnv=1.
func python(t *testing.T) string {
	t.Helper()
	p := requireTool(t, debianPython)
	if out, err := testexec.Cmd(t, p, "-c", "import pydicom, nibabel, numpy").CombinedOutput(); err != nil {
		if os.Getenv(testexec.RequireToolsEnv) == "1" {
			t.Fatalf("%s lacks pydicom, nibabel or numpy: %v %s", p, err, out)
		}
		t.Skipf("%s lacks pydicom, nibabel or numpy (apt-get install python3-pydicom python3-nibabel): %v", p, err)
	}
	return p
}

// TestSEGsValidate writes a SEG over every geometry (axial, sagittal, coronal, oblique,
// reversed slice order, 37x29 pixels; 1 and 3 segments) and has real tools judge it:
// dicom3tools' dciodvfy finds no error and no warning in the IOD, dcentvfy no inconsistency
// between the SEG and its source files, and scripts/segcheck.py (pydicom and nibabel,
// written from the standard) finds every frame equal to the mask at its source slice. The
// same check fails on a SEG with one bit flipped, so it can fail.
func TestSEGsValidate(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("the validators take seconds a geometry: in the full suite (go test ./..., CI) only")
	}
	dciodvfy, dcentvfy := requireTool(t, "dciodvfy"), requireTool(t, "dcentvfy")
	py := python(t)
	segcheck, err := filepath.Abs("../../scripts/segcheck.py")
	if err != nil {
		t.Fatal(err)
	}
	empty := geometries[0]
	empty.name = "empty-mask" // no foreground at all: one empty frame
	for _, g := range append(slices.Clone(geometries), empty) {
		t.Run(g.name, func(t *testing.T) {
			t.Parallel()
			dir, s := writeSeries(t, g)
			mask := testMask(s, g.segments)
			if g.name == empty.name {
				clear(mask)
			}
			work := t.TempDir()
			seg := filepath.Join(work, "seg.dcm")
			if _, err := WriteFile(seg, s, mask, Options{Segments: testSegments(g.segments), Digest: "test"}); err != nil {
				t.Fatal(err)
			}
			out, err := testexec.Cmd(t, dciodvfy, seg).CombinedOutput()
			if err != nil || bytes.Contains(out, []byte("Error")) || bytes.Contains(out, []byte("Warning")) {
				t.Errorf("dciodvfy: %v\n%s", err, out)
			}
			files, _ := filepath.Glob(filepath.Join(dir, "*"))
			out, err = testexec.Cmd(t, dcentvfy, append([]string{seg}, files...)...).CombinedOutput()
			if err != nil || len(bytes.TrimSpace(out)) > 0 {
				t.Errorf("dcentvfy: %v\n%s", err, out)
			}
			niiPath := filepath.Join(work, "mask.nii.gz")
			h := nifti.MaskHeader(s.Header(nifti.Int16), 3, "test")
			if err := nifti.Write(niiPath, h, mask, nifti.DefaultWriteOptions()); err != nil {
				t.Fatal(err)
			}
			out, err = testexec.Cmd(t, py, segcheck, seg, niiPath, dir).CombinedOutput()
			if err != nil || !strings.HasPrefix(string(out), "segcheck ok") {
				t.Errorf("segcheck: %v\n%s", err, out)
			}

			if g.name == empty.name {
				return // no foreground pixel to get wrong
			}
			// one pixel wrong: the independent check must see it
			data, err := os.ReadFile(seg)
			if err != nil {
				t.Fatal(err)
			}
			px := pixelBytes(t, data)
			px[len(px)/2] ^= 0x10
			bad := filepath.Join(work, "bad.dcm")
			if err := os.WriteFile(bad, data, 0o644); err != nil {
				t.Fatal(err)
			}
			if out, err := testexec.Cmd(t, py, segcheck, bad, niiPath, dir).CombinedOutput(); err == nil {
				t.Errorf("segcheck accepts a SEG with a bit flipped:\n%s", out)
			}
		})
	}
}
