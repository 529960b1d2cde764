package nifti

import (
	"encoding/binary"
	"errors"
	"flag"
	"math"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite golden files and the fuzz seed corpus in testdata/")

var allDatatypes = []DataType{Uint8, Int8, Int16, Uint16, Int32, Uint32, Float32, Float64}

var byteOrders = []binary.ByteOrder{binary.LittleEndian, binary.BigEndian}

// fixtureValue is the voxel formula of testdata/interop/make_fixtures.py (values()), so files
// written by nibabel and by this package can be checked against the same numbers.
func fixtureValue(dt DataType, x, y, z, t int) float64 {
	base := float64((x*7 + y*13 + z*29 + t*31) % 97)
	switch dt {
	case Uint8:
		return base + 100
	case Int8:
		return base - 48
	case Int16:
		return (base - 48) * 300
	case Uint16:
		return base * 600
	case Int32:
		return (base - 48) * 40000000
	case Uint32:
		return base*40000000 + 123
	case Float32:
		return (base-48)*0.25 + 0.125
	case Float64:
		return (base - 48) / 3.0
	}
	panic("fixtureValue: " + dt.String())
}

// testHeader is a plausible header: oblique geometry with every geometry field set.
func testHeader(dt DataType, version int, order binary.ByteOrder, dims ...int64) *Header {
	h := &Header{
		Version: version, ByteOrder: order, Datatype: dt,
		PixDim:    [8]float64{-1, 0.9375, 0.875, 1.25, 2.5, 1, 1, 1},
		XYZTUnits: 10, QformCode: 1, SformCode: 2,
		QuaternB: -0.03125, QuaternC: 0.001953125, QuaternD: 0.1484375,
		QoffsetX: -101.5, QoffsetY: -87.25, QoffsetZ: -40,
		SrowX:   [4]float64{0.859375, -0.265625, 0, -101},
		SrowY:   [4]float64{0.265625, 0.859375, 0.125, -87.25},
		SrowZ:   [4]float64{0, -0.0625, 1.25, -40},
		Descrip: "voxpipe test", SclSlope: 1, DimInfo: 57, SliceCode: 1, SliceEnd: 2,
		SliceDur: 0.0625,
	}
	h.Dim[0] = int64(len(dims))
	for i := range h.Dim[1:] {
		h.Dim[i+1] = 1
	}
	copy(h.Dim[1:], dims)
	return h
}

// formulaData returns host-order raw samples of dt following fixtureValue over dims (x fastest).
func formulaData(dt DataType, nx, ny, nz, nt int) []byte {
	raw := make([]byte, nx*ny*nz*nt*dt.Size())
	i := 0
	for t := range nt {
		for z := range nz {
			for y := range ny {
				for x := range nx {
					putSample(raw[i*dt.Size():], dt, fixtureValue(dt, x, y, z, t))
					i++
				}
			}
		}
	}
	return raw
}

// putSample stores v as one host-order sample of dt.
func putSample(b []byte, dt DataType, v float64) {
	o := hostOrder
	switch dt {
	case Uint8:
		b[0] = uint8(v)
	case Int8:
		b[0] = uint8(int8(v))
	case Int16:
		o.PutUint16(b, uint16(int16(v)))
	case Uint16:
		o.PutUint16(b, uint16(v))
	case Int32:
		o.PutUint32(b, uint32(int32(v)))
	case Uint32:
		o.PutUint32(b, uint32(v))
	case Float32:
		o.PutUint32(b, math.Float32bits(float32(v)))
	case Float64:
		o.PutUint64(b, math.Float64bits(v))
	}
}

// sampleAt decodes host-order sample i of dt.
func sampleAt(raw []byte, dt DataType, i int) float64 {
	b := raw[i*dt.Size():]
	o := hostOrder
	switch dt {
	case Uint8:
		return float64(b[0])
	case Int8:
		return float64(int8(b[0]))
	case Int16:
		return float64(int16(o.Uint16(b)))
	case Uint16:
		return float64(o.Uint16(b))
	case Int32:
		return float64(int32(o.Uint32(b)))
	case Uint32:
		return float64(o.Uint32(b))
	case Float32:
		return float64(math.Float32frombits(o.Uint32(b)))
	case Float64:
		return math.Float64frombits(o.Uint64(b))
	}
	panic("sampleAt: " + dt.String())
}

// extremes returns host-order samples covering the datatype's range edges, zero, and a NaN
// and infinities for floats, repeated to n samples.
func extremes(dt DataType, n int) []byte {
	var vals []float64
	switch dt {
	case Uint8:
		vals = []float64{0, 1, 127, 128, 255}
	case Int8:
		vals = []float64{-128, -1, 0, 1, 127}
	case Int16:
		vals = []float64{math.MinInt16, -1, 0, 1, 255, 256, math.MaxInt16}
	case Uint16:
		vals = []float64{0, 1, 255, 256, 32768, math.MaxUint16}
	case Int32:
		vals = []float64{math.MinInt32, -1, 0, 1, 1 << 24, math.MaxInt32}
	case Uint32:
		vals = []float64{0, 1, 1 << 31, math.MaxUint32}
	case Float32:
		vals = []float64{0, math.Copysign(0, -1), 1.5, -3.25e-38, math.MaxFloat32, math.Inf(1), math.Inf(-1), math.NaN()}
	case Float64:
		vals = []float64{0, math.Copysign(0, -1), 1.0 / 3, -1e300, math.SmallestNonzeroFloat64, math.Inf(1), math.NaN()}
	}
	raw := make([]byte, n*dt.Size())
	for i := range n {
		putSample(raw[i*dt.Size():], dt, vals[i%len(vals)])
	}
	return raw
}

func orderName(o binary.ByteOrder) string {
	if o == binary.BigEndian {
		return "be"
	}
	return "le"
}

// wantErr checks that err wraps sentinel and names path.
func wantErr(t *testing.T, err, sentinel error, path string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want %v", sentinel)
	}
	if sentinel != nil && !errors.Is(err, sentinel) {
		t.Fatalf("error %q does not wrap %q", err, sentinel)
	}
	if path != "" && !strings.Contains(err.Error(), path) {
		t.Fatalf("error %q does not name the file %s", err, path)
	}
}

// writeFormula writes the formula volume (formulaData, seed 1) as a little-endian NIfTI-1 file
// named name in a fresh temporary folder and returns its path.
func writeFormula(t *testing.T, name string, dt DataType, nx, ny, nz int, opts WriteOptions) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	h := testHeader(dt, 1, binary.LittleEndian, int64(nx), int64(ny), int64(nz))
	if err := Write(path, h, formulaData(dt, nx, ny, nz, 1), opts); err != nil {
		t.Fatal(err)
	}
	return path
}
