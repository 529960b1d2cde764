package dicomseg

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"voxpipe/internal/testexec"
	"voxpipe/io/nifti"
)

// debianPython is the interpreter with Debian's python3-pydicom and python3-nibabel (the
// python3 on PATH may be another without them).
const debianPython = "/usr/bin/python3"

// needPydicom skips the test when Debian's pydicom (and nibabel) cannot be imported, unless
// VOXPIPE_REQUIRE_TOOLS=1 (CI) makes that a failure (validate_test.go's python).
func needPydicom(t *testing.T) { python(t) }

// TestPydicomLiverSEG reads the SEG pydicom ships (a dcmqi liver segmentation cut to one
// 512x512 frame, without NumberOfFrames): its frame unpacks to the pixels pydicom's
// pixel_array gives; the big endian copy of it is refused, naming its syntax.
func TestPydicomLiverSEG(t *testing.T) {
	t.Parallel()
	dir := "/usr/lib/python3/dist-packages/pydicom/data/test_files"
	path := filepath.Join(dir, "liver_1frame.dcm")
	if _, err := os.Stat(path); err != nil {
		t.Skipf("pydicom's test files are not installed: %v", err)
	}
	needPydicom(t)
	seg, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(seg.Frames) != 1 || seg.Rows != 512 || seg.Columns != 512 || len(seg.Segments) != 1 || seg.Segments[0].Label != "Liver" ||
		seg.Frames[0].Segment != 1 || seg.Frames[0].SourceSOPInstanceUID == "" || !seg.Frames[0].HasPosition {
		t.Fatalf("read as %dx%d, %d frames %+v, segments %+v", seg.Rows, seg.Columns, len(seg.Frames), seg.Frames, seg.Segments)
	}
	px := make([]byte, 512*512)
	if err := seg.Frame(0, px); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(px)
	script := "import hashlib, sys, pydicom; a = pydicom.dcmread(sys.argv[1]).pixel_array.astype('uint8'); print(hashlib.sha256(a.tobytes()).hexdigest(), int(a.sum()))"
	out, err := testexec.Cmd(t, debianPython, "-c", script, path).Output()
	if err != nil {
		t.Fatalf("pydicom: %v", err)
	}
	fields := strings.Fields(string(out))
	if len(fields) != 2 || fields[0] != hex.EncodeToString(sum[:]) {
		t.Fatalf("frame 0 (%d pixels set) differs from pydicom's pixel_array (hash, set: %s)", bytes.Count(px, []byte{1}), out)
	}
	if _, err := ReadFile(filepath.Join(dir, "liver_expb_1frame.dcm")); !errors.Is(err, ErrNotSEG) || !strings.Contains(err.Error(), "1.2.840.10008.1.2.2") {
		t.Errorf("the big endian SEG: %v, want ErrNotSEG naming its syntax", err)
	}
}

// TestPydicomWrittenSEG: a SEG written by pydicom from the standard alone
// (scripts/tests/segmake.py, no voxpipe code) of a mask on each geometry's series reads back
// (ReadFile, Mask) as that mask.
func TestPydicomWrittenSEG(t *testing.T) {
	t.Parallel()
	segmake, err := filepath.Abs("../../scripts/tests/segmake.py")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(segmake); err != nil {
		t.Skipf("no segmake.py: %v", err)
	}
	needPydicom(t)
	for _, g := range geometries {
		t.Run(g.name, func(t *testing.T) {
			t.Parallel()
			dir, s := writeSeries(t, g)
			mask := testMask(s, g.segments)
			tmp := t.TempDir()
			maskPath, segPath := filepath.Join(tmp, "mask.nii"), filepath.Join(tmp, "seg.dcm")
			if err := nifti.Write(maskPath, nifti.MaskHeader(s.Header(nifti.Uint8), 3, ""), mask, nifti.DefaultWriteOptions()); err != nil {
				t.Fatal(err)
			}
			if out, err := testexec.Cmd(t, debianPython, segmake, "--from-mask", maskPath, dir, segPath).CombinedOutput(); err != nil {
				t.Fatalf("segmake.py: %v\n%s", err, out)
			}
			seg, err := ReadFile(segPath)
			if err != nil {
				t.Fatal(err)
			}
			got, info, err := seg.Mask(s)
			if err != nil {
				t.Fatal(err)
			}
			if info.ByPosition != 0 || info.Overlapping != 0 {
				t.Errorf("%+v: want every frame placed by its source reference, none overlapping", info)
			}
			if i := firstDiff(got, mask); i >= 0 {
				t.Fatalf("voxel %d is %d, the mask's %d", i, got[i], mask[i])
			}
		})
	}
}
