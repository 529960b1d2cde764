package dicomseg

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// fill sets the SEG's fields from its data set and checks that they make a BINARY SEG this
// package reads: one segment description per number used, one per-frame item per frame.
func (s *SEG) fill(ds *dataset) error {
	s.SOPInstanceUID = ds.str(tagSOPInstanceUID)
	s.SeriesInstanceUID = ds.str(tagSeriesInstanceUID)
	s.StudyInstanceUID = ds.str(tagStudyInstanceUID)
	s.FrameOfReferenceUID = ds.str(tagFrameOfReference)
	s.SeriesDescription = ds.str(tagSeriesDescription)
	s.SeriesNumber, _ = ds.integer(tagSeriesNumber)
	s.SegmentationType = strings.ToUpper(ds.str(tagSegmentationType))
	switch s.SegmentationType {
	case "BINARY":
	case "FRACTIONAL":
		return fmt.Errorf("%w: fractional not supported (SegmentationType FRACTIONAL)", ErrNotSEG)
	default:
		return fmt.Errorf("%w: SegmentationType %q (the reader takes BINARY)", ErrNotSEG, s.SegmentationType)
	}
	var ok bool
	s.Rows, ok = ds.integer(tagRows)
	c, okc := ds.integer(tagColumns)
	s.Columns = c
	if !ok || !okc || s.Rows <= 0 || s.Columns <= 0 {
		return fmt.Errorf("%w: Rows %q and Columns %q are not two positive numbers", ErrNotSEG, ds.str(tagRows), ds.str(tagColumns))
	}
	if b, _ := ds.integer(tagBitsAllocated); b != 1 {
		return fmt.Errorf("%w: BitsAllocated %d in a BINARY SEG (want 1)", ErrNotSEG, b)
	}
	if spp, ok := ds.integer(tagSamplesPerPixel); ok && spp != 1 {
		return fmt.Errorf("%w: SamplesPerPixel %d (want 1)", ErrNotSEG, spp)
	}
	if err := s.fillSegments(ds.items(tagSegmentSeq)); err != nil {
		return err
	}
	if err := s.fillFrames(ds); err != nil {
		return err
	}
	s.fillReferences(ds.items(tagRefSeriesSeq))
	return nil
}

// fillSegments reads the SegmentSequence: numbers unique and positive, sorted.
func (s *SEG) fillSegments(items []*dataset) error {
	if len(items) == 0 {
		return fmt.Errorf("%w: no SegmentSequence", ErrNotSEG)
	}
	type described struct {
		seg  Segment
		kind string
	}
	var all []described
	seen := map[int]bool{}
	for i, it := range items {
		n, ok := it.integer(tagSegmentNumber)
		if !ok || n < 1 {
			return fmt.Errorf("%w: segment %d has no SegmentNumber of 1 or more", ErrNotSEG, i+1)
		}
		if seen[n] {
			return fmt.Errorf("%w: two segments numbered %d", ErrNotSEG, n)
		}
		seen[n] = true
		seg := Segment{
			Number: n, Label: it.str(tagSegmentLabel),
			Category: code(it.item(tagCategoryCodeSeq)), Type: code(it.item(tagTypeCodeSeq)),
			Algorithm: it.str(tagAlgorithmName),
		}
		if alg := it.item(tagAlgorithmIDSeq); alg != nil {
			seg.AlgorithmVersion = alg.str(tagAlgorithmVersion)
			if seg.Algorithm == "" {
				seg.Algorithm = alg.str(tagAlgorithmIDName)
			}
		}
		all = append(all, described{seg, strings.ToUpper(it.str(tagAlgorithmType))})
	}
	slices.SortFunc(all, func(a, b described) int { return cmp.Compare(a.seg.Number, b.seg.Number) })
	for _, d := range all {
		s.Segments = append(s.Segments, d.seg)
		s.AlgorithmTypes = append(s.AlgorithmTypes, d.kind)
	}
	return nil
}

