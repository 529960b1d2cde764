package dicomseg

import "errors"

// SOPClass is the Segmentation Storage SOP Class UID.
const SOPClass = "1.2.840.10008.5.1.4.1.1.66.4"

// MaxSegments is the most segments one SEG holds here: label values 1 to 255 of a uint8 mask.
const MaxSegments = 255

// Sentinel errors; every error of this package that falls in one of these classes wraps it.
var (
	// ErrGrid: the mask does not lie on the reference series' grid (size, spacing, origin or
	// orientation differ).
	ErrGrid = errors.New("dicomseg: mask does not lie on the reference series' grid")
	// ErrLabels: a label the writer cannot store (above MaxSegments, or no segment describes it).
	ErrLabels = errors.New("dicomseg: unsupported labels")
	// ErrNotSEG: the file is not a DICOM Segmentation this package reads.
	ErrNotSEG = errors.New("dicomseg: not a readable DICOM Segmentation")
	// ErrReference: the SEG and the series given as its reference do not match (a frame's
	// source instance is not in the series, another frame of reference).
	ErrReference = errors.New("dicomseg: SEG does not reference this series")
)

// Code is a coded concept (PS3.3 8.8): coding scheme designator, code value and meaning, as
// ("SCT", "49755003", "Morphologically Altered Structure").
type Code struct {
	Scheme, Value, Meaning string
}

// Segment describes one segment of a SEG. Its Number is the label value it stands for (1 to
// MaxSegments): segment N is label N.
type Segment struct {
	Number int
	Label  string // SegmentLabel
	// Category and Type are SegmentedPropertyCategoryCodeSequence and
	// SegmentedPropertyTypeCodeSequence.
	Category, Type Code
	// Algorithm and AlgorithmVersion name the model that made it (SegmentAlgorithmType
	// AUTOMATIC); an empty Algorithm means MANUAL (a mask converted with export-seg
	// without a model).
	Algorithm, AlgorithmVersion string
}

// Fallback codes for a segment whose description gives none: SNOMED CT "Tissue" for both
// category and type (the most general codes dcmqi's tables offer).
var (
	TissueCategory = Code{"SCT", "85756007", "Tissue"}
	TissueType     = Code{"SCT", "85756007", "Tissue"}
)
