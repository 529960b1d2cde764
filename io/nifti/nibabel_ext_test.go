package nifti

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"voxpipe/internal/testexec"
)

// nibabelPython is the interpreter the nibabel tests run; they are skipped when it has no
// nibabel (Debian: apt-get install python3-nibabel).
// The probe runs once for the package's tests (importing nibabel takes seconds).
func nibabelPython(t *testing.T) string {
	t.Helper()
	const python = "/usr/bin/python3"
	nibabelProbe.once.Do(func() { nibabelProbe.err = testexec.Cmd(t, python, "-c", "import nibabel").Run() })
	if nibabelProbe.err != nil {
		t.Skipf("no nibabel for %s (apt-get install python3-nibabel): %v", python, nibabelProbe.err)
	}
	return python
}

var nibabelProbe struct {
	once sync.Once
	err  error
}

// nibabelExtensions are written by both sides. nibabel knows codes 0-16 only, and strips
// trailing NULs from edata when reading (the afni payload ends in zeros for that reason).
var nibabelExtensions = []Extension{
	{Code: ExtCodeComment, Data: []byte("voxpipe mask; model attngate-v1")},
	{Code: ExtCodeAFNI, Data: []byte("<AFNI_attributes ni_form=\"ni_group\"/>\n\x00\x00")},
	{Code: ExtCodeComment, Data: []byte("8 bytes!")},
}

const nibabelReadScript = `
import json, sys
import nibabel as nib
import numpy as np
out = {}
for path in sys.argv[1:]:
    img = nib.load(path)
    hdr = img.header
    out[path] = {
        "extensions": [[int(e.get_code()), e.get_content().hex()] for e in hdr.extensions],
        "vox_offset": int(img.dataobj.offset),
        "data": np.asanyarray(img.dataobj).ravel(order="F").astype(int).tolist(),
    }
print(json.dumps(out))
`