// code reads a code sequence's first item; the zero Code when absent.
func code(it *dataset) Code {
	if it == nil {
		return Code{}
	}
	v := it.str(tagCodeValue)
	if v == "" {
		v = it.str(tagLongCodeValue)
	}
	return Code{Scheme: it.str(tagCodingScheme), Value: v, Meaning: it.str(tagCodeMeaning)}
}

// fillFrames reads NumberOfFrames, the shared geometry and each frame's per-frame item.
func (s *SEG) fillFrames(ds *dataset) error {
	n := 1
	perFrame := ds.items(tagPerFrameGroups)
	if ds.find(tagNumberOfFrames) != nil {
		var ok bool
		if n, ok = ds.integer(tagNumberOfFrames); !ok || n < 0 {
			return fmt.Errorf("%w: NumberOfFrames %q", ErrNotSEG, ds.str(tagNumberOfFrames))
		}
	} else if len(perFrame) > 1 {
		// Without NumberOfFrames the image has one frame (as pydicom and dcmtk read it): the
		// first per-frame item is its (pydicom's liver_1frame.dcm, a SEG cut to one frame).
		perFrame = perFrame[:1]
	}
	if len(perFrame) != n {
		return fmt.Errorf("%w: %d frames and %d per-frame functional group items", ErrNotSEG, n, len(perFrame))
	}
	shared := ds.item(tagSharedGroups)
	if shared == nil {
		shared = &dataset{}
	}
	var first *dataset
	if n > 0 {
		first = perFrame[0]
	}
	s.fillGeometry(shared, first)
	s.Frames = make([]FrameInfo, n)
	for i, it := range perFrame {
		f := &s.Frames[i]
		id := it.item(tagSegmentIDSeq)
		if id == nil {
			id = shared.item(tagSegmentIDSeq)
		}
		seg := 0
		if id != nil {
			seg, _ = id.integer(tagRefSegmentNumber)
		}
		if !slices.ContainsFunc(s.Segments, func(x Segment) bool { return x.Number == seg }) {
			return fmt.Errorf("%w: frame %d names segment %d, which the SegmentSequence does not describe", ErrNotSEG, i+1, seg)
		}
		f.Segment = seg
		if pos := it.item(tagPlanePositionSeq); pos != nil {
			if p := pos.floats(tagImagePosition); len(p) == 3 {
				f.Position, f.HasPosition = [3]float64(p), true
			}
		}
		if der := it.item(tagDerivationImageSeq); der != nil {
			if src := der.item(tagSourceImageSeq); src != nil {
				f.SourceSOPInstanceUID = src.str(tagRefSOPInstanceUID)
				if fr, ok := src.integer(tagRefFrameNumber); ok && fr > 0 {
					f.SourceFrame = fr
				}
			}
		}
	}
	return nil
}

// fillGeometry takes the plane orientation and pixel measures from the shared functional
// groups, else from the first frame's.
func (s *SEG) fillGeometry(shared, first *dataset) {
	group := func(tag uint32) *dataset {
		if it := shared.item(tag); it != nil {
			return it
		}
		if first != nil {
			return first.item(tag)
		}
		return nil
	}
	if o := group(tagPlaneOrientSeq); o != nil {
		if v := o.floats(tagImageOrientation); len(v) == 6 {
			s.Orientation, s.HasOrientation = [6]float64(v), true
		}
	}
	if m := group(tagPixelMeasuresSeq); m != nil {
		if v := m.floats(tagPixelSpacing); len(v) == 2 {
			s.PixelSpacing = [2]float64(v)
		}
		if v := m.floats(tagSliceThickness); len(v) > 0 {
			s.SliceThickness = v[0]
		}
		if v := m.floats(tagSliceSpacing); len(v) > 0 {
			s.SpacingBetweenSlices = v[0]
		}
	}
}

// fillReferences reads the ReferencedSeriesSequence.
func (s *SEG) fillReferences(items []*dataset) {
	for _, it := range items {
		r := ReferencedSeries{UID: it.str(tagSeriesInstanceUID)}
		for _, inst := range it.items(tagRefInstanceSeq) {
			r.Instances = append(r.Instances, inst.str(tagRefSOPInstanceUID))
		}
		s.ReferencedSeries = append(s.ReferencedSeries, r)
	}
}
