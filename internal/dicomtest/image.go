package dicomtest

import (
	"bytes"
	"fmt"
	"strings"
)

// Image describes one MR image file. Optional attributes are written only where set.
type Image struct {
	Syntax      string // the data set's transfer syntax; "": explicit VR little endian
	Declare     string // the syntax the meta group names, where not Syntax
	FullMeta    bool   // a meta group with its group length, version and SOP instance UID
	PrivateJunk bool   // a private undefined-length sequence and a private blob first
	IDs         IDs
	Geometry    Geometry
	Pixels      Pixels
}

// IDs are the image's identifying attributes.
type IDs struct {
	StudyUID, SeriesUID, SOPUID string // SOPUID: where set
	Number, Instance            int    // SeriesNumber, InstanceNumber
	StudyDate, Description      string // where set
	PatientName, PatientID      string // where set
	Echo                        int    // EchoNumbers, where > 0
	FrameOfReference            string // FrameOfReferenceUID, where set
	// Complete writes the patient and study attributes a scanner's file carries beyond the
	// UIDs (birth date, sex, study time and ID, accession number, referring physician), as
	// fixed values.
	Complete bool
}

// Geometry places the image: rows x columns pixels at Position, or, for an enhanced
// multi-frame image, one position per frame.
type Geometry struct {
	Rows, Columns  int
	Position       [3]float64 // ImagePositionPatient, where FramePositions is nil
	Orientation    [6]float64
	Spacing        [2]float64 // PixelSpacing: between rows, between columns
	Thickness      float64    // SliceThickness, where > 0
	Frames         int        // NumberOfFrames, where > 0
	FramePositions [][3]float64
}

// Pixels are the image's samples, one per pixel (of every frame, frame after frame).
type Pixels struct {
	BitsAllocated    int // 8, 16 or 32; 0: 16
	BitsStored       int // 0: BitsAllocated
	Signed           bool
	Slope, Intercept float64  // rescale, where Slope != 0
	Values           []uint32 // written in BitsAllocated bits each
	Raw              []byte   // where set, the pixel data as it is, instead of Values
	// Encapsulated, where set, is the pixel data as encapsulated fragments (a compressed
	// syntax's), instead of Values or Raw; the data set is then explicit VR little endian.
	Encapsulated *Encapsulated
}

// File encodes img as a Part 10 file (its data set deflated for the deflated syntax).
func (img Image) File() []byte {
	syntax := img.syntax()
	declare := syntax
	if img.Declare != "" {
		declare = img.Declare
	}
	meta := metaGroup(declare, img.IDs.SOPUID, img.FullMeta)
	return part10(meta, img.Dataset(), img.Declare == "" && syntax == DeflatedExplicitVRLE)
}

func (img Image) syntax() string {
	if img.Syntax == "" {
		return ExplicitVRLittleEndian
	}
	return img.Syntax
}

// Dataset encodes img's data set (explicit VR little endian for the deflated and RLE
// syntaxes, not deflated).
func (img Image) Dataset() []byte {
	syntax := img.syntax()
	body := syntax
	if syntax == DeflatedExplicitVRLE || syntax == RLELossless || img.Pixels.Encapsulated != nil {
		body = ExplicitVRLittleEndian
	}
	e := NewEnc(body)
	if img.PrivateJunk {
		e.Str(0x00090010, "LO", "ACME private")
		e.SeqStart(0x00091001, "SQ").Str(0x00091002, "LO", "nested").
			SeqStart(0x00091003, "SQ").Elem(0x00091004, "OB", make([]byte, 30)).SeqEnd().SeqEnd()
		e.Elem(0x00091010, "OB", bytes.Repeat([]byte{0xAB}, 1000))
	}
	img.IDs.writeHead(e)
	if img.Geometry.Thickness > 0 {
		e.Str(0x00180050, "DS", ds(img.Geometry.Thickness))
	}
	if img.IDs.Echo > 0 {
		e.Str(0x00180086, "IS", fmt.Sprint(img.IDs.Echo))
	}
	img.IDs.writeSeries(e)
	img.Geometry.write(e, img.IDs)
	img.Pixels.writeDescription(e)
	if img.Geometry.FramePositions != nil {
		img.Geometry.writeFrames(e)
	}
	img.Pixels.writeData(e, syntax == RLELossless, max(img.Geometry.Frames, 1))
	return e.Bytes()
}

// writeHead writes the identifying attributes of groups 0008 and 0010.
func (ids IDs) writeHead(e *Enc) {
	e.Str(0x00080016, "UI", MRImageStorage)
	optional(e, 0x00080018, "UI", ids.SOPUID)
	optional(e, 0x00080020, "DA", ids.StudyDate)
	if ids.Complete {
		e.Str(0x00080030, "TM", "101500").Str(0x00080050, "SH", "ACC0001")
	}
	e.Str(0x00080060, "CS", "MR")
	if ids.Complete {
		e.Str(0x00080090, "PN", "Referring^Doctor")
	}
	optional(e, 0x0008103E, "LO", ids.Description)
	optional(e, 0x00100010, "PN", ids.PatientName)
	optional(e, 0x00100020, "LO", ids.PatientID)
	if ids.Complete {
		e.Str(0x00100030, "DA", "19700101").Str(0x00100040, "CS", "O")
	}
}

