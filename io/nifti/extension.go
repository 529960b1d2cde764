package nifti

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// Extension is one NIfTI header extension. On disk it is esize (a multiple of 16, >= 16,
// counting its own 8 bytes of esize and ecode), ecode, then esize-8 bytes of edata.
//
// Reading returns all esize-8 bytes of edata, including the zero padding the writer added
// (the format does not record the unpadded length; binary edata may end in zeros), so Data is
// the bytes on disk. Text gives the edata of a text extension without that padding. Writing
// pads Data with zeros to the next multiple of 16 bytes; Data read from a file is already a
// whole number of blocks and is written back unchanged.
type Extension struct {
	Code int32  // ecode: one of the ExtCode* constants, or another registered NIFTI_ECODE_*
	Data []byte // edata
}

// Registered extension codes (nifti1.h NIFTI_ECODE_*) this package names.
const (
	ExtCodeDICOM   int32 = 2 // NIFTI_ECODE_DICOM: raw DICOM attributes
	ExtCodeAFNI    int32 = 4 // NIFTI_ECODE_AFNI: AFNI attributes, XML text
	ExtCodeComment int32 = 6 // NIFTI_ECODE_COMMENT: plain text
)

// Text returns Data as a string without its trailing NUL padding.
func (e Extension) Text() string {
	return string(bytes.TrimRight(e.Data, "\x00"))
}

// maxExtensionBytes bounds the extension area (the sum of esizes after the 4-byte extender)
// that is written or parsed. Beyond it a reader stops parsing, so a huge vox_offset or esize
// never makes a header read inflate or allocate more than this; the writer refuses more.
const maxExtensionBytes = 16 << 20

// readAllocStep is the most a reader allocates for edata ahead of the bytes actually read.
const readAllocStep = 64 << 10

// esize is the extension's size on disk: 8 bytes of esize and ecode, Data, zero padding to
// a multiple of 16.
func (e Extension) esize() int64 {
	return (8 + int64(len(e.Data)) + 15) &^ 15
}

// extensionArea is the number of bytes the extensions take after the extender: the sum of
// their esizes, which may not exceed maxExtensionBytes.
func extensionArea(exts []Extension) (int64, error) {
	var total int64
	for i, e := range exts {
		if total += e.esize(); total > maxExtensionBytes {
			return 0, fmt.Errorf("nifti: extensions 0..%d take %d bytes, more than the %d allowed", i, total, maxExtensionBytes)
		}
	}
	return total, nil
}

// appendExtensions appends the extensions in the NIfTI layout (esize, ecode, edata, zero
// padding) in the given byte order; extensionArea must have accepted them.
func appendExtensions(b []byte, exts []Extension, order binary.ByteOrder) []byte {
	for _, e := range exts {
		n := e.esize()
		var head [8]byte
		order.PutUint32(head[:4], uint32(n))
		order.PutUint32(head[4:], uint32(e.Code))
		b = append(b, head[:]...)
		b = append(b, e.Data...)
		b = append(b, make([]byte, n-8-int64(len(e.Data)))...)
	}
	return b
}

// parseExtensions reads extensions from r, which is positioned just after the extender, within
// the area's bytes (area < 0: up to the end of r, a gzipped .hdr of unknown length). Parsing
// is lenient, as niftilib's is (nibabel warns, or fails the file): an esize below 16 or not a
// multiple of 16, an extension running past the end of the area or past maxExtensionBytes, or
// the end of the file stop it, and the extensions parsed until then are returned. Only a read error other than
// the end of the file (a damaged gzip stream) is returned as an error. edata is allocated as
// it arrives, so a hostile esize costs no more memory than the file actually holds.
func parseExtensions(r io.Reader, area int64, order binary.ByteOrder) ([]Extension, error) {
	limit := int64(maxExtensionBytes)
	if area >= 0 {
		limit = min(area, limit)
	}
	var exts []Extension
	for used := int64(0); limit-used >= 16; {
		var head [8]byte
		if _, err := io.ReadFull(r, head[:]); err != nil {
			return exts, unlessEOF(err)
		}
		esize := int64(int32(order.Uint32(head[:4])))
		if esize < 16 || esize%16 != 0 || esize > limit-used {
			return exts, nil
		}
		data, err := readBounded(r, esize-8)
		if err != nil {
			return exts, unlessEOF(err)
		}
		exts = append(exts, Extension{Code: int32(order.Uint32(head[4:])), Data: data})
		used += esize
	}
	return exts, nil
}

// readBounded reads exactly n bytes, growing the buffer in steps of at most readAllocStep
// (doubling) as the bytes arrive rather than allocating n up front.
func readBounded(r io.Reader, n int64) ([]byte, error) {
	b := make([]byte, 0, min(n, readAllocStep))
	for int64(len(b)) < n {
		if len(b) == cap(b) {
			grown := make([]byte, len(b), min(n, 2*int64(cap(b))))
			copy(grown, b)
			b = grown
		}
		k, err := io.ReadFull(r, b[len(b):min(int64(cap(b)), n)])
		b = b[:len(b)+k]
		if err != nil {
			return b, err
		}
	}
	return b, nil
}

func unlessEOF(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return nil
	}
	return err
}

// cloneExtensions copies exts and their Data, so a Header handed out shares nothing with the
// Reader's.
func cloneExtensions(exts []Extension) []Extension {
	if exts == nil {
		return nil
	}
	c := make([]Extension, len(exts))
	for i, e := range exts {
		c[i] = Extension{Code: e.Code, Data: bytes.Clone(e.Data)}
	}
	return c
}
