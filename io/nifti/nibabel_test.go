package nifti

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"voxpipe/internal/testexec"
)

// TestNibabelReadsOurFiles has nibabel (an independent implementation) load files this package
// wrote, in every datatype, version, byte order and layout. It needs /usr/bin/python3 with
// nibabel (Debian: python3-nibabel) and is skipped without it.
func TestNibabelReadsOurFiles(t *testing.T) {
	t.Parallel()
	python := nibabelPython(t)
	dir := t.TempDir()
	type entry struct {
		File      string  `json:"file"`
		Dtype     string  `json:"dtype"`
		BigEndian bool    `json:"big_endian"`
		Version   int     `json:"version"`
		Dims      []int64 `json:"dims"`
	}
	var manifest []entry
	for _, dt := range allDatatypes {
		for _, version := range []int{1, 2} {
			for _, order := range byteOrders {
				for _, ext := range []string{".nii", ".nii.gz", ".hdr", ".img.gz"} {
					path := filepath.Join(dir, fmt.Sprintf("%s_n%d_%s%s", dt, version, orderName(order), ext))
					h := testHeader(dt, version, order, 5, 4, 3)
					if err := Write(path, h, formulaData(dt, 5, 4, 3, 1), DefaultWriteOptions()); err != nil {
						t.Fatal(err)
					}
					manifest = append(manifest, entry{path, dt.String(), order == byteOrders[1], version, []int64{5, 4, 3}})
				}
			}
		}
	}
	b, _ := json.Marshal(manifest)
	mf := filepath.Join(dir, "manifest.json")
	if err := os.WriteFile(mf, b, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := testexec.Cmd(t, python, "testdata/interop/check_ours.py", mf).CombinedOutput()
	t.Logf("%s", out)
	if err != nil {
		t.Fatalf("nibabel check failed: %v", err)
	}
}
