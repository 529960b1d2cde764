package nifti

import "errors"

// Sentinel errors. Every error returned by this package that falls in one of these classes wraps
// the sentinel (test with errors.Is) together with the path of the file and the detail, e.g.
// "open scans/a.nii.gz: nifti: truncated data: file ends inside z-slice 17 of 40".
var (
	// ErrUnsupportedDatatype: the datatype is not one of the eight scalar types this package
	// decodes (RGB, complex, int64, float128...), or the caller asked for a conversion that is
	// not exact (ReadSlicesInt16 of a float file, ReadUint8 of an int16 file).
	ErrUnsupportedDatatype = errors.New("nifti: unsupported datatype")
	// ErrNotNIfTI: sizeof_hdr or magic does not identify a NIfTI-1 or NIfTI-2 header, or the
	// file (or its gzip stream) is empty, or shorter than 4 bytes that do not begin a
	// sizeof_hdr.
	ErrNotNIfTI = errors.New("nifti: not a NIfTI file")
	// ErrCorrupt: the header is NIfTI but inconsistent (bad dims, vox_offset...), or the gzip
	// stream is damaged (bad header, bad deflate data, checksum mismatch).
	ErrCorrupt = errors.New("nifti: corrupt file")
	// ErrTruncated: the file, or its gzip stream, ends before the header or the voxel data it
	// declares (a file of 1 to 3 bytes that begin a sizeof_hdr included).
	ErrTruncated = errors.New("nifti: truncated data")
	// ErrTooLarge: the dims are beyond MaxDim/MaxVoxels, or their product overflows.
	ErrTooLarge = errors.New("nifti: volume too large")
	// ErrMultiVolume: a 4D (or higher) file with more than one volume was opened without
	// WithVolume.
	ErrMultiVolume = errors.New("nifti: multi-volume file")
	// ErrNotSeekable: a positional read (ReadSlicesInt16At, ...) of a file whose voxel data is
	// gzip-compressed, which can only be read in order (use the sequential ReadSlices*).
	ErrNotSeekable = errors.New("nifti: compressed data cannot be read by position")
)
