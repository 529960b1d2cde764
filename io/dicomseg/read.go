package dicomseg

import (
	"encoding/binary"
	"fmt"
	"io"
	"slices"

	"voxpipe/internal/regular"
	"voxpipe/io/dicom"
)

// SEG is what ReadFile reads of a BINARY DICOM Segmentation: its identity, its segments, each
// frame's segment, source reference and position, the shared geometry, and the pixel data
// (bits of every frame, packed contiguously).
type SEG struct {
	SOPInstanceUID, SeriesInstanceUID, StudyInstanceUID, FrameOfReferenceUID string
	SeriesDescription                                                        string
	SeriesNumber                                                             int
	TransferSyntax                                                           dicom.TransferSyntax

	Rows, Columns    int
	SegmentationType string // BINARY: the only type read
	// Segments in ascending number; AlgorithmTypes[i] is Segments[i]'s SegmentAlgorithmType
	// (AUTOMATIC, SEMIAUTOMATIC, MANUAL).
	Segments       []Segment
	AlgorithmTypes []string
	Frames         []FrameInfo
	// ReferencedSeries is the ReferencedSeriesSequence: the source series and their instances.
	ReferencedSeries []ReferencedSeries

	// The shared functional groups' geometry (or the first frame's, when not shared):
	// ImageOrientationPatient, PixelSpacing (between rows, between columns), SliceThickness,
	// SpacingBetweenSlices. HasOrientation is false when none is given.
	Orientation          [6]float64
	HasOrientation       bool
	PixelSpacing         [2]float64
	SliceThickness       float64
	SpacingBetweenSlices float64

	pixels []byte // the packed bits of every frame
}

// FrameInfo is one frame of a SEG: its segment, its source image and its position.
type FrameInfo struct {
	Segment              int    // ReferencedSegmentNumber
	SourceSOPInstanceUID string // of its first SourceImageSequence item; "" when absent
	SourceFrame          int    // ReferencedFrameNumber (1-based) in the source; 0 when absent
	Position             [3]float64
	HasPosition          bool
}

// ReferencedSeries is one item of the ReferencedSeriesSequence.
type ReferencedSeries struct {
	UID       string
	Instances []string // ReferencedSOPInstanceUIDs
}

// Transfer syntaxes the reader takes.
const (
	explicitLE = "1.2.840.10008.1.2.1"
	implicitLE = "1.2.840.10008.1.2"
	explicitBE = "1.2.840.10008.1.2.2"
	deflatedLE = "1.2.840.10008.1.2.1.99"
)

// Attributes the reader keeps, with their VRs (for implicit VR files).
const (
	tagMediaStorageClass  = 0x00020002
	tagTransferSyntax     = 0x00020010
	tagSOPClassUID        = 0x00080016
	tagSOPInstanceUID     = 0x00080018
	tagCodeValue          = 0x00080100
	tagCodingScheme       = 0x00080102
	tagCodeMeaning        = 0x00080104
	tagLongCodeValue      = 0x00080119
	tagSeriesDescription  = 0x0008103E
	tagRefSeriesSeq       = 0x00081115
	tagRefInstanceSeq     = 0x0008114A
	tagRefSOPInstanceUID  = 0x00081155
	tagRefFrameNumber     = 0x00081160
	tagSourceImageSeq     = 0x00082112
	tagDerivationImageSeq = 0x00089124
	tagSliceThickness     = 0x00180050
	tagSliceSpacing       = 0x00180088
	tagStudyInstanceUID   = 0x0020000D
	tagSeriesInstanceUID  = 0x0020000E
	tagSeriesNumber       = 0x00200011
	tagImagePosition      = 0x00200032
	tagImageOrientation   = 0x00200037
	tagFrameOfReference   = 0x00200052
	tagPlanePositionSeq   = 0x00209113
	tagPlaneOrientSeq     = 0x00209116
	tagSamplesPerPixel    = 0x00280002
	tagNumberOfFrames     = 0x00280008
	tagRows               = 0x00280010
	tagColumns            = 0x00280011
	tagPixelSpacing       = 0x00280030
	tagBitsAllocated      = 0x00280100
	tagPixelMeasuresSeq   = 0x00289110
	tagSegmentationType   = 0x00620001
	tagSegmentSeq         = 0x00620002
	tagCategoryCodeSeq    = 0x00620003
	tagSegmentNumber      = 0x00620004
	tagSegmentLabel       = 0x00620005
	tagAlgorithmIDSeq     = 0x00620007
	tagAlgorithmType      = 0x00620008
	tagAlgorithmName      = 0x00620009
	tagSegmentIDSeq       = 0x0062000A
	tagRefSegmentNumber   = 0x0062000B
	tagTypeCodeSeq        = 0x0062000F
	tagAlgorithmVersion   = 0x00660031
	tagAlgorithmIDName    = 0x00660036
	tagSharedGroups       = 0x52009229
	tagPerFrameGroups     = 0x52009230
)

