package dicom

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"voxpipe/internal/testexec"
)

// pydicomFiles is where Debian's python3-pydicom keeps pydicom's test files: real scanner
// exports in many syntaxes, and broken files.
const pydicomFiles = "/usr/lib/python3/dist-packages/pydicom/data/test_files"

// sentinels are the errors a refused file may wrap.
var sentinels = []error{ErrNotDICOM, ErrTruncated, ErrCorrupt, ErrUnsupported, ErrNoPixels, ErrTooLarge}

// TestPydicomFiles parses every file pydicom ships: each parses, or fails with one of the
// package's sentinels; every image this package decodes has the values pydicom's pixel_array
// has (compared by hash, as int64); the others are refused with ErrUnsupported naming the
// reason. A few outcomes are pinned: the MR_small variants in six syntaxes (JPEG-LS lossless
// among them), the truncated files, JPEG 2000, DICOMDIRs.
func TestPydicomFiles(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat(pydicomFiles); err != nil {
		t.Skipf("pydicom's test files are not installed (apt-get install python3-pydicom): %v", err)
	}
	var paths []string
	filepath.WalkDir(pydicomFiles, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			paths = append(paths, p)
		}
		return nil
	})
	want := pydicomHashes(t, paths)
	outcome := map[string]error{}
	decoded := map[string]string{}
	for _, p := range paths {
		rel, _ := filepath.Rel(pydicomFiles, p)
		f, err := ParseFile(p)
		if err == nil {
			err = f.checkPixels()
		}
		if err == nil {
			buf := make([]byte, f.frameBytes()*int64(f.NumberOfFrames))
			fb := f.frameBytes()
			if err = readFile(f, nil, func(i int) []byte { return buf[int64(i)*fb : int64(i+1)*fb] }, new([]byte)); err == nil {
				decoded[rel] = hashPixels(f, buf)
				if w, ok := want[rel]; ok && decoded[rel] != w {
					t.Errorf("%s: pixels hash %s, pydicom's %s", rel, decoded[rel], want[rel])
				}
			}
		}
		outcome[rel] = err
		if err != nil && !wrapsSentinel(err) {
			t.Errorf("%s: %v wraps none of the package's errors", rel, err)
		}
		if err != nil && !strings.Contains(err.Error(), "dicom: ") {
			t.Errorf("%s: error %q does not say what is wrong", rel, err)
		}
	}
	pinned := map[string]error{
		"MR_truncated.dcm":       ErrTruncated,
		"rtplan_truncated.dcm":   ErrTruncated,
		"JPEG2000.dcm":           ErrUnsupported,
		"SC_rgb_rle.dcm":         ErrUnsupported,
		"README.txt":             ErrNotDICOM,
		"dicomdirtests/DICOMDIR": ErrNoPixels,
		"liver_1frame.dcm":       ErrUnsupported,
	}
	for name, sentinel := range pinned {
		if _, ok := outcome[name]; ok && !errors.Is(outcome[name], sentinel) {
			t.Errorf("%s: got %v, want %v", name, outcome[name], sentinel)
		}
	}
	if e := outcome["JPEG2000.dcm"]; e != nil && !strings.Contains(e.Error(), "JPEG 2000 Image Compression (1.2.840.10008.1.2.4.91)") {
		t.Errorf("JPEG2000.dcm: %v does not name the syntax", e)
	}
	ref := decoded["MR_small.dcm"]
	for _, v := range []string{"MR_small_RLE.dcm", "MR_small_bigendian.dcm", "MR_small_expb.dcm", "MR_small_implicit.dcm", "MR_small_padded.dcm", "MR_small_jpeg_ls_lossless.dcm"} {
		if _, ok := outcome[v]; ok && (ref == "" || decoded[v] != ref) {
			t.Errorf("%s decodes to %q, MR_small.dcm to %q (%v)", v, decoded[v], ref, outcome[v])
		}
	}
	if decoded["rtdose_rle.dcm"] == "" || decoded["rtdose_rle.dcm"] != decoded["rtdose.dcm"] || decoded["rtdose_expb.dcm"] != decoded["rtdose.dcm"] {
		t.Errorf("rtdose variants (32-bit, 15 frames; RLE, big endian) differ or failed: %v %v", outcome["rtdose_rle.dcm"], outcome["rtdose_expb.dcm"])
	}
	if len(decoded) < 25 {
		t.Errorf("only %d files decoded", len(decoded))
	}
}

func wrapsSentinel(err error) bool {
	for _, s := range sentinels {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}

// hashPixels hashes the decoded samples as little-endian int64 values (masked to BitsStored,
// signed as PixelRepresentation says), the form pydicomHashes hashes pixel_array in.
func hashPixels(f *File, raw []byte) string {
	s := &Series{BitsAllocated: f.BitsAllocated, BitsStored: f.BitsStored, Signed: f.PixelRepresentation == 1}
	s.maskBits(raw)
	n := len(raw) / (f.BitsAllocated / 8)
	out := make([]byte, 8*n)
	for i := range n {
		var v int64
		switch {
		case f.BitsAllocated == 8 && s.Signed:
			v = int64(int8(raw[i]))
		case f.BitsAllocated == 8:
			v = int64(raw[i])
		case f.BitsAllocated == 16 && s.Signed:
			v = int64(int16(hostOrder.Uint16(raw[2*i:])))
		case f.BitsAllocated == 16:
			v = int64(hostOrder.Uint16(raw[2*i:]))
		case s.Signed:
			v = int64(int32(hostOrder.Uint32(raw[4*i:])))
		default:
			v = int64(hostOrder.Uint32(raw[4*i:]))
		}
		binary.LittleEndian.PutUint64(out[8*i:], uint64(v))
	}
	sum := sha256.Sum256(out)
	return hex.EncodeToString(sum[:8])
}

// pydicomHashes asks pydicom for the pixel_array hash of each file it can decode.
func pydicomHashes(t *testing.T, paths []string) map[string]string {
	const script = `
import hashlib, os, sys, warnings
warnings.simplefilter("ignore")
import numpy as np, pydicom
root = sys.argv[1]
for p in sys.stdin.read().split("\n"):
    if not p:
        continue
    try:
        a = pydicom.dcmread(p).pixel_array
    except Exception:
        continue
    print(os.path.relpath(p, root), hashlib.sha256(a.astype("<i8").tobytes()).hexdigest()[:16])
`
	cmd := testexec.Cmd(t, "/usr/bin/python3", "-c", script, pydicomFiles)
	cmd.Stdin = strings.NewReader(strings.Join(paths, "\n"))
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("pydicom: %v", err)
	}
	hashes := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if name, h, ok := strings.Cut(line, " "); ok {
			hashes[name] = h
		}
	}
	return hashes
}
