package dicomseg

import (
	"bufio"
	"cmp"
	"fmt"
	"io"
	"slices"
	"strconv"
	"time"

	"github.com/zeebo/xxh3"

	"voxpipe/internal/atomicfile"
	"voxpipe/io/dicom"
)

// Options says what a SEG holds beyond the mask and its source.
type Options struct {
	// Segments describes every label the mask may hold (segment N is label N), numbered 1 to
	// N without a gap (PS3.3 C.8.20.2.4); a label in the mask without one fails (ErrLabels).
	// Segments with no voxels are still written, so that their absence is explicit.
	Segments []Segment
	// EmptyFrames writes the frames of every segment on every slice, foreground or not
	// (highdicom's omit_empty_frames=False); by default frames with no foreground are left out.
	EmptyFrames bool
	// SeriesDescription, SeriesNumber: of the new series ("" and 0: "voxpipe segmentation"
	// and the source's number plus 1000).
	SeriesDescription string
	SeriesNumber      int
	// Digest names what made the mask (the model's digest) and goes into the UIDs with the
	// source series and the mask's content: a rerun gives the same UIDs.
	Digest string
	// Software is SoftwareVersions ("voxpipe" and its version).
	Software string
	// Now gives the content date and time (nil: time.Now).
	Now func() time.Time
}

// Summary is what a written SEG holds.
type Summary struct {
	SOPInstanceUID, SeriesInstanceUID string
	Frames                            int
	// FramesOf and VoxelsOf count each segment's frames and voxels, by segment number.
	FramesOf map[int]int
	VoxelsOf map[int]int64
	Bytes    int64
}

// frame is one frame to write: a segment on a slice of the series.
type frame struct{ segment, z int }

// WriteFile writes the SEG to path atomically (a temporary file beside it, renamed over it
// once whole and synced): on any error nothing is left at path.
func WriteFile(path string, s *dicom.Series, mask []byte, o Options) (*Summary, error) {
	var sum *Summary
	err := atomicfile.Write(path, func(w io.Writer) error {
		var err error
		sum, err = Write(w, s, mask, o)
		return err
	})
	if err != nil {
		return nil, err
	}
	return sum, nil
}

// Write writes the SEG of mask, labels on the grid of the series s in io/dicom's layout
// (see the package doc), as a Part 10 file in Explicit VR Little Endian.
func Write(w io.Writer, s *dicom.Series, mask []byte, o Options) (*Summary, error) {
	p, err := plan(s, mask, o)
	if err != nil {
		return nil, err
	}
	cw := &countWriter{w: w}
	e := &encoder{w: bufio.NewWriterSize(cw, 1<<20)}
	writeMeta(e, p.instanceUID)
	p.writeDataSet(e, mask)
	if e.err == nil {
		e.err = e.w.Flush()
	}
	if e.err != nil {
		return nil, fmt.Errorf("dicomseg: writing the SEG: %w", e.err)
	}
	p.sum.Bytes = cw.n
	return &p.sum, nil
}

// countWriter counts the bytes written through it.
type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// segPlan is a SEG worked out before a byte is written: its segments, frames and UIDs.
type segPlan struct {
	s                      *dicom.Series
	o                      Options
	segments               []Segment
	frames                 []frame
	seriesUID, instanceUID string
	dimOrgUID              string
	rows, cols             int
	charset                string // SpecificCharacterSet
	sum                    Summary
}

