// Package dicomtest writes small DICOM series for tests of the packages that take DICOM input
// (the watch service, the CLI): single-frame MR images in explicit VR little endian, one file
// per slice, with the attributes io/dicom reads to group and assemble a series. Written by
// hand, as io/dicom is: no Go DICOM library is available to the project.
package dicomtest

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
)

// Series describes a series of axial slices, 2 mm apart along z.
type Series struct {
	StudyUID, SeriesUID string
	Number              int // SeriesNumber
	Rows, Columns       int
	Description         string
	PatientID           string
}

// Slice returns the Part 10 file of slice i (0-based: InstanceNumber i+1, at z = 2i mm),
// signed 16-bit pixels in a pattern that varies by slice.
func (s Series) Slice(i int) []byte {
	e := &enc{}
	e.str(0x00080016, "UI", "1.2.840.10008.5.1.4.1.1.4") // SOPClassUID: MR image
	e.str(0x00080018, "UI", fmt.Sprintf("%s.%d", s.SeriesUID, i+1))
	e.str(0x00080020, "DA", "20240102")
	e.str(0x00080060, "CS", "MR")
	e.str(0x0008103E, "LO", s.Description)
	e.str(0x00100020, "LO", s.PatientID)
	e.str(0x00180050, "DS", "2")
	e.str(0x0020000D, "UI", s.StudyUID)
	e.str(0x0020000E, "UI", s.SeriesUID)
	e.str(0x00200011, "IS", fmt.Sprint(s.Number))
	e.str(0x00200013, "IS", fmt.Sprint(i+1))
	e.str(0x00200032, "DS", fmt.Sprintf(`-12\-10\%d`, 2*i))
	e.str(0x00200037, "DS", `1\0\0\0\1\0`)
	e.us(0x00280002, 1)
	e.str(0x00280004, "CS", "MONOCHROME2")
	e.us(0x00280010, uint16(s.Rows))
	e.us(0x00280011, uint16(s.Columns))
	e.str(0x00280030, "DS", `1\1`)
	e.us(0x00280100, 16)
	e.us(0x00280101, 16)
	e.us(0x00280102, 15)
	e.us(0x00280103, 1)
	px := make([]byte, 2*s.Rows*s.Columns)
	for y := range s.Rows {
		for x := range s.Columns {
			v := int16(100 + 40*((x/4+y/4+i)%3) + x + y)
			binary.LittleEndian.PutUint16(px[2*(y*s.Columns+x):], uint16(v))
		}
	}
	e.elem(0x7FE00010, "OW", px)

	meta := &enc{}
	meta.str(0x00020002, "UI", "1.2.840.10008.5.1.4.1.1.4")
	meta.str(0x00020010, "UI", "1.2.840.10008.1.2.1") // explicit VR little endian
	var out bytes.Buffer
	out.Write(make([]byte, 128))
	out.WriteString("DICM")
	out.Write(meta.buf.Bytes())
	out.Write(e.buf.Bytes())
	return out.Bytes()
}

// FileName is slice i's file name: IM0001, IM0002... (no extension, as scanners write them).
func FileName(i int) string { return fmt.Sprintf("IM%04d", i+1) }

// Write writes slices [from, to) into dir as FileName(i) and returns their paths.
func (s Series) Write(dir string, from, to int) ([]string, error) {
	var paths []string
	for i := from; i < to; i++ {
		p := filepath.Join(dir, FileName(i))
		if err := os.WriteFile(p, s.Slice(i), 0o644); err != nil {
			return nil, fmt.Errorf("dicomtest: %w", err)
		}
		paths = append(paths, p)
	}
	return paths, nil
}

// enc writes explicit VR little endian elements.
type enc struct{ buf bytes.Buffer }

func (e *enc) elem(tag uint32, vr string, val []byte) {
	var b [4]byte
	binary.LittleEndian.PutUint16(b[:], uint16(tag>>16))
	binary.LittleEndian.PutUint16(b[2:], uint16(tag))
	e.buf.Write(b[:])
	e.buf.WriteString(vr)
	switch vr {
	case "OB", "OW", "SQ", "UN", "UT":
		e.buf.Write([]byte{0, 0})
		binary.LittleEndian.PutUint32(b[:], uint32(len(val)))
		e.buf.Write(b[:])
	default:
		binary.LittleEndian.PutUint16(b[:], uint16(len(val)))
		e.buf.Write(b[:2])
	}
	e.buf.Write(val)
}

// str writes a text element, padded to even length (UIDs with NUL, others with a space).
func (e *enc) str(tag uint32, vr, s string) {
	if len(s)%2 == 1 {
		if vr == "UI" {
			s += "\x00"
		} else {
			s += " "
		}
	}
	e.elem(tag, vr, []byte(s))
}

func (e *enc) us(tag uint32, v uint16) {
	var b [2]byte
	binary.LittleEndian.PutUint16(b[:], v)
	e.elem(tag, "US", b[:])
}
