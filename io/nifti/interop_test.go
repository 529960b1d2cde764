package nifti

import (
	"encoding/binary"
	"encoding/json"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// fixture is one entry of testdata/interop/fixtures.json, written by nibabel.
type fixture struct {
	File      string  `json:"file"`
	Dtype     string  `json:"dtype"`
	Version   int     `json:"version"`
	BigEndian bool    `json:"big_endian"`
	Dims      []int64 `json:"dims"`
	Note      string  `json:"note"`
	Slope     *string `json:"slope"`
	Inter     *string `json:"inter"`
}

func loadFixtures(t *testing.T) []fixture {
	t.Helper()
	b, err := os.ReadFile("testdata/interop/fixtures.json")
	if err != nil {
		t.Fatal(err)
	}
	var fs []fixture
	if err := json.Unmarshal(b, &fs); err != nil {
		t.Fatal(err)
	}
	return fs
}

func datatypeNamed(name string) DataType {
	for _, dt := range allDatatypes {
		if dt.String() == name {
			return dt
		}
	}
	return 0
}

// TestReadNibabelFixtures reads every file nibabel wrote and checks header and voxels against
// the formula they were generated from.
func TestReadNibabelFixtures(t *testing.T) {
	t.Parallel()
	for _, f := range loadFixtures(t) {
		t.Run(f.File, func(t *testing.T) {
			path := filepath.Join("testdata/interop", f.File)
			dt := datatypeNamed(f.Dtype)
			if f.Note == "unsupported" {
				_, err := Open(path)
				wantErr(t, err, ErrUnsupportedDatatype, path)
				if !strings.Contains(err.Error(), f.Dtype) {
					t.Errorf("error %q does not name the datatype %s", err, f.Dtype)
				}
				return
			}
			volumes := 1
			if len(f.Dims) == 4 {
				volumes = int(f.Dims[3])
			}
			if volumes > 1 {
				_, err := Open(path)
				wantErr(t, err, ErrMultiVolume, path)
			}
			for vol := range volumes {
				var opts []OpenOption
				if volumes > 1 {
					opts = append(opts, WithVolume(vol))
				}
				r, err := Open(path, opts...)
				if err != nil {
					t.Fatal(err)
				}
				h := r.Header()
				wantOrder := binary.ByteOrder(binary.LittleEndian)
				if f.BigEndian {
					wantOrder = binary.BigEndian
				}
				if h.Version != f.Version || h.ByteOrder != wantOrder || h.Datatype != dt {
					t.Errorf("version %d order %v datatype %v, want %d %v %v", h.Version, h.ByteOrder, h.Datatype, f.Version, wantOrder, dt)
				}
				if h.Dim[0] != int64(len(f.Dims)) || h.NX() != int(f.Dims[0]) || h.NY() != int(f.Dims[1]) || h.NZ() != int(f.Dims[2]) {
					t.Errorf("dims %v, want %v", h.Dim, f.Dims)
				}
				if h.QformCode != 1 || h.SformCode != 2 || h.XYZTUnits != 10 {
					t.Errorf("qform %d sform %d units %d, want 1 2 10", h.QformCode, h.SformCode, h.XYZTUnits)
				}
				if want := "nibabel fixture " + f.File; h.Descrip != want {
					t.Errorf("descrip %q, want %q", h.Descrip, want)
				}
				if strings.Contains(f.Note, "extension") && h.ExtensionLen == 0 {
					t.Errorf("ExtensionLen 0 for a file with an extension")
				}
				n := r.SliceVoxels() * r.Depth()
				got := make([]float32, n)
				if k, err := r.ReadSlicesFloat32(got, r.Depth()); err != nil || k != r.Depth() {
					t.Fatalf("ReadSlicesFloat32: %d, %v", k, err)
				}
				if k, err := r.ReadSlicesFloat32(got, 1); k != 0 || err != io.EOF {
					t.Errorf("read past the end: %d, %v; want 0, io.EOF", k, err)
				}
				if err := r.Close(); err != nil {
					t.Fatal(err)
				}
				for i, v := range got {
					x, y, z := i%r.SliceVoxels()%h.NX(), i%r.SliceVoxels()/h.NX(), i/r.SliceVoxels()
					if want := float32(fixtureValue(dt, x, y, z, vol)); v != want {
						t.Fatalf("voxel (%d,%d,%d,%d) = %v, want %v", x, y, z, vol, v, want)
					}
				}
				checkScaling(t, path, f, opts, got)
			}
			if strings.HasSuffix(f.File, ".hdr") || strings.HasSuffix(f.File, ".hdr.gz") {
				img := strings.Replace(path, ".hdr", ".img", 1)
				a, b := readAllRaw(t, path), readAllRaw(t, img)
				if string(a) != string(b) {
					t.Errorf("opening the pair by its .img gives other data")
				}
			}
		})
	}
}

func checkScaling(t *testing.T, path string, f fixture, opts []OpenOption, stored []float32) {
	t.Helper()
	slope, inter := 1.0, 0.0
	if f.Slope != nil {
		if s := parseFloat(*f.Slope); !math.IsNaN(s) {
			slope, inter = s, parseFloat(*f.Inter)
		}
	}
	_, scaled, err := ReadFloat32(path, opts...)
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range stored {
		if want := float32(float64(v)*slope + inter); scaled[i] != want {
			t.Fatalf("scaled voxel %d = %v, want %v (slope %v inter %v)", i, scaled[i], want, slope, inter)
		}
	}
}

func parseFloat(s string) float64 {
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		panic(err)
	}
	return v
}

// readAllRaw returns the raw host-order bytes of the (single-volume) file at path.
func readAllRaw(t *testing.T, path string, opts ...OpenOption) []byte {
	t.Helper()
	r, err := Open(path, opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	h := r.Header()
	buf := make([]byte, r.SliceVoxels()*r.Depth()*h.Datatype.Size())
	if _, err := r.ReadSlicesRaw(buf, r.Depth()); err != nil {
		t.Fatal(err)
	}
	return buf
}
