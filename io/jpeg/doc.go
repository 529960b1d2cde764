// Package jpeg decodes the JPEG streams of DICOM frames (ITU-T T.81): one grey component a
// frame, coded with Huffman tables, by
//
//   - the lossless process 14 (SOF3; DICOM 1.2.840.10008.1.2.4.57 and .70, SV1): the seven
//     predictors of Table H.1, precision 2 to 16 bits, point transforms, restart intervals;
//   - the sequential DCT processes 1, 2 and 4 (SOF0 baseline, SOF1 extended; DICOM .50 and
//     .51), 8 or 12 bits, with an integer IDCT bit-identical to IJG libjpeg's jpeg_idct_islow,
//     which is what dcmtk's dcmdjpeg decodes with, so that both give the same samples.
//
// It refuses (ErrUnsupported, naming it) progressive, arithmetic-coded and hierarchical
// streams, frames of more than one component, 16-bit DCT (outside T.81; gdcm writes it) and
// lossless restart intervals that are not whole rows. It is written by hand because no Go module
// decodes lossless or 12-bit JPEG (the standard library's image/jpeg decodes 8-bit baseline and
// progressive only).
//
// The entropy decoding has a plain reference beside its fast path, as io/inflate does: the
// reference (reference.go) reads one bit at a time and decodes Huffman codes as T.81 F.2.2.3
// DECODE does, and reconstructs lossless samples one by one with a generic predictor; the fast
// path reads through a 64-bit bit buffer (bits.go), decodes a lossless difference, code and
// extra bits, with one table look-up (lossless.go) and reconstructs a row in chunks with a
// loop per predictor. The DCT path shares its block decoding and IDCT (dct.go, idct.go)
// between the two readers. The tests hold the two equal on random streams, on real encoders'
// streams and under fuzzing.
//
// Hostile input costs O(width*height + len(src)) time and no allocation beyond small tables;
// the frame header is checked against the caller's dimensions before any decoding.
package jpeg

import (
	"errors"
	"fmt"
)

// The sentinel errors; each error this package returns wraps one (or, for a frame of several
// components, both ErrUnsupported and ErrMismatch) with the marker, byte offset or row.
var (
	ErrCorrupt     = errors.New("jpeg: corrupt stream")
	ErrTruncated   = errors.New("jpeg: truncated stream")
	ErrUnsupported = errors.New("jpeg: unsupported process")
	ErrMismatch    = errors.New("jpeg: frame header does not match the frame")
)

// Process is the coding process a frame header (its SOFn marker) names.
type Process int

// The processes. Decode decodes Baseline, Extended and Lossless; the others are refused.
const (
	Baseline              Process = iota + 1 // SOF0: sequential DCT, 8 bits, Huffman
	Extended                                 // SOF1: sequential DCT, 8 or 12 bits, Huffman
	Progressive                              // SOF2: progressive DCT, Huffman
	Lossless                                 // SOF3: lossless, Huffman
	ArithmeticExtended                       // SOF9: sequential DCT, arithmetic coding
	ArithmeticProgressive                    // SOF10: progressive DCT, arithmetic coding
	ArithmeticLossless                       // SOF11: lossless, arithmetic coding
	Hierarchical                             // DHP, SOF5-7, SOF13-15: hierarchical mode
)

var processNames = [...]string{
	Baseline:              "baseline DCT",
	Extended:              "extended sequential DCT",
	Progressive:           "progressive DCT",
	Lossless:              "lossless",
	ArithmeticExtended:    "arithmetic-coded sequential DCT",
	ArithmeticProgressive: "arithmetic-coded progressive DCT",
	ArithmeticLossless:    "arithmetic-coded lossless",
	Hierarchical:          "hierarchical",
}

func (p Process) String() string {
	if p > 0 && int(p) < len(processNames) {
		return processNames[p]
	}
	return fmt.Sprintf("Process(%d)", int(p))
}

// Info is what a stream's markers up to its first scan header say.
type Info struct {
	Process         Process
	Width, Height   int // Height 0: the lines are given by a DNL marker after the scan
	Components      int
	Precision       int // bits a sample
	Predictor       int // lossless: the scan's predictor (Ss), 1-7; DCT: 0
	PointTransform  int // the scan's Al
	RestartInterval int // MCUs (lossless: samples) between restart markers; 0: none
}
