package dicomseg

import (
	"bytes"
	"fmt"
	"strings"

	"voxpipe/internal/dicomtest"
)

// testSEG describes a small SEG that the reader's tests build byte by byte, independently of
// the writer: any syntax, type and frame layout, with or without source references.
type testSEG struct {
	syntax   string // "": explicit VR little endian
	class    string // "": SOPClass
	segType  string // "": BINARY
	rows     int
	cols     int
	segments []int
	frames   []testFrame
	forUID   string
}

// testFrame is one frame: its segment, source and position, and its pixels (rows*cols, 0/1).
type testFrame struct {
	seg      int
	src      string // ReferencedSOPInstanceUID, where set
	srcFrame int    // ReferencedFrameNumber, where > 0
	pos      []float64
	px       []byte
}

// packBits packs the frames' pixels contiguously, least significant bit first.
func packBits(frames [][]byte) []byte {
	var out []byte
	k := 0
	for _, f := range frames {
		for _, v := range f {
			if k%8 == 0 {
				out = append(out, 0)
			}
			out[k/8] |= (v & 1) << (k % 8)
			k++
		}
	}
	if len(out)%2 == 1 {
		out = append(out, 0)
	}
	return out
}

func (b testSEG) file() []byte {
	syntax := b.syntax
	if syntax == "" {
		syntax = dicomtest.ExplicitVRLittleEndian
	}
	class, segType := b.class, b.segType
	if class == "" {
		class = SOPClass
	}
	if segType == "" {
		segType = "BINARY"
	}
	meta := dicomtest.NewEnc(dicomtest.ExplicitVRLittleEndian).Str(0x00020002, "UI", class).Str(0x00020010, "UI", syntax)
	e := dicomtest.NewEnc(syntax)
	e.Str(0x00080016, "UI", class).Str(0x00080018, "UI", "1.2.3.4.5").Str(0x00080060, "CS", "SEG")
	e.Str(0x0008103E, "LO", "test seg")
	e.Header(0x00081115, "SQ", dicomtest.UndefinedLength).ItemStart()
	e.Header(0x0008114A, "SQ", dicomtest.UndefinedLength)
	for _, f := range b.frames {
		if f.src != "" {
			e.ItemStart().Str(0x00081155, "UI", f.src).ItemEnd()
		}
	}
	e.Tag(dicomtest.TagSequenceDelim).U32(0)
	e.Str(0x0020000E, "UI", "1.2.3.9").SeqEnd()
	e.Str(0x0020000D, "UI", "1.2.3.1").Str(0x0020000E, "UI", "1.2.3.4").Str(0x00200011, "IS", "1007")
	if b.forUID != "" {
		e.Str(0x00200052, "UI", b.forUID)
	}
	e.US(0x00280002, 1).Str(0x00280008, "IS", fmt.Sprint(len(b.frames)))
	e.US(0x00280010, uint16(b.rows)).US(0x00280011, uint16(b.cols)).US(0x00280100, 1)
	e.Str(0x00620001, "CS", segType)
	e.Header(0x00620002, "SQ", dicomtest.UndefinedLength)
	for _, n := range b.segments {
		e.ItemStart()
		e.SeqStart(0x00620003, "SQ").Str(0x00080100, "SH", "91723000").Str(0x00080102, "SH", "SCT").Str(0x00080104, "LO", "Anatomical Structure").SeqEnd()
		e.US(0x00620004, uint16(n)).Str(0x00620005, "LO", fmt.Sprintf("seg %d", n))
		e.Str(0x00620008, "CS", "SEMIAUTOMATIC").Str(0x00620009, "LO", "algo")
		e.SeqStart(0x00620007, "SQ").Str(0x00660031, "LO", "v1.2").SeqEnd()
		e.SeqStart(0x0062000F, "SQ").Str(0x00080100, "SH", "85756007").Str(0x00080102, "SH", "SCT").Str(0x00080104, "LO", "Tissue").SeqEnd()
		e.ItemEnd()
	}
	e.Tag(dicomtest.TagSequenceDelim).U32(0)
	e.SeqStart(0x52009229, "SQ")
	e.SeqStart(0x00209116, "SQ").Str(0x00200037, "DS", `1\0\0\0\1\0`).SeqEnd()
	e.SeqStart(0x00289110, "SQ").Str(0x00180050, "DS", "2").Str(0x00280030, "DS", `0.5\0.75`).SeqEnd()
	e.SeqEnd()
	e.Header(0x52009230, "SQ", dicomtest.UndefinedLength)
	var px [][]byte
	for _, f := range b.frames {
		e.ItemStart()
		if f.src != "" {
			e.SeqStart(0x00089124, "SQ").SeqStart(0x00082112, "SQ").Str(0x00081150, "UI", dicomtest.MRImageStorage).Str(0x00081155, "UI", f.src)
			if f.srcFrame > 0 {
				e.Str(0x00081160, "IS", fmt.Sprint(f.srcFrame))
			}
			e.SeqEnd().SeqEnd()
		}
		if f.pos != nil {
			e.SeqStart(0x00209113, "SQ").Str(0x00200032, "DS", dsList(f.pos)).SeqEnd()
		}
		e.SeqStart(0x0062000A, "SQ").US(0x0062000B, uint16(f.seg)).SeqEnd()
		e.ItemEnd()
		px = append(px, f.px)
	}
	e.Tag(dicomtest.TagSequenceDelim).U32(0)
	e.Elem(0x7FE00010, "OB", packBits(px))
	var out bytes.Buffer
	out.Write(make([]byte, 128))
	out.WriteString("DICM")
	out.Write(meta.Bytes())
	out.Write(e.Bytes())
	return out.Bytes()
}

func dsList(v []float64) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = fmt.Sprintf("%g", x)
	}
	return strings.Join(s, `\`)
}

// patternFrame is a frame of rows*cols pixels whose bits follow seed (no two frames alike).
func patternFrame(rows, cols, seed int) []byte {
	px := make([]byte, rows*cols)
	for i := range px {
		px[i] = byte((i*7 + seed*13 + i/cols*seed) % 5 / 3)
	}
	return px
}
