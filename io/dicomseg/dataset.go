package dicomseg

import (
	"bufio"
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"voxpipe/io/dicom"
)

// Identity of the writer in the meta group (PS3.7 D.3.3.2).
var (
	implementationUID     = uid("voxpipe implementation class")
	implementationVersion = "VOXPIPE"
)

const explicitVRLE = "1.2.840.10008.1.2.1"

// writeMeta writes the preamble, "DICM" and the file meta information group, whose length
// element needs the group measured first.
func writeMeta(e *encoder, instanceUID string) {
	var grp bytes.Buffer
	g := &encoder{w: bufio.NewWriter(&grp)}
	g.header(0x00020001, "OB", 2)
	g.write([]byte{0, 1})
	g.str(0x00020002, "UI", SOPClass)
	g.str(0x00020003, "UI", instanceUID)
	g.str(0x00020010, "UI", explicitVRLE)
	g.str(0x00020012, "UI", implementationUID)
	g.str(0x00020013, "SH", implementationVersion)
	g.w.Flush()
	e.write(make([]byte, 128))
	e.write([]byte("DICM"))
	e.ul(0x00020000, uint32(grp.Len()))
	e.write(grp.Bytes())
}

// checkText refuses segment descriptions that do not fit their VRs (PS3.5 6.2): LO 64
// characters, SH 16, no backslash or control characters.
func checkText(sg Segment) error {
	fields := []struct {
		name, v string
		max     int
	}{
		{"label", sg.Label, 64}, {"algorithm", sg.Algorithm, 64}, {"algorithm version", sg.AlgorithmVersion, 64},
		{"category scheme", sg.Category.Scheme, 16}, {"category value", sg.Category.Value, 16}, {"category meaning", sg.Category.Meaning, 64},
		{"type scheme", sg.Type.Scheme, 16}, {"type value", sg.Type.Value, 16}, {"type meaning", sg.Type.Meaning, 64},
	}
	for _, f := range fields {
		if utf8.RuneCountInString(f.v) > f.max || strings.ContainsAny(f.v, "\\\r\n\t\x00") || !utf8.ValidString(f.v) {
			return fmt.Errorf("%w: segment %d: %s %q does not fit its DICOM value (at most %d characters, no backslash or control characters)", ErrLabels, sg.Number, f.name, f.v, f.max)
		}
	}
	return nil
}

// trunc cuts a text value to n bytes (series descriptions are ours to shorten).
func trunc(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}

// writeDataSet writes the SEG's data set, in ascending tag order: the patient, study and
// frame of reference of the source; the series, equipment and segmentation modules; the
// functional groups; the pixel data.
func (p *segPlan) writeDataSet(e *encoder, mask []byte) {
	s, o := p.s, p.o
	src := s.Slices[0].File
	ctx := src.Context
	now := time.Now
	if o.Now != nil {
		now = o.Now
	}
	t := now()
	date, tm := t.Format("20060102"), t.Format("150405")
	desc := o.SeriesDescription
	if desc == "" {
		desc = "voxpipe segmentation"
	}
	number := o.SeriesNumber
	if number == 0 {
		number = s.Number + 1000
	}
	software := o.Software
	if software == "" {
		software = "voxpipe"
	}

	if p.charset != "" {
		e.str(0x00080005, "CS", p.charset)
	}
	e.str(0x00080008, "CS", `DERIVED\PRIMARY`)
	e.str(0x00080016, "UI", SOPClass)
	e.str(0x00080018, "UI", p.instanceUID)
	e.str(0x00080020, "DA", src.StudyDate)
	e.str(0x00080021, "DA", date)
	e.str(0x00080023, "DA", date)
	e.str(0x00080030, "TM", ctx.StudyTime)
	e.str(0x00080031, "TM", tm)
	e.str(0x00080033, "TM", tm)
	e.str(0x00080050, "SH", ctx.AccessionNumber)
	e.str(0x00080060, "CS", "SEG")
	e.str(0x00080070, "LO", "voxpipe")
	e.str(0x00080090, "PN", ctx.ReferringPhysicianName)
	if ctx.StudyDescription != "" {
		e.str(0x00081030, "LO", ctx.StudyDescription)
	}
	e.str(0x0008103E, "LO", trunc(desc, 64))
	e.str(0x00081090, "LO", "voxpipe")
	p.referencedSeries(e)
	e.str(0x00100010, "PN", ctx.PatientName)
	e.str(0x00100020, "LO", src.PatientID)
	e.str(0x00100030, "DA", ctx.PatientBirthDate)
	e.str(0x00100040, "CS", ctx.PatientSex)
	e.str(0x00181000, "LO", "1")
	e.str(0x00181020, "LO", trunc(software, 64))
	e.str(0x0020000D, "UI", s.StudyUID)
	e.str(0x0020000E, "UI", p.seriesUID)
	e.str(0x00200010, "SH", ctx.StudyID)
	e.str(0x00200011, "IS", strconv.Itoa(number))
	e.str(0x00200013, "IS", "1")
	for_ := ctx.FrameOfReferenceUID
	if for_ == "" {
		// the source names none (Type 1 here): one derived from its series, the same on
		// every rerun
		for_ = uid("voxpipe frame of reference", s.StudyUID, s.UID)
	}
	e.str(0x00200052, "UI", for_)
	e.str(0x00201040, "LO", "")
	e.item1(0x00209221, func() { e.str(0x00209164, "UI", p.dimOrgUID) })
	p.dimensionIndex(e)
	e.us(0x00280002, 1)
	e.str(0x00280004, "CS", "MONOCHROME2")
	e.str(0x00280008, "IS", strconv.Itoa(len(p.frames)))
	e.us(0x00280010, uint16(p.rows))
	e.us(0x00280011, uint16(p.cols))
	e.us(0x00280100, 1)
	e.us(0x00280101, 1)
	e.us(0x00280102, 0)
	e.us(0x00280103, 0)
	e.str(0x00282110, "CS", "00")
	e.str(0x00620001, "CS", "BINARY")
	e.seq(0x00620002, len(p.segments), func(i int) { segmentItem(e, p.segments[i]) })
	e.str(0x00700080, "CS", "VOXPIPE")
	e.str(0x00700081, "LO", trunc(desc, 64))
	e.str(0x00700084, "PN", "")
	p.sharedGroups(e)
	p.perFrameGroups(e)
	p.pixelData(e, mask)
}