// plan checks the inputs and scans the mask once: which labels lie on which slices.
func plan(s *dicom.Series, mask []byte, o Options) (*segPlan, error) {
	if s == nil {
		return nil, fmt.Errorf("%w: no reference series", ErrReference)
	}
	if s.Err != nil {
		return nil, fmt.Errorf("dicomseg: the reference series cannot be read: %w", s.Err)
	}
	rows, cols, nz := s.Rows, s.Columns, len(s.Slices)
	if nz == 0 || rows < 1 || cols < 1 {
		return nil, fmt.Errorf("%w: the series has no slices", ErrGrid)
	}
	plane := rows * cols
	if len(mask) != plane*nz {
		return nil, fmt.Errorf("%w: %d mask voxels for a series of %dx%dx%d", ErrGrid, len(mask), cols, rows, nz)
	}
	segs, err := checkSegments(o.Segments)
	if err != nil {
		return nil, err
	}
	described := [256]bool{}
	for _, sg := range segs {
		described[sg.Number] = true
	}
	// counts[z*256+l]: voxels of label l on slice z
	counts := make([]int32, nz*256)
	for z := range nz {
		c := counts[z*256 : (z+1)*256]
		for _, v := range mask[z*plane : (z+1)*plane] {
			c[v]++
		}
		for l := 1; l < 256; l++ {
			if c[l] > 0 && !described[l] {
				return nil, fmt.Errorf("%w: label %d (on slice %d) has no segment description", ErrLabels, l, z)
			}
		}
	}
	charset, err := characterSet(s, segs, o)
	if err != nil {
		return nil, err
	}
	p := &segPlan{s: s, o: o, segments: segs, rows: rows, cols: cols, charset: charset}
	p.sum.FramesOf, p.sum.VoxelsOf = map[int]int{}, map[int]int64{}
	for _, sg := range segs {
		p.sum.FramesOf[sg.Number], p.sum.VoxelsOf[sg.Number] = 0, 0
		for z := range nz {
			n := counts[z*256+sg.Number]
			p.sum.VoxelsOf[sg.Number] += int64(n)
			if n > 0 || o.EmptyFrames {
				p.frames = append(p.frames, frame{sg.Number, z})
				p.sum.FramesOf[sg.Number]++
			}
		}
	}
	if len(p.frames) == 0 {
		// A mask with no foreground at all: one empty frame (segment 1 on the first slice),
		// as highdicom writes, for a SEG has at least one frame; its segments say the rest.
		p.frames = append(p.frames, frame{segs[0].Number, 0})
		p.sum.FramesOf[segs[0].Number] = 1
	}
	p.sum.Frames = len(p.frames)
	if bits := int64(len(p.frames)) * int64(plane); (bits+7)/8 > 0xFFFFFFFE {
		// the pixel data's length is a 32-bit field (PS3.5 7.1.2)
		return nil, fmt.Errorf("%w: %d frames of %dx%d pixels exceed the 4 GiB a SEG's pixel data may hold", ErrLabels, len(p.frames), cols, rows)
	}
	maskHash := xxh3.Hash128(mask).Bytes()
	segKey := fmt.Sprintf("%+v/%v", segs, o.EmptyFrames)
	p.seriesUID = uid("voxpipe SEG series", s.UID, strconv.Itoa(s.Part), o.Digest)
	p.instanceUID = uid("voxpipe SEG instance", s.UID, strconv.Itoa(s.Part), o.Digest, string(maskHash[:]), segKey)
	p.dimOrgUID = uid("voxpipe SEG dimensions", p.instanceUID)
	p.sum.SeriesInstanceUID, p.sum.SOPInstanceUID = p.seriesUID, p.instanceUID
	return p, nil
}

// checkSegments sorts the segments by number and refuses numbers outside 1..MaxSegments,
// repeated ones and descriptions that do not fit their VRs.
func checkSegments(in []Segment) ([]Segment, error) {
	if len(in) == 0 {
		return nil, fmt.Errorf("%w: no segments described", ErrLabels)
	}
	if len(in) > MaxSegments {
		return nil, fmt.Errorf("%w: %d segments, at most %d", ErrLabels, len(in), MaxSegments)
	}
	segs := slices.Clone(in)
	slices.SortFunc(segs, func(a, b Segment) int { return cmp.Compare(a.Number, b.Number) })
	for i, sg := range segs {
		if sg.Number < 1 || sg.Number > MaxSegments {
			return nil, fmt.Errorf("%w: segment number %d (labels 1 to %d are written)", ErrLabels, sg.Number, MaxSegments)
		}
		if i > 0 && segs[i-1].Number == sg.Number {
			return nil, fmt.Errorf("%w: segment %d described twice", ErrLabels, sg.Number)
		}
		if sg.Number != i+1 {
			// PS3.3 C.8.20.2.4: segment numbers start at 1 and increase by 1
			return nil, fmt.Errorf("%w: segment %d is not described (segments run 1, 2, ..., %d without a gap; describe the labels absent from the mask too)", ErrLabels, i+1, segs[len(segs)-1].Number)
		}
		if sg.Category == (Code{}) {
			segs[i].Category = TissueCategory
		}
		if sg.Type == (Code{}) {
			segs[i].Type = TissueType
		}
		if segs[i].Label == "" {
			segs[i].Label = "Segment " + strconv.Itoa(sg.Number)
		}
		if err := checkText(segs[i]); err != nil {
			return nil, err
		}
	}
	return segs, nil
}

// characterSet is the SEG's SpecificCharacterSet: the source's, whose bytes the patient and
// study attributes are copied in. Text of voxpipe's own (segment labels, codes' meanings,
// descriptions) outside ASCII needs UTF-8: with a source in the default repertoire (ASCII, a
// subset of UTF-8) the SEG says ISO_IR 192; with a source in another character set, such
// text cannot be written beside the copied attributes (ErrLabels).
func characterSet(s *dicom.Series, segs []Segment, o Options) (string, error) {
	cs := s.Slices[0].File.Context.CharacterSet
	texts := []string{o.SeriesDescription, o.Software}
	for _, sg := range segs {
		texts = append(texts, sg.Label, sg.Algorithm, sg.AlgorithmVersion, sg.Category.Meaning, sg.Type.Meaning)
	}
	for _, t := range texts {
		if !isASCII(t) {
			switch cs {
			case "", "ISO_IR 192":
				return "ISO_IR 192", nil
			default:
				return "", fmt.Errorf("%w: %q is not ASCII and the source series is in character set %q: write it in ASCII", ErrLabels, t, cs)
			}
		}
	}
	return cs, nil
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}
