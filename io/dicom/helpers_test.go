package dicom

import (
	"bytes"
	"compress/flate"
	"encoding/binary"
	"fmt"
	"strings"
)

// enc writes DICOM files for tests: elements in one transfer syntax, with the meta group.
type enc struct {
	buf      bytes.Buffer
	order    binary.ByteOrder
	explicit bool
}

func newEnc(ts TransferSyntax) *enc {
	e := &enc{order: binary.LittleEndian, explicit: ts != ImplicitVRLittleEndian}
	if ts == ExplicitVRBigEndian {
		e.order = binary.BigEndian
	}
	return e
}

func (e *enc) tag(t Tag) {
	e.u16(t.Group())
	e.u16(t.Element())
}
func (e *enc) u16(v uint16) { b := make([]byte, 2); e.order.PutUint16(b, v); e.buf.Write(b) }
func (e *enc) u32(v uint32) { b := make([]byte, 4); e.order.PutUint32(b, v); e.buf.Write(b) }

// elem writes an element with a defined length.
func (e *enc) elem(t Tag, vr string, val []byte) *enc {
	e.tag(t)
	switch {
	case !e.explicit:
		e.u32(uint32(len(val)))
	case longLengthVR(vr):
		e.buf.WriteString(vr)
		e.u16(0)
		e.u32(uint32(len(val)))
	default:
		e.buf.WriteString(vr)
		e.u16(uint16(len(val)))
	}
	e.buf.Write(val)
	return e
}

// str writes a text element, padded to even length.
func (e *enc) str(t Tag, vr, s string) *enc {
	if len(s)%2 == 1 {
		pad := " "
		if vr == "UI" {
			pad = "\x00"
		}
		s += pad
	}
	return e.elem(t, vr, []byte(s))
}

func (e *enc) us(t Tag, v uint16) *enc {
	b := make([]byte, 2)
	e.order.PutUint16(b, v)
	return e.elem(t, "US", b)
}

// seqStart opens an undefined-length sequence and its first item; seqEnd closes both.
func (e *enc) seqStart(t Tag, vr string) *enc {
	e.tag(t)
	if e.explicit {
		e.buf.WriteString(vr)
		e.u16(0)
	}
	e.u32(undefinedLength)
	e.tag(tagItem)
	e.u32(undefinedLength)
	return e
}

func (e *enc) seqEnd() *enc {
	e.tag(tagItemDelim)
	e.u32(0)
	e.tag(tagSequenceDelim)
	e.u32(0)
	return e
}

// part10 wraps a data set in the preamble and meta group of syntax ts (deflating it for the
// deflated syntax).
func part10(ts TransferSyntax, dataset []byte) []byte {
	return part10As(ts, dataset, ts == DeflatedExplicitVRLE)
}

// part10As writes the meta group of syntax ts and the data set as given, deflated or not.
func part10As(ts TransferSyntax, dataset []byte, deflate bool) []byte {
	meta := newEnc(ExplicitVRLittleEndian)
	meta.str(tagMediaStorageSOPClass, "UI", "1.2.840.10008.5.1.4.1.1.4").str(tagTransferSyntax, "UI", string(ts))
	var out bytes.Buffer
	out.Write(make([]byte, 128))
	out.WriteString("DICM")
	out.Write(meta.buf.Bytes())
	if deflate {
		w, _ := flate.NewWriter(&out, flate.BestCompression)
		w.Write(dataset)
		w.Close()
	} else {
		out.Write(dataset)
	}
	return out.Bytes()
}

// slice describes one synthetic image file.
type sliceSpec struct {
	syntax          TransferSyntax
	declare         TransferSyntax // the syntax the meta group names, when not syntax
	uid             string
	sop             string // SOPInstanceUID, written when set
	instance        int
	pos             [3]float64
	orient          [6]float64
	rows, cols      int
	bitsStored      int
	signed          bool
	slope, inter    float64
	pixels          []uint16 // rows*cols host values
	privateJunk     bool     // a private undefined-length sequence and a private blob first
	echo            int
	numberOfFrames  int
	framePositions  [][3]float64 // enhanced multi-frame: per-frame positions
	pixelsAllFrames []uint16
}

