package nifti

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
)

// Header sizes (sizeof_hdr) and the offsets where single-file data may start at the earliest:
// the header plus the 4-byte extension flag.
const (
	sizeofHdr1 = 348
	sizeofHdr2 = 540
	dataStart1 = sizeofHdr1 + 4
	dataStart2 = sizeofHdr2 + 4
)

// Limits on what a header may declare. They stop absurd headers before anything is sized by
// them; real volumes (voxpipe goes up to 512x512x1000) are far below.
const (
	// MaxDim is the largest extent accepted along any axis.
	MaxDim = 1 << 24
	// MaxVoxels is the largest number of voxels of one 3D volume (2^34: 64 GiB as float32).
	MaxVoxels = 1 << 34
	// maxTotalVoxels bounds all volumes of a file together, keeping byte offsets far from
	// int64 overflow.
	maxTotalVoxels = 1 << 40
)

// n2MagicTail follows "n+2\0" / "ni2\0": it catches files mangled by text-mode transfers.
var n2MagicTail = []byte{'\r', '\n', 0x1a, '\n'}

// detectHeader identifies the version and byte order from the first 4 bytes (sizeof_hdr).
func detectHeader(first4 []byte) (version int, order binary.ByteOrder, size int, err error) {
	le := binary.LittleEndian.Uint32(first4)
	be := binary.BigEndian.Uint32(first4)
	switch {
	case le == sizeofHdr1:
		return 1, binary.LittleEndian, sizeofHdr1, nil
	case be == sizeofHdr1:
		return 1, binary.BigEndian, sizeofHdr1, nil
	case le == sizeofHdr2:
		return 2, binary.LittleEndian, sizeofHdr2, nil
	case be == sizeofHdr2:
		return 2, binary.BigEndian, sizeofHdr2, nil
	}
	return 0, nil, 0, fmt.Errorf("%w: sizeof_hdr is %d (0x%08x), want 348 or 540", ErrNotNIfTI, int32(le), le)
}

// decodeHeader decodes a complete header of the given version (len(b) >= its size) and checks
// its magic and vox_offset. Geometry is checked separately by checkGeometry.
func decodeHeader(b []byte, version int, order binary.ByteOrder) (*Header, error) {
	h, voxOffset := decodeFields(b, version, order)
	if version == 1 {
		magic := b[344:348]
		if magic[3] != 0 || (string(magic[:3]) != "n+1" && string(magic[:3]) != "ni1") {
			return nil, badMagic(magic)
		}
	} else {
		magic := b[4:12]
		if magic[3] != 0 || (string(magic[:3]) != "n+2" && string(magic[:3]) != "ni2") {
			return nil, badMagic(magic)
		}
		if !bytes.Equal(magic[4:], n2MagicTail) {
			return nil, fmt.Errorf("%w: NIfTI-2 magic signature damaged (%q; text-mode transfer?)", ErrCorrupt, magic)
		}
	}
	// NIfTI-1 stores vox_offset as a float: it must hold a whole, non-negative byte count.
	if !validVoxOffset(voxOffset) {
		return nil, fmt.Errorf("%w: vox_offset %v is not a valid byte offset", ErrCorrupt, voxOffset)
	}
	if h.Magic[1] == '+' && h.VoxOffset < int64(headerSize(version)) {
		return nil, fmt.Errorf("%w: vox_offset %d lies inside the %d-byte header", ErrCorrupt, h.VoxOffset, headerSize(version))
	}
	return h, nil
}

func validVoxOffset(v float64) bool { return v >= 0 && v == math.Trunc(v) && v <= 1<<53 }

