package dicomtest

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
)

// pixelDataOB is the header of encapsulated pixel data in explicit VR little endian: (7FE0,0010)
// OB, undefined length.
var pixelDataOB = []byte{0xE0, 0x7F, 0x10, 0x00, 'O', 'B', 0, 0, 0xFF, 0xFF, 0xFF, 0xFF}

// Fragments returns the basic offset table and the fragments of a Part 10 file's
// encapsulated pixel data, as an encoder (dcmcjpeg, dcmcjpls, gdcmconv) wrote them. It finds
// the last (7FE0,0010) OB element of undefined length, which in files of these encoders is the
// top-level pixel data; it is a test helper, not a parser.
func Fragments(file []byte) (offsets []uint32, frags [][]byte, err error) {
	at := bytes.LastIndex(file, pixelDataOB)
	if at < 0 {
		return nil, nil, errors.New("dicomtest: no encapsulated pixel data")
	}
	le := binary.LittleEndian
	for p, first := at+len(pixelDataOB), true; ; first = false {
		if p+8 > len(file) {
			return nil, nil, fmt.Errorf("dicomtest: pixel data cut at byte %d", p)
		}
		tag := uint32(le.Uint16(file[p:]))<<16 | uint32(le.Uint16(file[p+2:]))
		n := int(le.Uint32(file[p+4:]))
		p += 8
		switch {
		case tag == TagSequenceDelim:
			return offsets, frags, nil
		case tag != TagItem || n < 0 || p+n > len(file):
			return nil, nil, fmt.Errorf("dicomtest: bad item %08x of %d bytes at byte %d", tag, n, p-8)
		case first:
			for i := 0; i+4 <= n; i += 4 {
				offsets = append(offsets, le.Uint32(file[p+i:]))
			}
		default:
			frags = append(frags, file[p:p+n])
		}
		p += n
	}
}

// Encapsulated is encapsulated pixel data (PS3.5 A.4) as a test writes it: an optional basic
// offset table, fragments, and optionally the Extended Offset Table.
type Encapsulated struct {
	Offsets   []uint32 // the basic offset table (nil: an empty first item)
	Fragments [][]byte // each padded to even length when written
	// ExtendedOffsets and ExtendedLengths, where set, are written as (7FE0,0001) and
	// (7FE0,0002).
	ExtendedOffsets, ExtendedLengths []uint64
}

// Encapsulate splits each frame's compressed bytes into up to split fragments of even length
// (the last padded with a zero byte, as PS3.5 A.4 allows after a JPEG's EOI), with a basic
// offset table when bot, and the Extended Offset Table when eot.
func Encapsulate(frames [][]byte, split int, bot, eot bool) *Encapsulated {
	enc := &Encapsulated{}
	pos := uint64(0)
	for _, fr := range frames {
		if len(fr)%2 == 1 {
			fr = append(fr[:len(fr):len(fr)], 0)
		}
		if bot {
			enc.Offsets = append(enc.Offsets, uint32(pos))
		}
		if eot {
			enc.ExtendedOffsets = append(enc.ExtendedOffsets, pos)
			enc.ExtendedLengths = append(enc.ExtendedLengths, uint64(len(fr)))
		}
		size := (len(fr)/max(split, 1) + 1) &^ 1
		for len(fr) > 0 {
			n := min(size, len(fr))
			enc.Fragments = append(enc.Fragments, fr[:n])
			pos += 8 + uint64(n)
			fr = fr[n:]
		}
	}
	return enc
}

// write writes the extended offset table, when set, and the pixel data.
func (enc *Encapsulated) write(e *Enc) {
	if enc.ExtendedOffsets != nil {
		var off, n []byte
		for i := range enc.ExtendedOffsets {
			off = binary.LittleEndian.AppendUint64(off, enc.ExtendedOffsets[i])
			n = binary.LittleEndian.AppendUint64(n, enc.ExtendedLengths[i])
		}
		e.Elem(0x7FE00001, "OV", off).Elem(0x7FE00002, "OV", n)
	}
	e.Header(0x7FE00010, "OB", UndefinedLength)
	var bot []byte
	for _, o := range enc.Offsets {
		bot = binary.LittleEndian.AppendUint32(bot, o)
	}
	e.Tag(TagItem).U32(uint32(len(bot))).Raw(bot)
	for _, f := range enc.Fragments {
		if len(f)%2 == 1 {
			f = append(f[:len(f):len(f)], 0)
		}
		e.Tag(TagItem).U32(uint32(len(f))).Raw(f)
	}
	e.Tag(TagSequenceDelim).U32(0)
}

// NativePixels returns the value of the last (7FE0,0010) OW or OB element of defined length in
// an explicit VR little endian file (a decoder's output: dcmdjpeg, dcmdjpls, gdcmconv --raw).
// A test helper, not a parser.
func NativePixels(file []byte) ([]byte, bool) {
	at := -1
	for _, vr := range []string{"OW", "OB"} {
		at = max(at, bytes.LastIndex(file, append([]byte{0xE0, 0x7F, 0x10, 0x00}, vr...)))
	}
	if at < 0 || at+12 > len(file) {
		return nil, false
	}
	n := int(binary.LittleEndian.Uint32(file[at+8:]))
	if n < 0 || at+12+n > len(file) {
		return nil, false
	}
	return file[at+12 : at+12+n], true
}