var segKeep = map[uint32]string{
	tagSOPClassUID: "UI", tagSOPInstanceUID: "UI", tagCodeValue: "SH", tagCodingScheme: "SH",
	tagCodeMeaning: "LO", tagLongCodeValue: "UC", tagSeriesDescription: "LO", tagRefSeriesSeq: "SQ",
	tagRefInstanceSeq: "SQ", tagRefSOPInstanceUID: "UI", tagRefFrameNumber: "IS", tagSourceImageSeq: "SQ",
	tagDerivationImageSeq: "SQ", tagSliceThickness: "DS", tagSliceSpacing: "DS", tagStudyInstanceUID: "UI",
	tagSeriesInstanceUID: "UI", tagSeriesNumber: "IS", tagImagePosition: "DS", tagImageOrientation: "DS",
	tagFrameOfReference: "UI", tagPlanePositionSeq: "SQ", tagPlaneOrientSeq: "SQ", tagSamplesPerPixel: "US",
	tagNumberOfFrames: "IS", tagRows: "US", tagColumns: "US", tagPixelSpacing: "DS", tagBitsAllocated: "US",
	tagPixelMeasuresSeq: "SQ", tagSegmentationType: "CS", tagSegmentSeq: "SQ", tagCategoryCodeSeq: "SQ",
	tagSegmentNumber: "US", tagSegmentLabel: "LO", tagAlgorithmIDSeq: "SQ", tagAlgorithmType: "CS",
	tagAlgorithmName: "LO", tagSegmentIDSeq: "SQ", tagRefSegmentNumber: "US", tagTypeCodeSeq: "SQ",
	tagAlgorithmVersion: "LO", tagAlgorithmIDName: "LO", tagSharedGroups: "SQ", tagPerFrameGroups: "SQ",
}