// decodeFields decodes every field of a header of the given version (len(b) >= its size)
// without checking any. Magic is the stored magic without its NUL padding (for NIfTI-2, its
// first 3 bytes when they and the 4th are those of a NIfTI-2 magic, whatever follows: the
// tail is checked by decodeHeader). It also returns vox_offset as stored; h.VoxOffset is that
// value when it is a valid byte offset (validVoxOffset), else 0.
func decodeFields(b []byte, version int, order binary.ByteOrder) (*Header, float64) {
	d := fieldReader{b: b, o: order}
	h := &Header{Version: version, ByteOrder: order}
	var voxOffset float64
	if version == 1 {
		h.DimInfo = b[39]
		for i := range h.Dim {
			h.Dim[i] = int64(d.i16(40 + 2*i))
		}
		h.IntentP1, h.IntentP2, h.IntentP3 = d.f32(56), d.f32(60), d.f32(64)
		h.IntentCode = int32(d.i16(68))
		h.Datatype = DataType(d.i16(70))
		h.BitPix = d.i16(72)
		h.SliceStart = int64(d.i16(74))
		for i := range h.PixDim {
			h.PixDim[i] = d.f32(76 + 4*i)
		}
		voxOffset = d.f32(108)
		h.SclSlope, h.SclInter = d.f32(112), d.f32(116)
		h.SliceEnd = int64(d.i16(120))
		h.SliceCode, h.XYZTUnits = b[122], b[123]
		h.CalMax, h.CalMin = d.f32(124), d.f32(128)
		h.SliceDur, h.TOffset = d.f32(132), d.f32(136)
		h.Descrip, h.AuxFile = cString(b[148:228]), cString(b[228:252])
		h.QformCode, h.SformCode = int32(d.i16(252)), int32(d.i16(254))
		h.QuaternB, h.QuaternC, h.QuaternD = d.f32(256), d.f32(260), d.f32(264)
		h.QoffsetX, h.QoffsetY, h.QoffsetZ = d.f32(268), d.f32(272), d.f32(276)
		for i := range 4 {
			h.SrowX[i], h.SrowY[i], h.SrowZ[i] = d.f32(280+4*i), d.f32(296+4*i), d.f32(312+4*i)
		}
		h.IntentName = cString(b[328:344])
		h.Magic = string(bytes.TrimRight(b[344:348], "\x00"))
	} else {
		magic := b[4:12]
		if magic[3] == 0 && (string(magic[:3]) == "n+2" || string(magic[:3]) == "ni2") {
			h.Magic = string(magic[:3])
		} else {
			h.Magic = string(bytes.TrimRight(magic, "\x00"))
		}
		h.Datatype = DataType(d.i16(12))
		h.BitPix = d.i16(14)
		for i := range h.Dim {
			h.Dim[i] = d.i64(16 + 8*i)
		}
		h.IntentP1, h.IntentP2, h.IntentP3 = d.f64(80), d.f64(88), d.f64(96)
		for i := range h.PixDim {
			h.PixDim[i] = d.f64(104 + 8*i)
		}
		voxOffset = float64(d.i64(168))
		h.SclSlope, h.SclInter = d.f64(176), d.f64(184)
		h.CalMax, h.CalMin = d.f64(192), d.f64(200)
		h.SliceDur, h.TOffset = d.f64(208), d.f64(216)
		h.SliceStart, h.SliceEnd = d.i64(224), d.i64(232)
		h.Descrip, h.AuxFile = cString(b[240:320]), cString(b[320:344])
		h.QformCode, h.SformCode = d.i32(344), d.i32(348)
		h.QuaternB, h.QuaternC, h.QuaternD = d.f64(352), d.f64(360), d.f64(368)
		h.QoffsetX, h.QoffsetY, h.QoffsetZ = d.f64(376), d.f64(384), d.f64(392)
		for i := range 4 {
			h.SrowX[i], h.SrowY[i], h.SrowZ[i] = d.f64(400+8*i), d.f64(432+8*i), d.f64(464+8*i)
		}
		// slice_code and xyzt_units are int32 in NIfTI-2 but only their low byte has meaning.
		h.SliceCode, h.XYZTUnits = uint8(d.i32(496)), uint8(d.i32(500))
		h.IntentCode = d.i32(504)
		h.IntentName = cString(b[508:524])
		h.DimInfo = b[524]
	}
	if validVoxOffset(voxOffset) {
		h.VoxOffset = int64(voxOffset)
	}
	return h, voxOffset
}

func badMagic(magic []byte) error {
	if bytes.Count(magic, []byte{0}) == len(magic) {
		return fmt.Errorf("%w: no NIfTI magic (an Analyze 7.5 header?)", ErrNotNIfTI)
	}
	return fmt.Errorf("%w: bad magic %q", ErrNotNIfTI, magic)
}

