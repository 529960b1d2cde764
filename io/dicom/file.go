package dicom

import (
	"bytes"
	"compress/flate"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"

	"voxpipe/internal/regular"
)

// File is what a DICOM file says about its image: identity, pixel format and the geometry of
// each frame. Pixel data is not read until the series is (Series.Read).
type File struct {
	Path   string
	Syntax TransferSyntax
	// MediaStorageClass is the meta group's SOP class (a DICOMDIR's is dicomdirClass).
	MediaStorageClass string

	SOPClassUID       string
	SOPInstanceUID    string
	StudyInstanceUID  string
	SeriesInstanceUID string
	PatientID         string // PHI: used only in output names the user asks for
	StudyDate         string
	SeriesDescription string
	ProtocolName      string
	Modality          string
	ImageType         string
	SeriesNumber      int
	InstanceNumber    int
	EchoNumber        int
	// Context is what an object derived from the file copies (a SEG).
	Context Context

	Rows, Columns       int
	NumberOfFrames      int
	SamplesPerPixel     int
	Photometric         string
	BitsAllocated       int
	BitsStored          int
	PixelRepresentation int // 1: signed

	// Frames holds each frame's geometry and rescale, from the top-level attributes or, in
	// enhanced multi-frame files, the shared and per-frame functional groups.
	Frames []Frame

	pixels pixelLoc // in a deflated file, offsets into the inflated data set
	order  binary.ByteOrder
	size   int64       // the file's size
	src    io.ReaderAt // the file, when Parse was given it (ParseFile's files are reopened)
	// deflateAt is where a deflated data set's stream starts in the file, inflated its
	// length once inflated (0: not deflated).
	deflateAt, inflated int64
}

// Context is what an object derived from an image (a DICOM SEG) copies from it, verbatim: the
// patient, the study and the frame of reference. PHI: never logged. The strings are the
// attributes' bytes in the file's CharacterSet, padding trimmed.
type Context struct {
	CharacterSet                              string // SpecificCharacterSet
	PatientName, PatientBirthDate, PatientSex string
	StudyTime, StudyID, AccessionNumber       string
	ReferringPhysicianName, StudyDescription  string
	FrameOfReferenceUID                       string
}

// Frame is the geometry and value transform of one frame (the whole image of a single-frame
// file).
type Frame struct {
	Position       [3]float64 // ImagePositionPatient: the centre of the first voxel, LPS mm
	HasPosition    bool
	Orientation    [6]float64 // ImageOrientationPatient: row then column direction cosines
	HasOrientation bool
	PixelSpacing   [2]float64 // between rows, between columns (mm)
	SliceThickness float64
	SliceSpacing   float64 // SpacingBetweenSlices
	Slope          float64
	Intercept      float64
	EchoTime       float64
	StackPosition  int // InStackPositionNumber of enhanced files, 0 when absent
}

// HasPixels reports whether the file holds an image.
func (f *File) HasPixels() bool { return f.pixels.found }

// IsDirectory reports a DICOMDIR (an index of other files).
func (f *File) IsDirectory() bool { return f.MediaStorageClass == dicomdirClass }

// ParseFile parses the file at path up to and around its pixel data, reading only the bytes
// it needs (the elements before the pixel data, in 64 KiB windows). Only regular files are
// opened (internal/regular): a FIFO fails at once with regular.ErrNotRegular.
func ParseFile(path string) (*File, error) {
	f, err := parseFile(path)
	if err != nil {
		return nil, err
	}
	return f, nil
}

