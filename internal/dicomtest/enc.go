package dicomtest

import (
	"bytes"
	"encoding/binary"
)

// Transfer syntax UIDs the writer knows.
const (
	ImplicitVRLittleEndian = "1.2.840.10008.1.2"
	ExplicitVRLittleEndian = "1.2.840.10008.1.2.1"
	DeflatedExplicitVRLE   = "1.2.840.10008.1.2.1.99"
	ExplicitVRBigEndian    = "1.2.840.10008.1.2.2"
	RLELossless            = "1.2.840.10008.1.2.5"
)

// MRImageStorage is the SOP class of the images written.
const MRImageStorage = "1.2.840.10008.5.1.4.1.1.4"

// UndefinedLength is the length of a sequence or item ended by a delimiter.
const UndefinedLength = 0xFFFFFFFF

// The item and delimiter tags of sequences and encapsulated pixel data.
const (
	TagItem          = 0xFFFEE000
	TagItemDelim     = 0xFFFEE00D
	TagSequenceDelim = 0xFFFEE0DD
)

// Enc writes the elements of a data set in one transfer syntax (its VR and byte order; a
// deflated syntax's data set is written in explicit VR little endian, and deflated by
// Part10). Tests that build broken data sets use its low-level writes (Tag, U16, U32, Raw).
type Enc struct {
	buf      bytes.Buffer
	order    ByteOrder
	explicit bool
}

// ByteOrder is binary.LittleEndian or binary.BigEndian.
type ByteOrder interface {
	binary.ByteOrder
	binary.AppendByteOrder
}

// NewEnc returns an empty encoder for the data set of transfer syntax syntax.
func NewEnc(syntax string) *Enc {
	e := &Enc{order: binary.LittleEndian, explicit: syntax != ImplicitVRLittleEndian}
	if syntax == ExplicitVRBigEndian {
		e.order = binary.BigEndian
	}
	return e
}

// Bytes returns what e wrote (not a copy).
func (e *Enc) Bytes() []byte { return e.buf.Bytes() }

// Len is how many bytes e wrote.
func (e *Enc) Len() int { return e.buf.Len() }

// Order is the byte order of e's syntax.
func (e *Enc) Order() ByteOrder { return e.order }

// Raw writes b as it is.
func (e *Enc) Raw(b []byte) *Enc {
	e.buf.Write(b)
	return e
}

// Tag writes tag t: its group, then its element.
func (e *Enc) Tag(t uint32) *Enc { return e.U16(uint16(t >> 16)).U16(uint16(t)) }

// U16 writes v in e's byte order.
func (e *Enc) U16(v uint16) *Enc {
	e.buf.Write(e.order.AppendUint16(nil, v))
	return e
}

// U32 writes v in e's byte order.
func (e *Enc) U32(v uint32) *Enc {
	e.buf.Write(e.order.AppendUint32(nil, v))
	return e
}

// Header writes the header of element t declaring length (which may be UndefinedLength, or
// more than what follows): the VR where the syntax is explicit, with a 32-bit length for the
// VRs that have one.
func (e *Enc) Header(t uint32, vr string, length uint32) *Enc {
	e.Tag(t)
	switch {
	case !e.explicit:
		e.U32(length)
	case longLengthVR(vr):
		e.buf.WriteString(vr)
		e.U16(0).U32(length)
	default:
		e.buf.WriteString(vr)
		e.U16(uint16(length))
	}
	return e
}

// Elem writes element t with the value val, as it is.
func (e *Enc) Elem(t uint32, vr string, val []byte) *Enc {
	return e.Header(t, vr, uint32(len(val))).Raw(val)
}

// Str writes a text element, padded to even length (UIDs with NUL, others with a space).
func (e *Enc) Str(t uint32, vr, s string) *Enc {
	if len(s)%2 == 1 {
		pad := " "
		if vr == "UI" {
			pad = "\x00"
		}
		s += pad
	}
	return e.Elem(t, vr, []byte(s))
}

// US writes an unsigned short element.
func (e *Enc) US(t uint32, v uint16) *Enc { return e.Elem(t, "US", e.order.AppendUint16(nil, v)) }

// UL writes an unsigned long element.
func (e *Enc) UL(t uint32, v uint32) *Enc { return e.Elem(t, "UL", e.order.AppendUint32(nil, v)) }

// ItemStart opens an item of undefined length; ItemEnd closes it.
func (e *Enc) ItemStart() *Enc { return e.Tag(TagItem).U32(UndefinedLength) }

// ItemEnd closes an item of undefined length.
func (e *Enc) ItemEnd() *Enc { return e.Tag(TagItemDelim).U32(0) }

// SeqStart opens a sequence of undefined length and its first item; SeqEnd closes both.
func (e *Enc) SeqStart(t uint32, vr string) *Enc {
	return e.Header(t, vr, UndefinedLength).ItemStart()
}

// SeqEnd closes the item and the sequence SeqStart opened.
func (e *Enc) SeqEnd() *Enc { return e.ItemEnd().Tag(TagSequenceDelim).U32(0) }

// longLengthVR reports whether an explicit VR element of vr has a 32-bit length.
func longLengthVR(vr string) bool {
	switch vr {
	case "OB", "OD", "OF", "OL", "OV", "OW", "SQ", "UC", "UN", "UR", "UT", "SV", "UV":
		return true
	}
	return false
}