func headerSize(version int) int {
	if version == 2 {
		return sizeofHdr2
	}
	return sizeofHdr1
}

// geometry is what a checked header implies for the voxel data.
type geometry struct {
	dt          DataType
	elemSize    int
	nx, ny, nz  int
	sliceVoxels int
	sliceBytes  int64
	volVoxels   int64
	volBytes    int64
	volumes     int64 // product of dims 4..7
}

// checkGeometry validates datatype and dims. It is the only place where header-declared sizes
// become numbers that anything may be sized by.
func checkGeometry(h *Header) (geometry, error) {
	var g geometry
	g.dt = h.Datatype
	g.elemSize = h.Datatype.Size()
	if g.elemSize == 0 {
		return g, fmt.Errorf("%w: %s (code %d)", ErrUnsupportedDatatype, h.Datatype, int16(h.Datatype))
	}
	nd := h.Dim[0]
	if nd < 1 || nd > 7 {
		return g, fmt.Errorf("%w: dim[0] = %d, want 1..7", ErrCorrupt, nd)
	}
	var dims [8]int64
	for i := 1; i <= 7; i++ {
		dims[i] = 1
		if int64(i) > nd {
			continue
		}
		switch d := h.Dim[i]; {
		case d < 1:
			return g, fmt.Errorf("%w: dim[%d] = %d, want >= 1", ErrCorrupt, i, d)
		case d > MaxDim:
			return g, fmt.Errorf("%w: dim[%d] = %d exceeds %d", ErrTooLarge, i, d, MaxDim)
		default:
			dims[i] = d
		}
	}
	// Each factor is <= MaxDim = 2^24 and every product is bounded before it is formed, so
	// nothing here can overflow int64.
	vox := dims[1] * dims[2]
	if vox > MaxVoxels/dims[3] {
		return g, tooMany(h, MaxVoxels)
	}
	vox *= dims[3]
	total, vols := vox, int64(1)
	for i := 4; i <= 7; i++ {
		if total > maxTotalVoxels/dims[i] {
			return g, tooMany(h, maxTotalVoxels)
		}
		total *= dims[i]
		vols *= dims[i]
	}
	volBytes := vox * int64(g.elemSize)
	if volBytes > math.MaxInt {
		return g, fmt.Errorf("%w: %d-byte volume does not fit in memory on this platform", ErrTooLarge, volBytes)
	}
	g.nx, g.ny, g.nz = int(dims[1]), int(dims[2]), int(dims[3])
	g.sliceVoxels = g.nx * g.ny
	g.sliceBytes = int64(g.sliceVoxels) * int64(g.elemSize)
	g.volVoxels, g.volBytes, g.volumes = vox, volBytes, vols
	return g, nil
}

// Volumes is the number of 3D volumes: the product of dims 4..7 that dim[0] covers (1 for a 3D
// image). Values below 1 count as 1; Open rejects such headers anyway.
func (h *Header) Volumes() int64 {
	v := int64(1)
	for i := int64(4); i <= min(h.Dim[0], 7); i++ {
		v *= max(h.Dim[i], 1)
	}
	return v
}

func tooMany(h *Header, limit int64) error {
	return fmt.Errorf("%w: dims %v exceed %d voxels", ErrTooLarge, h.Dim[1:h.Dim[0]+1], limit)
}