// referencedSeries writes ReferencedSeriesSequence: the source series and every instance a
// frame refers to (the Common Instance Reference module).
func (p *segPlan) referencedSeries(e *encoder) {
	var files []*dicom.File
	seen := map[*dicom.File]bool{}
	for _, f := range p.frames {
		if sf := p.s.Slices[f.z].File; !seen[sf] {
			seen[sf] = true
			files = append(files, sf)
		}
	}
	e.item1(0x00081115, func() {
		e.seq(0x0008114A, len(files), func(i int) {
			e.str(0x00081150, "UI", files[i].SOPClassUID)
			e.str(0x00081155, "UI", files[i].SOPInstanceUID)
		})
		e.str(0x0020000E, "UI", p.s.UID)
	})
}

// dimensionIndex writes the two dimensions frames are indexed by: the segment, then the
// position of the slice.
func (p *segPlan) dimensionIndex(e *encoder) {
	dims := []struct {
		pointer, group tag
		label          string
	}{
		{0x0062000B, 0x0062000A, "ReferencedSegmentNumber"},
		{0x00200032, 0x00209113, "ImagePositionPatient"},
	}
	e.seq(0x00209222, len(dims), func(i int) {
		e.str(0x00209164, "UI", p.dimOrgUID)
		e.at(0x00209165, dims[i].pointer)
		e.at(0x00209167, dims[i].group)
		e.str(0x00209421, "LO", dims[i].label)
	})
}

// segmentItem writes one item of SegmentSequence.
func segmentItem(e *encoder, sg Segment) {
	e.item1(0x00620003, func() { e.code(sg.Category) })
	e.us(0x00620004, uint16(sg.Number))
	e.str(0x00620005, "LO", sg.Label)
	if sg.Algorithm != "" {
		// Segmentation Algorithm Identification (the Algorithm Identification macro, PS3.3
		// 10.16): the model, and its version (the weights' digest)
		e.item1(0x00620007, func() {
			e.item1(0x0066002F, func() { e.code(Code{"DCM", "123110", "Artificial Intelligence"}) })
			e.str(0x00660031, "LO", ds0(trunc(sg.AlgorithmVersion, 64)))
			e.str(0x00660036, "LO", trunc(sg.Algorithm, 64))
		})
		e.str(0x00620008, "CS", "AUTOMATIC")
		e.str(0x00620009, "LO", trunc(sg.Algorithm, 64))
	} else {
		e.str(0x00620008, "CS", "MANUAL")
	}
	e.item1(0x0062000F, func() { e.code(sg.Type) })
}

// ds0 is v, or "0" when empty (AlgorithmVersion is Type 1).
func ds0(v string) string {
	if v == "" {
		return "0"
	}
	return v
}