// writeSeries writes the study and series UIDs and the numbers.
func (ids IDs) writeSeries(e *Enc) {
	e.Str(0x0020000D, "UI", ids.StudyUID).Str(0x0020000E, "UI", ids.SeriesUID)
	if ids.Complete {
		e.Str(0x00200010, "SH", "STUDY1")
	}
	e.Str(0x00200011, "IS", fmt.Sprint(ids.Number)).Str(0x00200013, "IS", fmt.Sprint(ids.Instance))
}

// writeFrameOfReference writes FrameOfReferenceUID where set (it follows the orientation).
func (ids IDs) writeFrameOfReference(e *Enc) { optional(e, 0x00200052, "UI", ids.FrameOfReference) }

// write writes the position, orientation and image size.
func (g Geometry) write(e *Enc, ids IDs) {
	if g.FramePositions == nil {
		e.Str(0x00200032, "DS", ds(g.Position[:]...))
	}
	e.Str(0x00200037, "DS", ds(g.Orientation[:]...))
	ids.writeFrameOfReference(e)
	e.US(0x00280002, 1).Str(0x00280004, "CS", "MONOCHROME2")
	if g.Frames > 0 {
		e.Str(0x00280008, "IS", fmt.Sprint(g.Frames))
	}
	e.US(0x00280010, uint16(g.Rows)).US(0x00280011, uint16(g.Columns))
	e.Str(0x00280030, "DS", ds(g.Spacing[:]...))
}

// writeFrames writes the per-frame functional groups: a plane position per frame.
func (g Geometry) writeFrames(e *Enc) {
	e.Header(0x52009230, "SQ", UndefinedLength)
	for _, p := range g.FramePositions {
		e.ItemStart()
		e.SeqStart(0x00209113, "SQ").Str(0x00200032, "DS", ds(p[:]...)).SeqEnd()
		e.ItemEnd()
	}
	e.Tag(TagSequenceDelim).U32(0)
}

func (p Pixels) bits() (allocated, stored int) {
	allocated = p.BitsAllocated
	if allocated == 0 {
		allocated = 16
	}
	stored = p.BitsStored
	if stored == 0 {
		stored = allocated
	}
	return allocated, stored
}

// writeDescription writes the bits, the sign and the rescale.
func (p Pixels) writeDescription(e *Enc) {
	allocated, stored := p.bits()
	sign := uint16(0)
	if p.Signed {
		sign = 1
	}
	e.US(0x00280100, uint16(allocated)).US(0x00280101, uint16(stored)).US(0x00280102, uint16(stored-1)).US(0x00280103, sign)
	if p.Slope != 0 {
		e.Str(0x00281052, "DS", ds(p.Intercept)).Str(0x00281053, "DS", ds(p.Slope))
	}
}

// writeData writes the pixel data: native (padded to even length), or RLE-encoded in frames
// fragments, one per frame (16 bits allocated).
func (p Pixels) writeData(e *Enc, rle bool, frames int) {
	switch {
	case p.Encapsulated != nil:
		p.Encapsulated.write(e)
	case rle:
		e.Header(0x7FE00010, "OB", UndefinedLength)
		e.Tag(TagItem).U32(0) // empty basic offset table
		px := make([]uint16, len(p.Values))
		for i, v := range p.Values {
			px[i] = uint16(v)
		}
		per := len(px) / frames
		for f := range frames {
			frag := EncodeRLE16(px[f*per : (f+1)*per])
			e.Tag(TagItem).U32(uint32(len(frag))).Raw(frag)
		}
		e.Tag(TagSequenceDelim).U32(0)
	default:
		raw := p.Raw
		if raw == nil {
			raw = p.native(e.Order())
		}
		if len(raw)%2 == 1 {
			raw = append(raw[:len(raw):len(raw)], 0)
		}
		e.Elem(0x7FE00010, "OW", raw)
	}
}

// native is Values in BitsAllocated bits each, in byte order order.
func (p Pixels) native(order ByteOrder) []byte {
	allocated, _ := p.bits()
	raw := make([]byte, 0, len(p.Values)*allocated/8)
	for _, v := range p.Values {
		switch allocated {
		case 8:
			raw = append(raw, byte(v))
		case 16:
			raw = order.AppendUint16(raw, uint16(v))
		default:
			raw = order.AppendUint32(raw, v)
		}
	}
	return raw
}

func optional(e *Enc, t uint32, vr, s string) {
	if s != "" {
		e.Str(t, vr, s)
	}
}

// ds formats decimal strings, backslash-separated.
func ds(v ...float64) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = fmt.Sprintf("%g", x)
	}
	return strings.Join(s, `\`)
}
