package dicom

import (
	"encoding/binary"
	"errors"
	"fmt"

	"voxpipe/io/jpeg"
	"voxpipe/io/jpegls"
)

// A codec decodes one encapsulated frame's bytes (its fragments joined) into dst: the frame's
// Rows x Columns samples, BitsAllocated wide, host byte order, unmasked.
type codec func(dst, src []byte, f *File) error

// codecs are the encapsulated syntaxes this package decodes, frame by frame. JPEG baseline
// goes through io/jpeg too, not Go's image/jpeg: io/jpeg's IDCT is IJG's, so frames come out
// as dcmtk (and every libjpeg-based reader) decodes them; image/jpeg's differs by 1 on a few
// per cent of pixels (io/jpeg's tests compare the two).
var codecs = map[TransferSyntax]codec{
	RLELossless:              func(dst, src []byte, f *File) error { return decodeRLE(dst, src, f.BitsAllocated/8) },
	EncapsulatedUncompressed: decodeUncompressed,
	JPEGBaseline:             jpegCodec(jpeg.Decode),
	JPEGExtended:             jpegCodec(jpeg.Decode),
	JPEGLossless:             jpegCodec(jpeg.Decode),
	JPEGLosslessSV1:          jpegCodec(jpeg.Decode),
	JPEGLSLossless:           jpegCodec(jpegls.Decode),
	JPEGLSNearLossless:       jpegCodec(jpegls.Decode),
}

// jpegCodec adapts a decoder of io/jpeg or io/jpegls, which write 8- or 16-bit samples.
func jpegCodec(decode func(dst, src []byte, width, height, sampleBytes int) error) codec {
	return func(dst, src []byte, f *File) error {
		if f.BitsAllocated > 16 {
			return fmt.Errorf("%w: %d bits allocated in a JPEG frame; 8 and 16 are read", ErrUnsupported, f.BitsAllocated)
		}
		return decode(dst, src, f.Columns, f.Rows, f.BitsAllocated/8)
	}
}

// decodeUncompressed copies a native frame held in a fragment (little endian, PS3.5 A.4.11).
func decodeUncompressed(dst, src []byte, f *File) error {
	if len(src) < len(dst) || len(src) > len(dst)+1 {
		return fmt.Errorf("%w: a %d-byte fragment for a %d-byte frame", ErrCorrupt, len(src), len(dst))
	}
	copy(dst, src)
	if swapped(binary.LittleEndian) && f.BitsAllocated > 8 {
		swap(dst, f.BitsAllocated/8)
	}
	return nil
}

// wayOut is what to do with a syntax this package refuses.
const wayOut = "ask the PACS for Explicit VR Little Endian (WADO-RS: Accept: multipart/related; " +
	"type=\"application/dicom\"; transfer-syntax=1.2.840.10008.1.2.1), or transcode first " +
	"(gdcmconv --raw IN OUT, or dcmdjpeg/dcmdjpls for JPEG and JPEG-LS)"

// refuse is the error for pixel data in a syntax this package does not decode, naming it
// and the way out.
func refuse(ts TransferSyntax) error {
	return fmt.Errorf("%w: transfer syntax %v is not decoded by voxpipe; %s", ErrUnsupported, ts, wayOut)
}

// codecError wraps a decoder's error as this package's class: the codecs' own sentinels are
// kept in the chain beside it.
func codecError(err error) error {
	switch {
	case errors.Is(err, ErrCorrupt), errors.Is(err, ErrUnsupported), errors.Is(err, ErrTruncated):
		return err
	case errors.Is(err, jpeg.ErrUnsupported), errors.Is(err, jpegls.ErrUnsupported):
		return fmt.Errorf("%w: %w", ErrUnsupported, err)
	case errors.Is(err, jpeg.ErrTruncated), errors.Is(err, jpegls.ErrTruncated):
		return fmt.Errorf("%w: %w", ErrTruncated, err)
	}
	return fmt.Errorf("%w: %w", ErrCorrupt, err)
}
