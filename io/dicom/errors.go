package dicom

import "errors"

// Sentinel errors. Every error this package returns that falls in one of these classes wraps
// the sentinel (test with errors.Is) together with the file and the detail, e.g.
// "scans/IM0001: dicom: unsupported: transfer syntax JPEG 2000 Image Compression
// (1.2.840.10008.1.2.4.91)".
var (
	// ErrNotDICOM: neither a Part 10 file (preamble and "DICM") nor a bare data set this
	// package recognises (one starting with a group 0002 or 0008 element).
	ErrNotDICOM = errors.New("dicom: not a DICOM file")
	// ErrTruncated: an element, item or the pixel data declares more bytes than the file (or
	// the enclosing item) holds.
	ErrTruncated = errors.New("dicom: truncated file")
	// ErrCorrupt: the encoding is inconsistent (a bad item tag, nesting deeper than
	// maxDepth, an RLE stream that does not fill its frame, a damaged deflate stream...).
	ErrCorrupt = errors.New("dicom: corrupt file")
	// ErrUnsupported: a transfer syntax this package does not decode (JPEG, JPEG-LS, JPEG
	// 2000, video...: the error names it) or a pixel format it does not read (colour, 1-bit,
	// floating point pixels).
	ErrUnsupported = errors.New("dicom: unsupported")
	// ErrNoPixels: the file holds no image (a DICOMDIR, a structured report, an RT plan).
	ErrNoPixels = errors.New("dicom: no pixel data")
	// ErrTooLarge: a deflated data set inflates beyond its pixel data and MaxInflated bytes
	// of other elements, or a series beyond MaxVoxels.
	ErrTooLarge = errors.New("dicom: too large")
	// ErrDuplicate: two different files carry one SOP Instance UID (byte-identical copies are
	// not an error: one is read, the others noted in Series.Duplicates).
	ErrDuplicate = errors.New("dicom: two different files carry one SOP Instance UID")
	// ErrGeometry: the slices of a series do not make one regular volume (a missing slice,
	// spacing that varies, gantry tilt, repeated positions, no position or orientation).
	ErrGeometry = errors.New("dicom: irregular series geometry")
)