// encodeHeader lays out h as a NIfTI-1 or NIfTI-2 header, the 4-byte extender (all zero
// without extensions, 1 0 0 0 with) and h.Extensions, each padded to a multiple of 16 bytes.
// pair selects the "ni1"/"ni2" magic and vox_offset 0 of a .hdr/.img pair; otherwise
// "n+1"/"n+2" and the data right after the extensions: vox_offset is the header size + 4 +
// the extensions' sizes, a multiple of 16. Datatype, BitPix, VoxOffset, Magic and
// ExtensionLen are derived, not taken from h. It also returns where the voxels go (Layout).
func encodeHeader(h *Header, pair bool) ([]byte, Layout, error) {
	g, err := checkGeometry(h)
	if err != nil {
		return nil, Layout{}, err
	}
	order := h.ByteOrder
	if order == nil {
		order = hostOrder
	}
	version := h.Version
	if version == 0 {
		version = 1
	}
	if version != 1 && version != 2 {
		return nil, Layout{}, fmt.Errorf("nifti: cannot write header version %d", h.Version)
	}
	for _, s := range []struct {
		name, v string
		max     int
	}{{"descrip", h.Descrip, 80}, {"aux_file", h.AuxFile, 24}, {"intent_name", h.IntentName, 16}} {
		if len(s.v) > s.max {
			return nil, Layout{}, fmt.Errorf("nifti: %s is %d bytes, the field holds %d", s.name, len(s.v), s.max)
		}
	}
	size := headerSize(version)
	area, err := extensionArea(h.Extensions)
	if err != nil {
		return nil, Layout{}, err
	}
	b := make([]byte, size+4, size+4+int(area))
	if len(h.Extensions) > 0 {
		b = appendExtensions(b, h.Extensions, order)
		b[size] = 1
	}
	voxOffset := int64(len(b)) // at most maxExtensionBytes past the header: exact as a float32
	if pair {
		voxOffset = 0 // a pair's .hdr leaves vox_offset 0
	}
	w := fieldWriter{b: b, o: order}
	w.i32(0, int32(size))
	if version == 1 {
		if err := fitsNIfTI1(h); err != nil {
			return nil, Layout{}, err
		}
		encodeFields1(w, h, pair, voxOffset)
	} else {
		encodeFields2(w, h, pair, voxOffset)
	}
	return b, g.layout(voxOffset), nil
}

// fitsNIfTI1 refuses a header whose integer fields do not fit NIfTI-1's int16.
func fitsNIfTI1(h *Header) error {
	fields := []struct {
		name string
		v    int64
	}{
		{"intent_code", int64(h.IntentCode)}, {"slice_start", h.SliceStart}, {"slice_end", h.SliceEnd},
		{"qform_code", int64(h.QformCode)}, {"sform_code", int64(h.SformCode)},
	}
	for i, d := range h.Dim {
		fields = append(fields, struct {
			name string
			v    int64
		}{fmt.Sprintf("dim[%d]", i), d})
	}
	for _, f := range fields {
		if f.v < math.MinInt16 || f.v > math.MaxInt16 {
			return fmt.Errorf("nifti: %s %d does not fit NIfTI-1 (int16); write NIfTI-2", f.name, f.v)
		}
	}
	return nil
}

// encodeFields1 writes h's fields at their NIfTI-1 offsets (after sizeof_hdr), BitPix derived
// from the datatype and vox_offset as given (a pair's stays 0).
func encodeFields1(w fieldWriter, h *Header, pair bool, voxOffset int64) {
	b := w.b
	b[38] = 'r' // "regular", as niftilib writes it for Analyze readers
	b[39] = h.DimInfo
	for i, d := range h.Dim {
		w.i16(40+2*i, int16(d))
	}
	w.f32(56, h.IntentP1)
	w.f32(60, h.IntentP2)
	w.f32(64, h.IntentP3)
	w.i16(68, int16(h.IntentCode))
	w.i16(70, int16(h.Datatype))
	w.i16(72, int16(8*h.Datatype.Size()))
	w.i16(74, int16(h.SliceStart))
	for i, p := range h.PixDim {
		w.f32(76+4*i, p)
	}
	w.f32(108, float64(voxOffset))
	w.f32(112, h.SclSlope)
	w.f32(116, h.SclInter)
	w.i16(120, int16(h.SliceEnd))
	b[122], b[123] = h.SliceCode, h.XYZTUnits
	w.f32(124, h.CalMax)
	w.f32(128, h.CalMin)
	w.f32(132, h.SliceDur)
	w.f32(136, h.TOffset)
	copy(b[148:228], h.Descrip)
	copy(b[228:252], h.AuxFile)
	w.i16(252, int16(h.QformCode))
	w.i16(254, int16(h.SformCode))
	w.f32(256, h.QuaternB)
	w.f32(260, h.QuaternC)
	w.f32(264, h.QuaternD)
	w.f32(268, h.QoffsetX)
	w.f32(272, h.QoffsetY)
	w.f32(276, h.QoffsetZ)
	for i := range 4 {
		w.f32(280+4*i, h.SrowX[i])
		w.f32(296+4*i, h.SrowY[i])
		w.f32(312+4*i, h.SrowZ[i])
	}
	copy(b[328:344], h.IntentName)
	copy(b[344:348], magicFor(1, pair))
}