func ds(v ...float64) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = fmt.Sprintf("%g", x)
	}
	return strings.Join(s, `\`)
}

// file encodes the spec as a Part 10 file.
func (sp sliceSpec) file() []byte {
	if sp.declare != "" {
		return part10As(sp.declare, sp.dataset(), false)
	}
	return part10(sp.syntax, sp.dataset())
}

// dataset encodes the spec's data set (explicit VR little endian for the deflated syntax, not
// deflated).
func (sp sliceSpec) dataset() []byte {
	ts := sp.syntax
	body := ts
	if ts == DeflatedExplicitVRLE || ts == RLELossless {
		body = ExplicitVRLittleEndian
	}
	e := newEnc(body)
	if sp.privateJunk {
		e.str(0x00090010, "LO", "ACME private")
		e.seqStart(0x00091001, "SQ").str(0x00091002, "LO", "nested").
			seqStart(0x00091003, "SQ").elem(0x00091004, "OB", make([]byte, 30)).seqEnd().seqEnd()
		e.elem(0x00091010, "OB", bytes.Repeat([]byte{0xAB}, 1000))
	}
	e.str(tagSOPClassUID, "UI", "1.2.840.10008.5.1.4.1.1.4")
	if sp.sop != "" {
		e.str(0x00080018, "UI", sp.sop)
	}
	e.str(tagStudyDate, "DA", "20240102").str(tagModality, "CS", "MR")
	e.str(tagSeriesDescription, "LO", "T1 / axial").str(tagPatientID, "LO", "PID 42")
	e.str(tagSliceThickness, "DS", "2")
	if sp.echo > 0 {
		e.str(tagEchoNumbers, "IS", fmt.Sprint(sp.echo))
	}
	e.str(tagStudyInstanceUID, "UI", "1.2.3").str(tagSeriesInstanceUID, "UI", sp.uid).str(tagSeriesNumber, "IS", "7")
	e.str(tagInstanceNumber, "IS", fmt.Sprint(sp.instance))
	if sp.framePositions == nil {
		e.str(tagImagePosition, "DS", ds(sp.pos[:]...))
	}
	e.str(tagImageOrientation, "DS", ds(sp.orient[:]...))
	e.us(tagSamplesPerPixel, 1).str(tagPhotometric, "CS", "MONOCHROME2")
	if sp.numberOfFrames > 0 {
		e.str(tagNumberOfFrames, "IS", fmt.Sprint(sp.numberOfFrames))
	}
	e.us(tagRows, uint16(sp.rows)).us(tagColumns, uint16(sp.cols)).str(tagPixelSpacing, "DS", `0.5\0.75`)
	e.us(tagBitsAllocated, 16).us(tagBitsStored, uint16(sp.bitsStored)).us(tagHighBit, uint16(sp.bitsStored-1)).us(tagPixelRepresentation, uint16(b2i(sp.signed)))
	if sp.slope != 0 {
		e.str(tagRescaleIntercept, "DS", ds(sp.inter)).str(tagRescaleSlope, "DS", ds(sp.slope))
	}
	pixels := sp.pixels
	if sp.framePositions != nil {
		e.tag(tagPerFrameFunctionalSq)
		if e.explicit {
			e.buf.WriteString("SQ")
			e.u16(0)
		}
		e.u32(undefinedLength)
		for _, p := range sp.framePositions {
			e.tag(tagItem)
			e.u32(undefinedLength)
			e.seqStart(tagPlanePositionSequence, "SQ").str(tagImagePosition, "DS", ds(p[:]...)).seqEnd()
			e.tag(tagItemDelim)
			e.u32(0)
		}
		e.tag(tagSequenceDelim)
		e.u32(0)
		pixels = sp.pixelsAllFrames
	}
	raw := make([]byte, 2*len(pixels))
	for i, v := range pixels {
		e.order.PutUint16(raw[2*i:], v)
	}
	if ts == RLELossless {
		e.tag(tagPixelData)
		e.buf.WriteString("OB")
		e.u16(0)
		e.u32(undefinedLength)
		e.tag(tagItem)
		e.u32(0) // empty basic offset table
		frames := max(sp.numberOfFrames, 1)
		per := len(pixels) / frames
		for f := range frames {
			frag := encodeRLE16(pixels[f*per : (f+1)*per])
			e.tag(tagItem)
			e.u32(uint32(len(frag)))
			e.buf.Write(frag)
		}
		e.tag(tagSequenceDelim)
		e.u32(0)
	} else {
		e.elem(tagPixelData, "OW", raw)
	}
	return e.buf.Bytes()
}

// encodeRLE16 encodes 16-bit samples as one RLE frame (two segments, high bytes first), with
// both literal and replicate runs.
func encodeRLE16(px []uint16) []byte {
	segs := [2][]byte{}
	for s := range 2 {
		plane := make([]byte, len(px))
		for i, v := range px {
			plane[i] = byte(v >> (8 * (1 - s)))
		}
		segs[s] = packBits(plane)
		if len(segs[s])%2 == 1 {
			segs[s] = append(segs[s], 0x80) // a no-op run pads to even length
		}
	}
	hdr := make([]byte, 64)
	binary.LittleEndian.PutUint32(hdr, 2)
	binary.LittleEndian.PutUint32(hdr[4:], 64)
	binary.LittleEndian.PutUint32(hdr[8:], uint32(64+len(segs[0])))
	return append(append(hdr, segs[0]...), segs[1]...)
}

func packBits(b []byte) []byte {
	var out []byte
	for i := 0; i < len(b); {
		run := 1
		for i+run < len(b) && run < 128 && b[i+run] == b[i] {
			run++
		}
		if run >= 3 {
			out = append(out, byte(int8(1-run)), b[i])
			i += run
			continue
		}
		lit := 1
		for i+lit < len(b) && lit < 128 && !(i+lit+2 < len(b) && b[i+lit] == b[i+lit+1] && b[i+lit] == b[i+lit+2]) {
			lit++
		}
		out = append(out, byte(lit-1))
		out = append(out, b[i:i+lit]...)
		i += lit
	}
	return out
}
