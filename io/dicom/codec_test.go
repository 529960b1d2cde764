package dicom

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"voxpipe/internal/dicomtest"
)

// Real-world compressed files among pydicom's test files (12-bit JPEG extended from two
// sources, 16-bit signed JPEG-LS lossless) decode exactly as dcmtk's own decoders
// (dcmdjpeg, dcmdjpls) decode them.
func TestPydicomCompressedAgainstDcmtk(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat(pydicomFiles); err != nil {
		t.Skipf("pydicom's test files are not installed (apt-get install python3-pydicom): %v", err)
	}
	for name, tool := range map[string]string{"JPEG-lossy.dcm": "dcmdjpeg", "JPGExtended.dcm": "dcmdjpeg", "MR_small_jpeg_ls_lossless.dcm": "dcmdjpls"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			in := filepath.Join(pydicomFiles, name)
			f, err := ParseFile(in)
			if err != nil {
				t.Fatal(err)
			}
			got := make([]byte, f.frameBytes()*int64(f.NumberOfFrames))
			fb := f.frameBytes()
			if err := readFile(f, nil, func(i int) []byte { return got[int64(i)*fb : int64(i+1)*fb] }, new([]byte)); err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(in)
			if err != nil {
				t.Fatal(err)
			}
			want, ok := dicomtest.NativePixels(dicomtest.Transcode(t, b, tool, "+te"))
			if !ok || len(want) < len(got) {
				t.Fatalf("%s wrote no pixel data of %d bytes", tool, len(got))
			}
			if hostBigEndian {
				swap(got, f.BitsAllocated/8)
			}
			if !bytes.Equal(got, want[:len(got)]) {
				t.Errorf("%s decodes otherwise than %s", name, tool)
			}
		})
	}
}