// encodeFields2 writes h's fields at their NIfTI-2 offsets (after sizeof_hdr), as
// encodeFields1 does.
func encodeFields2(w fieldWriter, h *Header, pair bool, voxOffset int64) {
	b := w.b
	copy(b[4:8], magicFor(2, pair))
	copy(b[8:12], n2MagicTail)
	w.i16(12, int16(h.Datatype))
	w.i16(14, int16(8*h.Datatype.Size()))
	for i, d := range h.Dim {
		w.i64(16+8*i, d)
	}
	w.f64(80, h.IntentP1)
	w.f64(88, h.IntentP2)
	w.f64(96, h.IntentP3)
	for i, p := range h.PixDim {
		w.f64(104+8*i, p)
	}
	w.i64(168, voxOffset)
	w.f64(176, h.SclSlope)
	w.f64(184, h.SclInter)
	w.f64(192, h.CalMax)
	w.f64(200, h.CalMin)
	w.f64(208, h.SliceDur)
	w.f64(216, h.TOffset)
	w.i64(224, h.SliceStart)
	w.i64(232, h.SliceEnd)
	copy(b[240:320], h.Descrip)
	copy(b[320:344], h.AuxFile)
	w.i32(344, h.QformCode)
	w.i32(348, h.SformCode)
	w.f64(352, h.QuaternB)
	w.f64(360, h.QuaternC)
	w.f64(368, h.QuaternD)
	w.f64(376, h.QoffsetX)
	w.f64(384, h.QoffsetY)
	w.f64(392, h.QoffsetZ)
	for i := range 4 {
		w.f64(400+8*i, h.SrowX[i])
		w.f64(432+8*i, h.SrowY[i])
		w.f64(464+8*i, h.SrowZ[i])
	}
	w.i32(496, int32(h.SliceCode))
	w.i32(500, int32(h.XYZTUnits))
	w.i32(504, h.IntentCode)
	copy(b[508:524], h.IntentName)
	b[524] = h.DimInfo
}

func magicFor(version int, pair bool) string {
	m := []byte("n+1\x00")
	if pair {
		m[1] = 'i'
	}
	m[2] = byte('0' + version)
	return string(m)
}

func cString(b []byte) string {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	return string(b)
}

type fieldReader struct {
	b []byte
	o binary.ByteOrder
}

func (r fieldReader) i16(off int) int16 { return int16(r.o.Uint16(r.b[off:])) }
func (r fieldReader) i32(off int) int32 { return int32(r.o.Uint32(r.b[off:])) }
func (r fieldReader) i64(off int) int64 { return int64(r.o.Uint64(r.b[off:])) }
func (r fieldReader) f32(off int) float64 {
	return float64(math.Float32frombits(r.o.Uint32(r.b[off:])))
}
func (r fieldReader) f64(off int) float64 { return math.Float64frombits(r.o.Uint64(r.b[off:])) }

type fieldWriter struct {
	b []byte
	o binary.ByteOrder
}

func (w fieldWriter) i16(off int, v int16) { w.o.PutUint16(w.b[off:], uint16(v)) }
func (w fieldWriter) i32(off int, v int32) { w.o.PutUint32(w.b[off:], uint32(v)) }
func (w fieldWriter) i64(off int, v int64) { w.o.PutUint64(w.b[off:], uint64(v)) }
func (w fieldWriter) f32(off int, v float64) {
	w.o.PutUint32(w.b[off:], math.Float32bits(float32(v)))
}
func (w fieldWriter) f64(off int, v float64) { w.o.PutUint64(w.b[off:], math.Float64bits(v)) }
