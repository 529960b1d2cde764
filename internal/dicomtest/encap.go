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
