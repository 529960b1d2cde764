package jpegls

import "errors"

// The errors Decode and ReadInfo return wrap one of these (compare with errors.Is); the
// wrapping text names the marker, byte offset or row.
var (
	// ErrCorrupt: the stream breaks T.87's syntax or its coded values are impossible.
	ErrCorrupt = errors.New("jpegls: corrupt stream")
	// ErrTruncated: the data ends before the image is complete.
	ErrTruncated = errors.New("jpegls: truncated stream")
	// ErrUnsupported: valid JPEG-LS this package does not decode (the message names it).
	ErrUnsupported = errors.New("jpegls: unsupported")
	// ErrMismatch: the frame is not the caller's (size, components, precision, dst).
	ErrMismatch = errors.New("jpegls: frame does not match the caller's")
)

// errNeedBits is what the scan decoders return when they need bits past the end of an
// interval's entropy-coded data; the driver turns it into ErrTruncated or ErrCorrupt by what
// ends that data.
var errNeedBits = errors.New("needs bits past the end of the scan data")