// ReadFile reads the BINARY DICOM Segmentation at path (a Part 10 file, explicit or implicit
// VR little endian), its pixel data included. Only a regular file is opened
// (internal/regular: a FIFO fails at once). A file that is not such a SEG (another SOP class,
// another transfer syntax, a FRACTIONAL SEG) or that is damaged fails with an error wrapping
// ErrNotSEG that says why; errors name the file.
func ReadFile(path string) (*SEG, error) {
	f, st, err := regular.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	s, err := Read(f, st.Size())
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

// Read is ReadFile of a SEG of size bytes read through r.
func Read(r io.ReaderAt, size int64) (*SEG, error) {
	src := &source{r: r, size: size}
	start, syntax, class, err := readMeta(src)
	if err != nil {
		return nil, err
	}
	if class != "" && class != SOPClass {
		return nil, fmt.Errorf("%w: SOP class %s is not Segmentation Storage (%s)", ErrNotSEG, class, SOPClass)
	}
	if syntax != explicitLE && syntax != implicitLE {
		return nil, fmt.Errorf("%w: transfer syntax %v: the reader takes explicit or implicit VR little endian", ErrNotSEG, dicom.TransferSyntax(syntax))
	}
	p := newParser(src, binary.LittleEndian, syntax == explicitLE, segKeep)
	ds := &dataset{order: binary.LittleEndian}
	if _, err := p.dataset(ds, start, size, false, 0); err != nil {
		return nil, err
	}
	if c := ds.str(tagSOPClassUID); c != SOPClass {
		return nil, fmt.Errorf("%w: SOP class %q is not Segmentation Storage (%s)", ErrNotSEG, c, SOPClass)
	}
	s := &SEG{TransferSyntax: dicom.TransferSyntax(syntax)}
	if err := s.fill(ds); err != nil {
		return nil, err
	}
	if err := s.readPixels(src, p.pixels); err != nil {
		return nil, err
	}
	return s, nil
}

// readMeta checks the preamble and reads the meta group (explicit VR little endian): the
// transfer syntax and the media storage SOP class. It returns where the data set begins.
func readMeta(src *source) (start int64, syntax, class string, err error) {
	if src.size < 132 {
		return 0, "", "", fmt.Errorf("%w: %d bytes, too short for a DICOM Part 10 file", ErrNotSEG, src.size)
	}
	b, err := src.bytes(128, 4)
	if err != nil {
		return 0, "", "", err
	}
	if string(b) != "DICM" {
		return 0, "", "", fmt.Errorf("%w: not a DICOM Part 10 file (no \"DICM\" at offset 128)", ErrNotSEG)
	}
	p := newParser(src, binary.LittleEndian, true, nil)
	meta := &dataset{order: binary.LittleEndian}
	off := int64(132)
	for src.size-off >= 8 {
		b, err := src.bytes(off, 2)
		if err != nil {
			return 0, "", "", err
		}
		if binary.LittleEndian.Uint16(b) != 0x0002 {
			break
		}
		h, err := p.readHeader(off, src.size)
		if err != nil {
			return 0, "", "", fmt.Errorf("meta group: %w", err)
		}
		if h.length == undefinedLength || int64(h.length) > src.size-h.value {
			return 0, "", "", fmt.Errorf("meta group: %w", lengthError(h, src.size))
		}
		if (h.tag == tagTransferSyntax || h.tag == tagMediaStorageClass) && h.length <= 256 {
			v, err := src.bytes(h.value, int(h.length))
			if err != nil {
				return 0, "", "", err
			}
			meta.elems = append(meta.elems, &elem{tag: h.tag, vr: h.vr, raw: slices.Clone(v)})
		}
		off = h.value + int64(h.length)
	}
	syntax = meta.str(tagTransferSyntax)
	if syntax == "" {
		return 0, "", "", fmt.Errorf("%w: the meta group names no transfer syntax", ErrNotSEG)
	}
	return off, syntax, meta.str(tagMediaStorageClass), nil
}

// IsSEG reports whether the file at path is a DICOM Part 10 file of the Segmentation Storage
// SOP class (by its meta group, else its SOPClassUID), without reading it further: a SEG that
// ReadFile then refuses (damaged, FRACTIONAL) is one.
func IsSEG(path string) bool {
	f, st, err := regular.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	src := &source{r: f, size: st.Size()}
	start, syntax, class, err := readMeta(src)
	if err != nil || class != "" {
		return err == nil && class == SOPClass
	}
	if syntax != explicitLE && syntax != implicitLE {
		return false
	}
	p := newParser(src, binary.LittleEndian, syntax == explicitLE, map[uint32]string{tagSOPClassUID: "UI"})
	p.stopAtPixels = true
	ds := &dataset{order: binary.LittleEndian}
	p.dataset(ds, start, src.size, false, 0) // what precedes an error is enough
	return ds.str(tagSOPClassUID) == SOPClass
}

// SegmentFrames counts the frames of segment number n.
func (s *SEG) SegmentFrames(n int) int {
	count := 0
	for _, f := range s.Frames {
		if f.Segment == n {
			count++
		}
	}
	return count
}

// readPixels reads the packed bits of every frame: the pixel data must hold them.
func (s *SEG) readPixels(src *source, loc pixelLoc) error {
	plane := int64(s.Rows) * int64(s.Columns)
	n := int64(len(s.Frames))
	if n > MaxPixelBytes*8/plane {
		return fmt.Errorf("%w: %d frames of %dx%d bits are more than %d bytes", ErrNotSEG, n, s.Rows, s.Columns, int64(MaxPixelBytes))
	}
	need := (n*plane + 7) / 8
	switch {
	case need == 0:
		return nil
	case !loc.found:
		return fmt.Errorf("%w: %d frames and no pixel data", ErrNotSEG, n)
	case loc.encapsulated:
		return fmt.Errorf("%w: encapsulated pixel data in a native transfer syntax", ErrNotSEG)
	case loc.n < need:
		return fmt.Errorf("%w: the pixel data holds %d bytes, %d frames of %dx%d bits need %d", ErrNotSEG, loc.n, n, s.Rows, s.Columns, need)
	}
	s.pixels = make([]byte, need)
	return readAt(src.r, s.pixels, loc.off)
}

// Frame unpacks frame i into dst (Rows*Columns bytes, 0 or 1, row after row as stored):
// frame i's pixels are bits i*Rows*Columns onwards of the pixel data, least significant bit
// first (PS3.5 8.1.1), not starting at a byte boundary.
func (s *SEG) Frame(i int, dst []byte) error {
	plane := s.Rows * s.Columns
	if i < 0 || i >= len(s.Frames) {
		return fmt.Errorf("dicomseg: frame %d of %d", i, len(s.Frames))
	}
	if len(dst) != plane {
		return fmt.Errorf("dicomseg: frame buffer of %d bytes for %dx%d pixels", len(dst), s.Rows, s.Columns)
	}
	b, k := int64(i)*int64(plane), 0
	for ; k < len(dst) && b&7 != 0; k, b = k+1, b+1 { // up to a byte boundary
		dst[k] = s.pixels[b>>3] >> (b & 7) & 1
	}
	for ; k+8 <= len(dst); k, b = k+8, b+8 { // a byte at a time
		v, d := s.pixels[b>>3], dst[k:k+8:k+8]
		d[0], d[1], d[2], d[3] = v&1, v>>1&1, v>>2&1, v>>3&1
		d[4], d[5], d[6], d[7] = v>>4&1, v>>5&1, v>>6&1, v>>7
	}
	for ; k < len(dst); k, b = k+1, b+1 {
		dst[k] = s.pixels[b>>3] >> (b & 7) & 1
	}
	return nil
}
