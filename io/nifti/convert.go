package nifti

import (
	"encoding/binary"
	"math/bits"
	"unsafe"
)

// hostOrder is the byte order of this machine; raw samples handed to and from callers are in it.
var hostOrder binary.ByteOrder = func() binary.ByteOrder {
	x := uint16(1)
	if *(*byte)(unsafe.Pointer(&x)) == 1 {
		return binary.LittleEndian
	}
	return binary.BigEndian
}()

// swapBytes reverses the byte order of each size-byte sample of b in place, eight bytes at a
// time where it can.
func swapBytes(b []byte, size int) {
	if size == 1 {
		return
	}
	n := len(b) &^ 7
	le := binary.LittleEndian
	for i := 0; i < n; i += 8 {
		x := le.Uint64(b[i:])
		switch size {
		case 2:
			x = (x&0x00ff00ff00ff00ff)<<8 | (x>>8)&0x00ff00ff00ff00ff
		case 4:
			x = bits.RotateLeft64(bits.ReverseBytes64(x), 32)
		case 8:
			x = bits.ReverseBytes64(x)
		}
		le.PutUint64(b[i:], x)
	}
	for i := n; i+size <= len(b); i += size {
		for j := 0; j < size/2; j++ {
			b[i+j], b[i+size-1-j] = b[i+size-1-j], b[i+j]
		}
	}
}

// The views below reinterpret host-order sample bytes without copying. Callers guarantee the
// alignment: slices of the element type, or scratch buffers allocated as []uint64.

func bytesOf[T int8 | uint8 | int16 | uint16 | int32 | uint32 | uint64 | float32 | float64](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), len(s)*int(unsafe.Sizeof(s[0])))
}

func viewAs[T int8 | uint8 | int16 | uint16 | int32 | uint32 | float32 | float64](b []byte) []T {
	if len(b) == 0 {
		return nil
	}
	var zero T
	return unsafe.Slice((*T)(unsafe.Pointer(&b[0])), len(b)/int(unsafe.Sizeof(zero)))
}

// decodeFloat32 converts host-order samples of dt in raw to float32 in dst (len(dst) samples).
func decodeFloat32(dst []float32, raw []byte, dt DataType) {
	switch dt {
	case Uint8:
		widen(dst, raw[:len(dst)])
	case Int8:
		widen(dst, viewAs[int8](raw)[:len(dst)])
	case Int16:
		widen(dst, viewAs[int16](raw)[:len(dst)])
	case Uint16:
		widen(dst, viewAs[uint16](raw)[:len(dst)])
	case Int32:
		widen(dst, viewAs[int32](raw)[:len(dst)])
	case Uint32:
		widen(dst, viewAs[uint32](raw)[:len(dst)])
	case Float32:
		copy(dst, viewAs[float32](raw))
	case Float64:
		widen(dst, viewAs[float64](raw)[:len(dst)])
	default:
		panic("nifti: decodeFloat32 of " + dt.String())
	}
}

// decodeInt16 converts host-order samples of an Int16Exact datatype to int16.
func decodeInt16(dst []int16, raw []byte, dt DataType) {
	switch dt {
	case Uint8:
		widen(dst, raw[:len(dst)])
	case Int8:
		widen(dst, viewAs[int8](raw)[:len(dst)])
	case Int16:
		copy(dst, viewAs[int16](raw))
	default:
		panic("nifti: decodeInt16 of " + dt.String())
	}
}

// widen is the per-datatype conversion loop. Instantiated per type pair, it compiles to plain
// conversions without bounds checks; unrolled by 8, so that the conversions pipeline better
// (docs/perf.md).
func widen[D int16 | float32, S int8 | uint8 | int16 | uint16 | int32 | uint32 | float64](dst []D, src []S) {
	dst = dst[:len(src)]
	n := len(src) &^ 7
	for i := 0; i < n; i += 8 {
		s := src[i : i+8 : i+8]
		d := dst[i : i+8 : i+8]
		d[0], d[1], d[2], d[3] = D(s[0]), D(s[1]), D(s[2]), D(s[3])
		d[4], d[5], d[6], d[7] = D(s[4]), D(s[5]), D(s[6]), D(s[7])
	}
	for i := n; i < len(src); i++ {
		dst[i] = D(src[i])
	}
}

// scaleFloat32 applies v*slope+inter in float64 (one rounding, as nibabel does) in place.
func scaleFloat32(v []float32, slope, inter float64) {
	for i, x := range v {
		v[i] = float32(float64(x)*slope + inter)
	}
}
