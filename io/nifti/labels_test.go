package nifti

import (
	"encoding/binary"
	"errors"
	"math"
	"path/filepath"
	"slices"
	"testing"
)

func TestReadLabels(t *testing.T) {
	t.Parallel()
	want := []uint8{0, 1, 2, 3, 255, 7}
	enc := func(dt DataType, vals []float64) []byte {
		var b []byte
		for _, v := range vals {
			switch dt {
			case Uint8:
				b = append(b, uint8(v))
			case Int16:
				b = binary.LittleEndian.AppendUint16(b, uint16(int16(v)))
			case Int32:
				b = binary.LittleEndian.AppendUint32(b, uint32(int32(v)))
			case Float32:
				b = binary.LittleEndian.AppendUint32(b, math.Float32bits(float32(v)))
			case Float64:
				b = binary.LittleEndian.AppendUint64(b, math.Float64bits(v))
			}
		}
		return b
	}
	bits := map[DataType]int16{Uint8: 8, Int16: 16, Int32: 32, Float32: 32, Float64: 64}
	write := func(dt DataType, slope, inter float64, vals []float64) string {
		h := &Header{Version: 1, ByteOrder: binary.LittleEndian, Dim: [8]int64{3, 3, 2, 1, 1, 1, 1, 1}, Datatype: dt, BitPix: bits[dt],
			PixDim: [8]float64{1, 1, 1, 1}, SclSlope: slope, SclInter: inter, Magic: "n+1"}
		path := filepath.Join(t.TempDir(), "l.nii")
		if err := Write(path, h, enc(dt, vals), WriteOptions{}); err != nil {
			t.Fatal(err)
		}
		return path
	}
	plain := []float64{0, 1, 2, 3, 255, 7}
	for _, dt := range []DataType{Uint8, Int16, Int32, Float32, Float64} {
		_, got, err := ReadLabels(write(dt, 0, 0, plain))
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("%s: %v, %v; want %v", dt, got, err, want)
		}
	}
	// Scaled: stored 2v-1 with slope 0.5, intercept 0.5.
	scaled := make([]float64, len(plain))
	for i, v := range plain {
		scaled[i] = 2*v - 1
	}
	if _, got, err := ReadLabels(write(Int16, 0.5, 0.5, scaled)); err != nil || !slices.Equal(got, want) {
		t.Errorf("scaled int16: %v, %v", got, err)
	}
	for name, vals := range map[string][]float64{"fraction": {0, 1, 2.5, 3, 4, 5}, "negative": {0, -1, 2, 3, 4, 5}, "too big": {0, 1, 2, 300, 4, 5}} {
		dt := Float32
		if name != "fraction" {
			dt = Int16
		}
		if _, _, err := ReadLabels(write(dt, 0, 0, vals)); !errors.Is(err, ErrNotLabels) {
			t.Errorf("%s: err %v, want ErrNotLabels", name, err)
		}
	}
}
