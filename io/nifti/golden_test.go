package nifti

import (
	"bytes"
	"encoding/binary"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

// geometryFields lists, by name, every header field a mask must carry over from its image.
func geometryFields(h *Header) map[string]any {
	return map[string]any{
		"Version": h.Version, "ByteOrder": h.ByteOrder, "Dim": h.Dim, "PixDim": bitsOf(h.PixDim[:]),
		"XYZTUnits": h.XYZTUnits, "QformCode": h.QformCode, "SformCode": h.SformCode,
		"QuaternB": bitsOf([]float64{h.QuaternB}), "QuaternC": bitsOf([]float64{h.QuaternC}),
		"QuaternD": bitsOf([]float64{h.QuaternD}), "QoffsetX": bitsOf([]float64{h.QoffsetX}),
		"QoffsetY": bitsOf([]float64{h.QoffsetY}), "QoffsetZ": bitsOf([]float64{h.QoffsetZ}),
		"SrowX": bitsOf(h.SrowX[:]), "SrowY": bitsOf(h.SrowY[:]), "SrowZ": bitsOf(h.SrowZ[:]),
		"DimInfo": h.DimInfo, "SliceCode": h.SliceCode, "SliceStart": h.SliceStart,
		"SliceEnd": h.SliceEnd, "SliceDur": bitsOf([]float64{h.SliceDur}), "TOffset": bitsOf([]float64{h.TOffset}),
	}
}

func bitsOf(v []float64) [8]uint64 {
	var b [8]uint64
	for i, x := range v {
		b[i] = math.Float64bits(x)
	}
	return b
}

func compareGeometry(t *testing.T, what string, got, want *Header) {
	t.Helper()
	g, w := geometryFields(got), geometryFields(want)
	for name := range w {
		if g[name] != w[name] {
			t.Errorf("%s: %s = %v, want %v", what, name, g[name], w[name])
		}
	}
}

// TestMaskGolden derives masks from two real-looking images written by nibabel (the MNI152
// template geometry, NIfTI-1 LE; an oblique EPI, NIfTI-2 BE, 4D with one volume), writes them,
// and checks every geometry field survives, the mask fields are set, and the header bytes
// equal the golden files (go test -run TestMaskGolden -update rewrites them).
func TestMaskGolden(t *testing.T) {
	for _, ref := range []string{"ref_mni152_n1_le.nii.gz", "ref_oblique_n2_be.nii.gz"} {
		t.Run(ref, func(t *testing.T) {
			r, err := Open(filepath.Join("testdata/interop", ref))
			if err != nil {
				t.Fatal(err)
			}
			refH := r.Header()
			r.Close()
			mh := MaskHeader(refH, 3, "model attngate-v1 weights sha256:9f2c")
			compareGeometry(t, "MaskHeader", mh, refH)
			if mh.Datatype != Uint8 || mh.IntentCode != IntentLabel || mh.SclSlope != 1 || mh.SclInter != 0 ||
				mh.CalMin != 0 || mh.CalMax != 3 || mh.Descrip != "voxpipe model attngate-v1 weights sha256:9f2c" {
				t.Errorf("mask fields: %+v", mh)
			}

			golden := filepath.Join("testdata/golden", "mask_"+strings.TrimSuffix(ref, ".nii.gz")+".hdr.bin")
			hdr, _, err := encodeHeader(mh, false)
			if err != nil {
				t.Fatal(err)
			}
			if *update {
				if err := os.WriteFile(golden, hdr, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(hdr, want) {
				t.Errorf("mask header bytes differ from %s", golden)
			}

			out := filepath.Join(t.TempDir(), "mask.nii.gz")
			nx, ny, nz := refH.NX(), refH.NY(), refH.NZ()
			labels := make([]byte, nx*ny*nz)
			for i := range labels {
				labels[i] = byte(i % nx % 4)
			}
			if err := Write(out, mh, labels, DefaultWriteOptions()); err != nil {
				t.Fatal(err)
			}
			written, data, err := ReadUint8(out)
			if err != nil {
				t.Fatal(err)
			}
			compareGeometry(t, "written mask", written, refH)
			if !bytes.Equal(data, labels) {
				t.Errorf("labels differ after writing")
			}
			// The bytes in the file are the golden header too.
			s, err := openSource(out, osOpen)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			onDisk := make([]byte, len(want))
			if _, err := io.ReadFull(s, onDisk); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(onDisk, want) {
				t.Errorf("header bytes in %s differ from %s", out, golden)
			}
		})
	}
}

func TestMaskHeaderRules(t *testing.T) {
	t.Parallel()
	ref := testHeader(Float32, 2, binary.BigEndian, 10, 11, 12, 5)
	ref.IntentCode, ref.IntentName, ref.IntentP1 = 2003, "vector", 7
	ref.SclSlope, ref.SclInter = 0.5, 100
	ref.VoxOffset, ref.Magic, ref.ExtensionLen = 1024, "n+2", 464
	m := MaskHeader(ref, 7, strings.Repeat("é", 60))
	if m.Dim != [8]int64{3, 10, 11, 12, 1, 1, 1, 1} {
		t.Errorf("multi-volume reference gives dims %v", m.Dim)
	}
	if m.PixDim != ref.PixDim || m.Version != 2 || m.ByteOrder != binary.BigEndian {
		t.Errorf("pixdim/version/order not kept: %+v", m)
	}
	if m.IntentCode != IntentLabel || m.IntentName != "" || m.IntentP1 != 0 || m.CalMax != 7 {
		t.Errorf("intent/cal: %+v", m)
	}
	if len(m.Descrip) > 79 || !utf8.ValidString(m.Descrip) || !strings.HasPrefix(m.Descrip, "voxpipe éé") {
		t.Errorf("descrip %q (%d bytes)", m.Descrip, len(m.Descrip))
	}
	if ref.Dim[4] != 5 || ref.Datatype != Float32 {
		t.Errorf("MaskHeader modified its argument")
	}
	one := testHeader(Int16, 1, binary.LittleEndian, 10, 11, 12, 1)
	if m := MaskHeader(one, 1, "m"); m.Dim != one.Dim {
		t.Errorf("4D single-volume reference: dims %v, want %v kept", m.Dim, one.Dim)
	}
}