// parseFile is ParseFile, but a file that is DICOM and fails to parse also comes back with
// what could be read of it (its identity: the UIDs precede the pixel data), for Group to fail
// its series with the error. Errors name the file.
func parseFile(path string) (*File, error) {
	fh, st, err := regular.Open(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	f, err := parse(fh, st.Size())
	if f != nil {
		f.Path = path
	}
	if err != nil {
		return f, fmt.Errorf("%s: %w", path, err)
	}
	return f, nil
}

// Parse parses a DICOM file of size bytes read through r, which the File keeps for reading
// the pixels.
func Parse(r io.ReaderAt, size int64) (*File, error) {
	f, err := parse(r, size)
	if err != nil {
		return nil, err
	}
	f.src = r
	return f, nil
}

// parse parses the file. On an error after the preamble (the file is DICOM), the File holds
// the identity read before the error, if any.
func parse(r io.ReaderAt, size int64) (*File, error) {
	src := &source{r: r, size: size}
	f := &File{size: size}
	start, meta, err := preamble(src)
	if err != nil {
		if errors.Is(err, ErrNotDICOM) {
			return nil, err
		}
		return f, err
	}
	if meta {
		if start, err = f.readMeta(src, start); err != nil {
			return f, err
		}
	}
	if f.Syntax == "" { // no meta group, or one without the syntax: guess from the data set
		if f.Syntax, err = guessSyntax(src, start); err != nil {
			switch {
			case !meta:
				return nil, err
			case size-start < 8: // a meta group, then the file ends: DICOM, cut short
				return f, fmt.Errorf("%w: the file ends after its meta group", ErrTruncated)
			}
			return f, fmt.Errorf("%w: the meta group names no transfer syntax, and what follows it is no data set", ErrCorrupt)
		}
	}
	d, start, err := f.dataSetDecoder(src, start)
	if err != nil {
		return f, err
	}
	defer d.src.close()
	ds, end, err := d.dataset(start, d.src.size, false, 0)
	if err != nil {
		f.identity(ds)
		return f, err
	}
	if f.deflateAt > 0 {
		f.inflated = end
	}
	f.order = d.order
	f.pixels = d.pixels
	f.pixels.extended = extendedOffsets(ds)
	f.fill(ds)
	return f, nil
}

// readMeta reads the meta group (explicit VR little endian, group 0002) from start, keeping
// its transfer syntax and media storage class, and returns where the data set begins.
func (f *File) readMeta(src *source, start int64) (int64, error) {
	size := src.size
	d := &decoder{src: src, order: binary.LittleEndian, explicit: true}
	off := start
	ds := &DataSet{order: binary.LittleEndian, elems: map[Tag]*value{}}
	for off+8 <= size {
		b, err := src.bytes(off, 2)
		if err != nil {
			return 0, err
		}
		if binary.LittleEndian.Uint16(b) != 0x0002 {
			break
		}
		h, err := d.readHeader(off, size)
		if err != nil {
			return 0, fmt.Errorf("meta group: %w", err)
		}
		if h.length == undefinedLength || int64(h.length) > size-h.value {
			return 0, fmt.Errorf("meta group: %w", lengthError(h, size))
		}
		if _, kept := keptVR[h.tag]; kept && h.length <= maxKeptValue {
			b, err := src.bytes(h.value, int(h.length))
			if err != nil {
				return 0, err
			}
			ds.elems[h.tag] = &value{vr: h.vr, raw: bytes.Clone(b)}
		}
		off = h.value + int64(h.length)
	}
	f.Syntax = TransferSyntax(ds.str(tagTransferSyntax))
	f.MediaStorageClass = ds.str(tagMediaStorageSOPClass)
	return off, nil
}

// dataSetDecoder is the decoder of the data set at start in the file's transfer syntax, and
// where in its source the data set begins. For the deflated syntax that source is the
// inflating stream, which the caller closes (source.close).
func (f *File) dataSetDecoder(src *source, start int64) (*decoder, int64, error) {
	d := &decoder{src: src, order: binary.LittleEndian, explicit: true}
	switch f.Syntax {
	case ImplicitVRLittleEndian:
		d.explicit = false
	case ExplicitVRBigEndian:
		d.order = binary.BigEndian
	case DeflatedExplicitVRLE:
		// The data set after the meta group is a raw deflate stream (PS3.5 A.5), parsed as it
		// inflates: only the window and the kept attributes are held.
		zr := flate.NewReader(io.NewSectionReader(src.r, start, src.size-start))
		d.src = newStream(zr)
		f.deflateAt = start
		return d, 0, nil
	default:
		// Some writers declare an explicit syntax and write implicit VR (pydicom's
		// SC_rgb_jpeg.dcm): the first element tells, as it does to pydicom and dcm2niix.
		if src.size-start >= 8 {
			b, err := src.bytes(start, 8)
			if err != nil {
				return nil, 0, err
			}
			d.explicit = isVR(b[4:6])
		}
	}
	return d, start, nil
}

// preamble finds where the file's elements start and whether a meta group comes first: after
// the 128-byte preamble and "DICM", or, in files written without them (old ACR-NEMA style
// exports), at offset 0.
func preamble(src *source) (int64, bool, error) {
	if src.size >= 132 {
		b, err := src.bytes(128, 4)
		if err != nil {
			return 0, false, err
		}
		if string(b) == "DICM" {
			return 132, true, nil
		}
	}
	if src.size < 8 {
		return 0, false, fmt.Errorf("%w: %d bytes, no preamble and no element", ErrNotDICOM, src.size)
	}
	b, err := src.bytes(0, 8)
	if err != nil {
		return 0, false, err
	}
	if binary.LittleEndian.Uint16(b) == 0x0002 && isVR(b[4:6]) {
		return 0, true, nil
	}
	if _, err := guessSyntax(src, 0); err != nil {
		return 0, false, err
	}
	return 0, false, nil
}

// guessSyntax tells the encoding of a data set without a transfer syntax from its first
// element: a tag of a low group (as every data set starts: 0008, or a private 0001) read little
// or big endian, with or without a VR (big endian is always explicit).
func guessSyntax(src *source, off int64) (TransferSyntax, error) {
	if src.size-off < 8 {
		return "", fmt.Errorf("%w: no transfer syntax and no data set to guess it from", ErrNotDICOM)
	}
	b, err := src.bytes(off, 8)
	if err != nil {
		return "", err
	}
	le, be := binary.LittleEndian.Uint16(b), binary.BigEndian.Uint16(b)
	switch {
	case le > 0 && le <= 0xFF && isVR(b[4:6]):
		return ExplicitVRLittleEndian, nil
	case le > 0 && le <= 0xFF:
		return ImplicitVRLittleEndian, nil
	case be > 0 && be <= 0xFF && isVR(b[4:6]):
		return ExplicitVRBigEndian, nil
	}
	return "", fmt.Errorf("%w: no \"DICM\" at offset 128 and no data set element at offset %d", ErrNotDICOM, off)
}

func isVR(b []byte) bool { return b[0] >= 'A' && b[0] <= 'Z' && b[1] >= 'A' && b[1] <= 'Z' }

// identity sets the fields that name the file's series and instance.
func (f *File) identity(ds *DataSet) {
	f.SOPClassUID = ds.str(tagSOPClassUID)
	f.SOPInstanceUID = ds.str(tagSOPInstanceUID)
	f.StudyInstanceUID = ds.str(tagStudyInstanceUID)
	f.SeriesInstanceUID = ds.str(tagSeriesInstanceUID)
	f.PatientID = ds.str(tagPatientID)
	f.StudyDate = ds.str(tagStudyDate)
	f.SeriesDescription = ds.str(tagSeriesDescription)
	f.ProtocolName = ds.str(tagProtocolName)
	f.Modality = ds.str(tagModality)
	f.ImageType = ds.str(tagImageType)
	f.SeriesNumber = ds.integer(tagSeriesNumber, 0)
	f.InstanceNumber = ds.integer(tagInstanceNumber, 0)
	f.EchoNumber = ds.integer(tagEchoNumbers, 0)
	f.Context = Context{
		CharacterSet: ds.str(tagCharacterSet), PatientName: ds.str(tagPatientName),
		PatientBirthDate: ds.str(tagPatientBirthDate), PatientSex: ds.str(tagPatientSex),
		StudyTime: ds.str(tagStudyTime), StudyID: ds.str(tagStudyID), AccessionNumber: ds.str(tagAccessionNumber),
		ReferringPhysicianName: ds.str(tagReferringName), StudyDescription: ds.str(tagStudyDescription),
		FrameOfReferenceUID: ds.str(tagFrameOfReferenceUID),
	}
}

// fill sets the File's fields from the parsed data set.
func (f *File) fill(ds *DataSet) {
	f.identity(ds)
	f.Rows = ds.integer(tagRows, 0)
	f.Columns = ds.integer(tagColumns, 0)
	f.NumberOfFrames = 1
	if ds.has(tagNumberOfFrames) {
		f.NumberOfFrames = ds.integer(tagNumberOfFrames, 0) // 0 or less, or not a number: checkPixels refuses
	}
	f.SamplesPerPixel = ds.integer(tagSamplesPerPixel, 1)
	f.Photometric = strings.ToUpper(ds.str(tagPhotometric))
	f.BitsAllocated = ds.integer(tagBitsAllocated, 0)
	f.BitsStored = ds.integer(tagBitsStored, f.BitsAllocated)
	f.PixelRepresentation = ds.integer(tagPixelRepresentation, 0)

	top := Frame{Slope: 1}
	applyFrame(&top, ds)
	shared := ds.item(tagSharedFunctionalSeq)
	if shared != nil {
		applyGroups(&top, shared)
	}
	var perFrame []*DataSet
	if v := ds.elems[tagPerFrameFunctionalSq]; v != nil {
		perFrame = v.items
	}
	// Frames are sized by what the file holds, never by what it claims: more frames than the
	// pixel data (or fragments) can hold get one Frame, and checkPixels refuses the file.
	n := max(f.NumberOfFrames, 1)
	limit := int64(1)
	switch fb := f.frameBytes(); {
	case f.pixels.encapsulated:
		limit = int64(len(f.pixels.fragments))
	case f.pixels.found && fb > 0:
		limit = f.pixels.native.n / fb
	}
	if int64(n) > limit {
		n = 1
	}
	if len(perFrame) != n {
		perFrame = nil // not one item per frame: the per-frame groups cannot be matched to frames
	}
	if n > 1 && perFrame == nil && f.pixels.found {
		// A multi-frame image without per-frame positions: every frame gets the top-level
		// geometry, which series assembly refuses as repeated positions.
		f.Frames = make([]Frame, n)
		for i := range f.Frames {
			f.Frames[i] = top
		}
		return
	}
	f.Frames = make([]Frame, n)
	for i := range f.Frames {
		f.Frames[i] = top
		if perFrame != nil {
			applyGroups(&f.Frames[i], perFrame[i])
		}
	}
}

// applyFrame takes the top-level (classic) attributes.
func applyFrame(fr *Frame, ds *DataSet) {
	if p := ds.floats(tagImagePosition); len(p) == 3 {
		fr.Position, fr.HasPosition = [3]float64(p), true
	}
	if o := ds.floats(tagImageOrientation); len(o) == 6 {
		fr.Orientation, fr.HasOrientation = [6]float64(o), true
	}
	if s := ds.floats(tagPixelSpacing); len(s) == 2 && s[0] > 0 && s[1] > 0 {
		fr.PixelSpacing = [2]float64(s)
	}
	fr.SliceThickness = ds.float(tagSliceThickness, fr.SliceThickness)
	fr.SliceSpacing = ds.float(tagSpacingBetweenSlices, fr.SliceSpacing)
	if ds.has(tagRescaleSlope) || ds.has(tagRescaleIntercept) {
		fr.Slope = ds.float(tagRescaleSlope, 1)
		fr.Intercept = ds.float(tagRescaleIntercept, 0)
		if fr.Slope == 0 { // a zero slope would erase the image; readers take it as absent
			fr.Slope = 1
		}
	}
	fr.EchoTime = ds.float(tagEchoTime, fr.EchoTime)
	fr.EchoTime = ds.float(tagEffectiveEchoTime, fr.EchoTime)
	fr.StackPosition = ds.integer(tagInStackPosition, fr.StackPosition)
}

// applyGroups takes the functional group macros of an enhanced file's shared or per-frame
// item (PS3.3 C.7.6.16).
func applyGroups(fr *Frame, item *DataSet) {
	for _, t := range []Tag{tagPlanePositionSequence, tagPlaneOrientationSeq, tagPixelMeasuresSeq, tagPixelValueTransform, tagMREchoSequence, tagFrameContentSequence} {
		if sub := item.item(t); sub != nil {
			applyFrame(fr, sub)
		}
	}
}

// frameBytes is the size of one native frame.
func (f *File) frameBytes() int64 {
	return int64(f.Rows) * int64(f.Columns) * int64(f.SamplesPerPixel) * int64(f.BitsAllocated/8)
}