// TestNibabelReadsOurExtensions: nibabel finds our extensions (codes and contents) and still
// reads the voxels at the vox_offset we derived from them.
func TestNibabelReadsOurExtensions(t *testing.T) {
	t.Parallel()
	python := nibabelPython(t)
	dir := t.TempDir()
	const nx, ny, nz = 5, 4, 3
	var paths []string
	for _, c := range []struct {
		ext     string
		version int
		order   binary.ByteOrder
	}{
		{".nii", 1, binary.LittleEndian},
		{".nii.gz", 2, binary.BigEndian},
		{".nii", 2, binary.LittleEndian},
		{".hdr", 1, binary.BigEndian},
		{".hdr", 2, binary.LittleEndian},
	} {
		path := filepath.Join(dir, fmt.Sprintf("ours_n%d_%s%s", c.version, orderName(c.order), c.ext))
		h := testHeader(Int16, c.version, c.order, nx, ny, nz)
		h.Extensions = nibabelExtensions
		if err := Write(path, h, formulaData(Int16, nx, ny, nz, 1), DefaultWriteOptions()); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, path)
	}
	out, err := testexec.Cmd(t, python, append([]string{"-c", nibabelReadScript}, paths...)...).Output()
	if err != nil {
		t.Fatalf("nibabel: %v\n%s", err, stderrOf(err))
	}
	var got map[string]struct {
		Extensions [][2]any `json:"extensions"`
		VoxOffset  int64    `json:"vox_offset"`
		Data       []int    `json:"data"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	for _, path := range paths {
		g, ok := got[path]
		if !ok {
			t.Fatalf("nibabel gave nothing for %s", path)
		}
		ours, err := ReadHeader(path)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: nibabel sees %v", filepath.Base(path), g.Extensions)
		if len(g.Extensions) != len(nibabelExtensions) {
			t.Fatalf("%s: nibabel sees %d extensions, want %d", path, len(g.Extensions), len(nibabelExtensions))
		}
		for i, e := range nibabelExtensions {
			code, _ := g.Extensions[i][0].(float64)
			content, _ := hex.DecodeString(fmt.Sprint(g.Extensions[i][1]))
			if int32(code) != e.Code || !bytes.Equal(content, bytes.TrimRight(e.Data, "\x00")) {
				t.Errorf("%s: nibabel's extension %d is %v %q, want %d %q", path, i, code, content, e.Code, e.Data)
			}
		}
		if want := ours.VoxOffset; g.VoxOffset != want {
			t.Errorf("%s: nibabel sees vox_offset %d, want %d", path, g.VoxOffset, want)
		}
		for i, v := range g.Data {
			x, y, z := i%nx, i/nx%ny, i/(nx*ny)
			if want := int(fixtureValue(Int16, x, y, z, 0)); v != want {
				t.Fatalf("%s: nibabel reads voxel (%d,%d,%d) = %d, want %d", path, x, y, z, v, want)
			}
		}
	}
}

func stderrOf(err error) []byte {
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.Stderr
	}
	return nil
}

const nibabelWriteScript = `
import sys
import nibabel as nib
import numpy as np
out = sys.argv[1]
x, y, z = np.indices((5, 4, 3))
data = (((x * 7 + y * 13 + z * 29) % 97) - 48) * 300
exts = [(6, b"voxpipe mask; model attngate-v1"),
        (4, b"<AFNI_attributes ni_form=\"ni_group\"/>\n\x00\x00"),
        (6, b"8 bytes!")]
for name, cls, endian in [("nib_n1_le.nii", nib.Nifti1Image, "<"), ("nib_n2_be.nii.gz", nib.Nifti2Image, ">"),
                          ("nib_n1_be.hdr", nib.Nifti1Pair, ">"), ("nib_n2_le.hdr", nib.Nifti2Pair, "<")]:
    img = cls(data.astype(endian + "i2"), np.eye(4))
    for code, content in exts:
        img.header.extensions.append(nib.nifti1.Nifti1Extension(code, content))
    nib.save(img, out + "/" + name)
`

// TestReadNibabelExtensions: extensions nibabel wrote (NIfTI-1 and -2, both byte orders,
// single files and pairs) come back with their codes and contents, padded as nibabel padded
// them.
func TestReadNibabelExtensions(t *testing.T) {
	t.Parallel()
	python := nibabelPython(t)
	dir := t.TempDir()
	if out, err := testexec.Cmd(t, python, "-c", nibabelWriteScript, dir).CombinedOutput(); err != nil {
		t.Fatalf("nibabel: %v\n%s", err, out)
	}
	for _, name := range []string{"nib_n1_le.nii", "nib_n2_be.nii.gz", "nib_n1_be.hdr", "nib_n2_le.hdr"} {
		path := filepath.Join(dir, name)
		if _, err := os.Stat(path); err != nil {
			t.Fatal(err)
		}
		h, err := ReadHeader(path)
		if err != nil {
			t.Fatal(err)
		}
		h2, data, err := ReadFloat32(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, got := range [][]Extension{h.Extensions, h2.Extensions} {
			if len(got) != len(nibabelExtensions) {
				t.Fatalf("%s: %d extensions, want %d", name, len(got), len(nibabelExtensions))
			}
			for i, e := range nibabelExtensions {
				if got[i].Code != e.Code || !bytes.Equal(got[i].Data, padded(e.Data)) {
					t.Errorf("%s: extension %d = %d %q, want %d %q", name, i, got[i].Code, got[i].Data, e.Code, padded(e.Data))
				}
			}
		}
		if got := h.Extensions[0].Text(); got != string(nibabelExtensions[0].Data) {
			t.Errorf("%s: Text %q", name, got)
		}
		var area int64
		for _, e := range nibabelExtensions {
			area += int64(len(padded(e.Data)) + 8)
		}
		if h.ExtensionLen != area {
			t.Errorf("%s: ExtensionLen %d, want %d", name, h.ExtensionLen, area)
		}
		for i, v := range data {
			x, y, z := i%5, i/5%4, i/20
			if want := float32(fixtureValue(Int16, x, y, z, 0)); v != want {
				t.Fatalf("%s: voxel (%d,%d,%d) = %v, want %v", name, x, y, z, v, want)
			}
		}
	}
}
