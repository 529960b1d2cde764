package nifti

import "encoding/binary"

// DataType is the NIfTI datatype code of the stored voxel values.
type DataType int16

// The datatypes voxpipe reads. Others (RGB, complex, int64, float128...) are refused with
// ErrUnsupportedDatatype.
const (
	Uint8   DataType = 2
	Int16   DataType = 4
	Int32   DataType = 8
	Float32 DataType = 16
	Float64 DataType = 64
	Int8    DataType = 256
	Uint16  DataType = 512
	Uint32  DataType = 768
)

// NIfTI codes used when writing masks.
const (
	IntentLabel = 1002 // NIFTI_INTENT_LABEL
)

// Header is the decoded NIfTI header, the same struct for both versions. Fields keep the
// widest type of the two versions (NIfTI-2 widens dims to int64 and floats to float64), so a
// NIfTI-1 header survives a round trip unchanged.
type Header struct {
	Version   int              // 1 or 2
	ByteOrder binary.ByteOrder // of the file it was read from; writers use it too

	DimInfo      uint8
	Dim          [8]int64 // Dim[0] is the number of dimensions
	IntentP1     float64
	IntentP2     float64
	IntentP3     float64
	IntentCode   int32
	Datatype     DataType
	BitPix       int16
	SliceStart   int64
	PixDim       [8]float64 // PixDim[0] is qfac
	VoxOffset    int64
	SclSlope     float64
	SclInter     float64
	SliceEnd     int64
	SliceCode    uint8
	XYZTUnits    uint8
	CalMax       float64
	CalMin       float64
	SliceDur     float64
	TOffset      float64
	Descrip      string // at most 80 bytes
	AuxFile      string // at most 24 bytes
	QformCode    int32
	SformCode    int32
	QuaternB     float64
	QuaternC     float64
	QuaternD     float64
	QoffsetX     float64
	QoffsetY     float64
	QoffsetZ     float64
	SrowX        [4]float64
	SrowY        [4]float64
	SrowZ        [4]float64
	IntentName   string // at most 16 bytes
	Magic        string // "n+1", "ni1", "n+2", "ni2"
	ExtensionLen int64  // bytes of header extensions between the header and VoxOffset (informational)

	// Extensions are the header extensions, in file order. Readers fill them from the bytes
	// between the extender and vox_offset (the rest of the .hdr of a pair), leniently (see
	// Extension); writers write them after the extender and derive vox_offset from their size.
	Extensions []Extension
}

// NX, NY, NZ are the volume's extents (1 for dimensions the file does not have).
// Swapped reports whether the file's byte order differs from this machine's.
func (h *Header) Swapped() bool { return h.ByteOrder != hostOrder }

func (h *Header) NX() int { return dimOr1(h, 1) }
func (h *Header) NY() int { return dimOr1(h, 2) }
func (h *Header) NZ() int { return dimOr1(h, 3) }

func dimOr1(h *Header, i int) int {
	if int64(i) > h.Dim[0] || h.Dim[i] < 1 {
		return 1
	}
	return int(h.Dim[i])
}
