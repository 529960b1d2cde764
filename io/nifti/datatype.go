package nifti

import "strconv"

// Size is the number of bytes of one voxel of a supported datatype, 0 for any other code.
func (dt DataType) Size() int {
	switch dt {
	case Uint8, Int8:
		return 1
	case Int16, Uint16:
		return 2
	case Int32, Uint32, Float32:
		return 4
	case Float64:
		return 8
	}
	return 0
}

// Supported reports whether this package reads and writes dt.
func (dt DataType) Supported() bool { return dt.Size() != 0 }

// String is the NIfTI name of the datatype (lower case, as nibabel prints it), or
// "datatype(N)" for a code the standard does not define.
func (dt DataType) String() string {
	switch dt {
	case 0:
		return "unknown"
	case 1:
		return "binary"
	case Uint8:
		return "uint8"
	case Int16:
		return "int16"
	case Int32:
		return "int32"
	case Float32:
		return "float32"
	case 32:
		return "complex64"
	case Float64:
		return "float64"
	case 128:
		return "rgb24"
	case 255:
		return "all"
	case Int8:
		return "int8"
	case Uint16:
		return "uint16"
	case Uint32:
		return "uint32"
	case 1024:
		return "int64"
	case 1280:
		return "uint64"
	case 1536:
		return "float128"
	case 1792:
		return "complex128"
	case 2048:
		return "complex256"
	case 2304:
		return "rgba32"
	}
	return "datatype(" + strconv.Itoa(int(dt)) + ")"
}

// Int16Exact reports whether every stored value of dt is representable as int16, i.e. whether
// Reader.ReadSlicesInt16 accepts files of this datatype.
func Int16Exact(dt DataType) bool {
	return dt == Int16 || dt == Uint8 || dt == Int8
}
