// Package jpegls decodes JPEG-LS (ITU-T T.87 / ISO 14495-1) streams of one component, as
// DICOM's JPEG-LS lossless (1.2.840.10008.1.2.4.80) and near-lossless
// (1.2.840.10008.1.2.4.81) transfer syntaxes carry a frame: precision 2 to 16 bits, NEAR 0
// or more, default or LSE-given thresholds and RESET, regular and run mode, restart
// intervals (DRI with RSTm), APPn and COM segments skipped, fill bytes and dcmtk's padded
// ("extended") EOI accepted.
//
// It refuses (ErrUnsupported) what a DICOM frame of one component does not need: more than
// one component, mapping tables (LSE id 2 and 3, a scan's Tm), oversize dimensions (LSE id
// 4), a point transform, a height given by DNL. Frames other than the caller's fail
// ErrMismatch before any decoding; streams that break T.87 fail ErrCorrupt, streams that end
// early ErrTruncated.
//
// It is written by hand because no Go module decodes JPEG-LS, and a DICOM reader must not
// call out to C. Hostile input is bounded: time O(width*height + len(src)), memory O(width)
// beyond dst (two row buffers, and a gradient table of 2*T3+1 entries), no panics, no
// reading outside src; mapped errors beyond 2*RANGE are refused, which bounds the context
// counters.
//
// There are two decoders behind one marker parser and restart-interval driver
// (markers.go, decode.go). reference.go and refrun.go follow T.87 Annex A literally and
// plainly: its variables A, B, C, N, Nn and RUNindex, one bit read at a time, neighbours read
// back from dst with T.87's edge rules. Decode uses the fast one (fast.go, fastrun.go,
// bits.go): a 64-bit bit cache that loads 8 bytes at a time where they hold no 0xFF, a
// gradient-quantisation table, contexts as structs, the lossless reconstruction without the
// near-lossless arithmetic, samples read from two row buffers that carry T.87's edge
// samples. The tests decode every stream with both and require the same bytes, on encoder
// output (dcmcjpls, checked against dcmdjpls) and on fuzz inputs.
package jpegls
