package nifti

import (
	"fmt"
	"math"
)

// RawHeader is what ReadHeaderRaw could decode of a file's header, whether or not the file
// passes Open's checks.
type RawHeader struct {
	// Header holds the fields as stored, unchecked. Fields the file does not wholly hold (a
	// header cut short) are zero: Has tells which were read. Version and ByteOrder are those sizeof_hdr
	// gave (Version 0: no header was identified). Magic is the stored magic without its NUL
	// padding, whatever it is. VoxOffset is 0 when the stored value is not a byte offset (see
	// StoredVoxOffset). Extensions are those Open parsed before it stopped: none when it
	// stopped before them (a bad magic or vox_offset, a truncated header).
	Header
	// Read is the number of header bytes the file holds: 348 (NIfTI-1) or 540 (NIfTI-2) when
	// the header is whole, fewer when the file (or its gzip stream) ends inside it.
	Read int
	// StoredVoxOffset is vox_offset as stored: a float in NIfTI-1, so it may be negative,
	// fractional or NaN in a broken file (exact for NIfTI-2 values up to 2^53).
	StoredVoxOffset float64
	// Gzipped reports whether the file holding the header is gzip-compressed (sniffed from its
	// content, as Open does), and FileSize is its size on disk.
	Gzipped  bool
	FileSize int64

	opened bool
}

// ReadHeaderRaw decodes the header of path as far as the file allows, for inspecting broken
// files: it returns every field it could decode, together with the error ReadHeader would
// return for the same file (nil when the file passes ReadHeader's checks, and the header is
// then ReadHeader's). The RawHeader is nil only when the header's file could not be opened
// (missing, not a regular file, a damaged gzip header); otherwise it is returned even with an
// error. Like ReadHeader it reads no voxels, and it allocates nothing sized by the header's
// values: the header is read into a fixed buffer and extensions within the package's limits.
func ReadHeaderRaw(path string) (*RawHeader, error) {
	return readHeaderRaw(path)
}

func readHeaderRaw(path string, opts ...OpenOption) (*RawHeader, error) {
	raw := new(RawHeader)
	opts = append(opts, WithVolume(0), func(c *openConfig) { c.headerOnly, c.raw = true, raw })
	r, err := Open(path, opts...)
	if err == nil {
		raw.Header = *r.Header()
		r.Close()
	}
	if !raw.opened {
		return nil, err
	}
	return raw, err
}

// Has reports whether the header field named (as in nifti1.h and nifti2.h: "dim",
// "datatype", "pixdim", "vox_offset", "sform_code", "srow_x", "magic"...) lies wholly within
// the bytes read, i.e. whether its value in Header is the file's. It is false for a name the
// header's version does not have, and for every field when Version is 0.
func (r *RawHeader) Has(field string) bool {
	var spans map[string][2]int
	switch r.Version {
	case 1:
		spans = fields1
	case 2:
		spans = fields2
	default:
		return false
	}
	f, ok := spans[field]
	return ok && f[0]+f[1] <= r.Read
}

// zeroPartialFields zeroes the bytes of the field that the end of the bytes read (b) cuts
// partway, if any.
func zeroPartialFields(b []byte, version int) {
	spans := fields1
	if version == 2 {
		spans = fields2
	}
	for _, f := range spans {
		if f[0] < len(b) && len(b) < f[0]+f[1] {
			clear(b[f[0]:])
		}
	}
}

// EffectiveScaling returns the scl_slope and scl_inter that apply to the stored values: (1, 0)
// when the slope is 0, NaN or infinite, and an intercept of 0 when it is not finite (the rule
// of nibabel and niftilib; Reader.Scaling gives the same for an opened file).
func (h *Header) EffectiveScaling() (slope, inter float64) {
	return effectiveScaling(h)
}

// ScalingWarning says what is wrong with the header's scaling, or is empty: a scl_slope of 0
// (which the NIfTI standard reads as no scaling: values as stored, which a writer that meant
// to scale did not get), NaN or infinite (taken as no scaling, as nibabel and niftilib do), or
// a scl_inter that is not finite with a valid slope (taken as 0).
func (h *Header) ScalingWarning() string {
	s, i := h.SclSlope, h.SclInter
	switch {
	case s == 0:
		return "scl_slope is 0: the values are used as stored (no scaling, as the NIfTI standard says)"
	case math.IsNaN(s) || math.IsInf(s, 0):
		return fmt.Sprintf("scl_slope is %v: taken as no scaling, the values used as stored", s)
	case math.IsNaN(i) || math.IsInf(i, 0):
		return fmt.Sprintf("scl_inter is %v: taken as 0", i)
	}
	return ""
}

// fields1 and fields2 give the offset and size of the header fields decoded into Header (and
// sizeof_hdr), by their nifti1.h and nifti2.h names.
var fields1 = map[string][2]int{
	"sizeof_hdr": {0, 4}, "dim_info": {39, 1}, "dim": {40, 16},
	"intent_p1": {56, 4}, "intent_p2": {60, 4}, "intent_p3": {64, 4}, "intent_code": {68, 2},
	"datatype": {70, 2}, "bitpix": {72, 2}, "slice_start": {74, 2}, "pixdim": {76, 32},
	"vox_offset": {108, 4}, "scl_slope": {112, 4}, "scl_inter": {116, 4}, "slice_end": {120, 2},
	"slice_code": {122, 1}, "xyzt_units": {123, 1}, "cal_max": {124, 4}, "cal_min": {128, 4},
	"slice_duration": {132, 4}, "toffset": {136, 4}, "descrip": {148, 80}, "aux_file": {228, 24},
	"qform_code": {252, 2}, "sform_code": {254, 2}, "quatern_b": {256, 4}, "quatern_c": {260, 4},
	"quatern_d": {264, 4}, "qoffset_x": {268, 4}, "qoffset_y": {272, 4}, "qoffset_z": {276, 4},
	"srow_x": {280, 16}, "srow_y": {296, 16}, "srow_z": {312, 16}, "intent_name": {328, 16},
	"magic": {344, 4},
}

var fields2 = map[string][2]int{
	"sizeof_hdr": {0, 4}, "magic": {4, 8}, "datatype": {12, 2}, "bitpix": {14, 2}, "dim": {16, 64},
	"intent_p1": {80, 8}, "intent_p2": {88, 8}, "intent_p3": {96, 8}, "pixdim": {104, 64},
	"vox_offset": {168, 8}, "scl_slope": {176, 8}, "scl_inter": {184, 8}, "cal_max": {192, 8},
	"cal_min": {200, 8}, "slice_duration": {208, 8}, "toffset": {216, 8}, "slice_start": {224, 8},
	"slice_end": {232, 8}, "descrip": {240, 80}, "aux_file": {320, 24}, "qform_code": {344, 4},
	"sform_code": {348, 4}, "quatern_b": {352, 8}, "quatern_c": {360, 8}, "quatern_d": {368, 8},
	"qoffset_x": {376, 8}, "qoffset_y": {384, 8}, "qoffset_z": {392, 8}, "srow_x": {400, 32},
	"srow_y": {432, 32}, "srow_z": {464, 32}, "slice_code": {496, 4}, "xyzt_units": {500, 4},
	"intent_code": {504, 4}, "intent_name": {508, 16}, "dim_info": {524, 1},
}
