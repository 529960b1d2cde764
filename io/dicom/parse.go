package dicom

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// Limits on what a file can make the parser do.
const (
	// MaxInflated bounds what a deflated data set may inflate to besides its pixel data (the
	// attributes, private elements, padding): past it the file fails with ErrTooLarge, after
	// at most that much inflating and without keeping it. The pixel data may add what it
	// declares, no more.
	MaxInflated = 16 << 20
	// maxDepth bounds the nesting of sequences, so a hostile file cannot exhaust the stack.
	maxDepth = 32
	// maxKeptValue bounds a kept attribute's value (all of them are short strings or numbers;
	// a longer one is skipped as if absent).
	maxKeptValue = 1 << 20
	// windowSize is how much of a file the parser reads at once; the elements before the pixel
	// data usually fit in one window.
	windowSize = 64 << 10
)

// maxInflated is MaxInflated, lowered by tests.
var maxInflated int64 = MaxInflated

// undefinedLength marks sequences, items and encapsulated pixel data delimited by tags.
const undefinedLength = 0xFFFFFFFF

// source reads byte ranges of a file through a window, so that skipped elements (private
// blobs, overlays, the pixel data itself) are never read.
//
// Over a deflated data set (z set) the window slides forward over the inflating stream: what
// lies behind the window cannot be read again (the decoder never asks), skipped bytes are
// inflated and dropped, and nothing at or past limit is inflated. The stream's length is not
// known until it ends: size is then math.MaxInt64, and more tells where the data set ends.
type source struct {
	r      io.ReaderAt
	size   int64
	win    []byte
	winOff int64

	z       io.Reader // the inflating stream, or nil
	pos     int64     // offset of the next byte z gives: the window ends there
	limit   int64     // bytes at or past limit are not inflated (ErrTooLarge)
	allowed bool      // the pixel data's length was added to limit
}

// newStream is a source over the inflated data set z, bounded by maxInflated.
func newStream(z io.Reader) *source {
	return &source{z: z, size: math.MaxInt64, limit: maxInflated}
}

// bytes returns n bytes at off; the slice is valid until the next call. Callers have checked
// off+n against size.
func (s *source) bytes(off int64, n int) ([]byte, error) {
	if s.z != nil {
		return s.streamBytes(off, n)
	}
	if off >= s.winOff && off+int64(n) <= s.winOff+int64(len(s.win)) {
		return s.win[off-s.winOff : off-s.winOff+int64(n)], nil
	}
	size := max(n, windowSize)
	size = int(min(int64(size), s.size-off))
	if size < n {
		return nil, io.ErrUnexpectedEOF
	}
	if cap(s.win) < size {
		s.win = make([]byte, size)
	}
	s.win = s.win[:size]
	if err := readFull(s.r, s.win, off); err != nil {
		s.win = s.win[:0]
		return nil, err
	}
	s.winOff = off
	return s.win[:n], nil
}

// streamBytes is bytes over the inflating stream.
func (s *source) streamBytes(off int64, n int) ([]byte, error) {
	end := off + int64(n)
	if off < s.winOff {
		return nil, fmt.Errorf("%w: the deflated data set is read backwards at offset %d", ErrCorrupt, off)
	}
	if end <= s.pos {
		return s.win[off-s.winOff : end-s.winOff], nil
	}
	if end > s.limit {
		return nil, s.tooLarge()
	}
	if off > s.pos {
		if err := s.skip(off); err != nil {
			return nil, err
		}
		s.win = s.win[:0]
	} else {
		s.win = s.win[:copy(s.win, s.win[off-s.winOff:])]
	}
	s.winOff = off
	want := int(min(int64(max(n, windowSize)), s.limit-off))
	if cap(s.win) < want {
		s.win = append(make([]byte, 0, want), s.win...)
	}
	for len(s.win) < n {
		k, err := s.z.Read(s.win[len(s.win):want])
		s.win = s.win[:len(s.win)+k]
		s.pos += int64(k)
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, inflateError(err, s.pos)
		}
	}
	if len(s.win) < n {
		return nil, fmt.Errorf("%w: the deflated data set ends at byte %d, %d bytes are needed at offset %d", ErrTruncated, s.pos, n, off)
	}
	return s.win[:n], nil
}

// skip inflates and drops the stream's bytes up to off.
func (s *source) skip(off int64) error {
	if off > s.limit {
		return s.tooLarge()
	}
	k, err := io.CopyN(io.Discard, s.z, off-s.pos)
	s.pos += k
	if err == io.EOF {
		return fmt.Errorf("%w: the deflated data set ends at byte %d, an element extends to byte %d", ErrTruncated, s.pos, off)
	}
	if err != nil {
		return inflateError(err, s.pos)
	}
	return nil
}

// more reports whether the data set goes on at off: off is before the end of the file, or of
// the inflated stream (which is then inflated up to off).
func (s *source) more(off int64) (bool, error) {
	if s.z == nil {
		return off < s.size, nil
	}
	if off < s.pos {
		return true, nil
	}
	if off < s.limit {
		if _, err := s.streamBytes(off, 1); err != nil {
			if errors.Is(err, ErrTruncated) && s.pos == off {
				return false, nil
			}
			return false, err
		}
		return true, nil
	}
	if off > s.pos {
		if err := s.skip(off); err != nil {
			return false, err
		}
	}
	var b [1]byte // at the limit: only the stream's end is allowed
	k, err := io.ReadFull(s.z, b[:])
	if k > 0 {
		return false, s.tooLarge()
	}
	if err != io.EOF {
		return false, inflateError(err, s.pos)
	}
	return false, nil
}

// allow raises the stream's limit by n bytes: the pixel data's declared length, once (a
// second pixel data element counts against MaxInflated).
func (s *source) allow(n int64) {
	if s.z != nil && !s.allowed {
		s.limit += n
		s.allowed = true
	}
}

func (s *source) tooLarge() error {
	return fmt.Errorf("%w: the deflated data set inflates beyond its pixel data and %d bytes of other elements", ErrTooLarge, maxInflated)
}

// inflateError classifies an error of the inflating stream at offset off.
func inflateError(err error, off int64) error {
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("%w: the deflate stream ends before its last block (after %d bytes)", ErrTruncated, off)
	}
	return fmt.Errorf("%w: deflated data set, after %d bytes: %w", ErrCorrupt, off, err)
}

// readFull reads len(b) bytes at off: a short read is an error (io.ErrUnexpectedEOF when the
// file ended), even if the ReaderAt says io.EOF.
func readFull(r io.ReaderAt, b []byte, off int64) error {
	n, err := r.ReadAt(b, off)
	if n == len(b) {
		return nil
	}
	if err == nil || errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	return err
}

// value is a kept attribute: its VR (from the file when explicit, else from keptVR), its
// bytes, or the items of a sequence.
type value struct {
	vr    string
	raw   []byte
	items []*DataSet
}

// DataSet holds the attributes of a data set (or sequence item) this package uses; the others
// were skipped.
type DataSet struct {
	order binary.ByteOrder
	elems map[Tag]*value
}

// fragment is a byte range of the file (or inflated data set).
type fragment struct{ off, n int64 }

// pixelLoc is where the pixel data lies: one range for native data, the fragments (after the
// basic offset table) for encapsulated data.
type pixelLoc struct {
	found        bool
	encapsulated bool
	native       fragment
	offsets      []uint32 // basic offset table, empty when absent
	fragments    []fragment
}

// decoder walks a data set's elements.
type decoder struct {
	src      *source
	order    binary.ByteOrder
	explicit bool
	pixels   pixelLoc
}

type header struct {
	tag    Tag
	vr     string
	length uint32
	value  int64 // offset of the value
}

// readHeader reads the element header at off; end bounds it.
func (d *decoder) readHeader(off, end int64) (header, error) {
	if end-off < 8 {
		return header{}, fmt.Errorf("%w: %d bytes left at offset %d, an element header needs 8", ErrTruncated, end-off, off)
	}
	b, err := d.src.bytes(off, 8)
	if err != nil {
		return header{}, err
	}
	tag := Tag(uint32(d.order.Uint16(b[0:2]))<<16 | uint32(d.order.Uint16(b[2:4])))
	if tag.Group() == 0xFFFE || !d.explicit { // items and delimiters never carry a VR
		return header{tag: tag, length: d.order.Uint32(b[4:8]), value: off + 8}, nil
	}
	vr := vrName(b[4:6])
	if !longLengthVR(vr) {
		return header{tag: tag, vr: vr, length: uint32(d.order.Uint16(b[6:8])), value: off + 8}, nil
	}
	if end-off < 12 {
		return header{}, fmt.Errorf("%w: element %v at offset %d: its %s header needs 12 bytes, %d left", ErrTruncated, tag, off, vr, end-off)
	}
	b, err = d.src.bytes(off+8, 4)
	if err != nil {
		return header{}, err
	}
	return header{tag: tag, vr: vr, length: d.order.Uint32(b), value: off + 12}, nil
}

// knownVRs are the value representations of PS3.5 6.2, whose names vrName returns without
// allocating.
var knownVRs = func() map[[2]byte]string {
	m := map[[2]byte]string{}
	for _, vr := range strings.Fields("AE AS AT CS DA DS DT FD FL IS LO LT OB OD OF OL OV OW PN SH SL SQ SS ST SV TM UC UI UL UN UR US UT UV") {
		m[[2]byte{vr[0], vr[1]}] = vr
	}
	return m
}()

// vrName is an explicit VR's name. Two bytes that are not letters (a damaged or hostile
// file) are all named "??", so that a run of them allocates nothing.
func vrName(b []byte) string {
	if vr, ok := knownVRs[[2]byte{b[0], b[1]}]; ok {
		return vr
	}
	if !isVR(b) {
		return "??"
	}
	return string(b)
}

// dataset parses elements from off to end (a defined length), or up to an item delimiter
// when undefined. It returns the data set and the offset after it (after the delimiter). On
// an error the data set holds the elements parsed before it (a broken file's identity).
func (d *decoder) dataset(off, end int64, undefined bool, depth int) (*DataSet, int64, error) {
	ds := &DataSet{order: d.order, elems: map[Tag]*value{}}
	if depth > maxDepth {
		return ds, 0, fmt.Errorf("%w: sequences nested deeper than %d", ErrCorrupt, maxDepth)
	}
	for off < end {
		if more, err := d.src.more(off); err != nil {
			return ds, 0, err
		} else if !more {
			if depth > 0 || undefined {
				return ds, 0, fmt.Errorf("%w: the data set ends at offset %d inside an item", ErrTruncated, off)
			}
			break // the end of a deflated data set
		}
		h, err := d.readHeader(off, end)
		if err != nil {
			return ds, 0, err
		}
		switch h.tag {
		case tagItemDelim:
			if undefined {
				return ds, h.value, nil
			}
			off = h.value // a stray delimiter in a defined-length item: nothing to skip
			continue
		case tagSequenceDelim, tagItem:
			if depth > 0 || h.tag == tagItem {
				return ds, 0, fmt.Errorf("%w: %v where an element was expected, at offset %d", ErrCorrupt, h.tag, off)
			}
			off = h.value // a stray sequence delimiter at the top level (seen in the wild)
			continue
		}
		if h.tag == tagPixelData || h.length == undefinedLength && (h.vr == "OB" || h.vr == "OW") {
			// The image's pixels (recorded), or an icon's inside a sequence (skipped).
			if off, err = d.pixelData(h, end, depth == 0); err != nil {
				return ds, 0, err
			}
			continue
		}
		vr, kept := keptVR[h.tag]
		if d.explicit && h.vr != "UN" {
			vr = h.vr
		}
		if kept && vr == "SQ" || h.length == undefinedLength {
			// UN of undefined length is a sequence encoded implicit VR little endian (PS3.5 6.2.2).
			sub := d
			if h.vr == "UN" {
				sub = &decoder{src: d.src, order: binary.LittleEndian}
			}
			seqEnd := end
			if h.length != undefinedLength {
				if int64(h.length) > end-h.value {
					return ds, 0, lengthError(h, end)
				}
				seqEnd = h.value + int64(h.length)
			}
			items, next, err := sub.items(h.value, seqEnd, h.length == undefinedLength, depth+1, kept)
			if err != nil {
				return ds, 0, fmt.Errorf("in sequence %v: %w", h.tag, err)
			}
			if kept {
				ds.elems[h.tag] = &value{vr: "SQ", items: items}
			}
			off = next
			continue
		}
		if int64(h.length) > end-h.value {
			return ds, 0, lengthError(h, end)
		}
		if kept && h.length <= maxKeptValue {
			b, err := d.src.bytes(h.value, int(h.length))
			if err != nil {
				return ds, 0, err
			}
			ds.elems[h.tag] = &value{vr: vr, raw: bytes.Clone(b)}
		}
		off = h.value + int64(h.length)
	}
	if undefined {
		return ds, 0, fmt.Errorf("%w: item without its delimiter before offset %d", ErrTruncated, end)
	}
	return ds, off, nil
}

func lengthError(h header, end int64) error {
	return fmt.Errorf("%w: element %v declares %d bytes at offset %d, %d are left", ErrTruncated, h.tag, h.length, h.value, max(end-h.value, 0))
}

// items parses a sequence's items, keeping their data sets when keep is set. It returns the
// offset after the sequence.
func (d *decoder) items(off, end int64, undefined bool, depth int, keep bool) ([]*DataSet, int64, error) {
	var items []*DataSet
	for off < end || undefined {
		h, err := d.readHeader(off, end)
		if err != nil {
			return nil, 0, err
		}
		switch {
		case h.tag == tagSequenceDelim && undefined:
			return items, h.value, nil
		case h.tag != tagItem:
			return nil, 0, fmt.Errorf("%w: %v inside a sequence at offset %d, expected an item", ErrCorrupt, h.tag, off)
		}
		itemEnd, itemUndefined := end, h.length == undefinedLength
		if !itemUndefined {
			if int64(h.length) > end-h.value {
				return nil, 0, lengthError(h, end)
			}
			itemEnd = h.value + int64(h.length)
		}
		ds, next, err := d.dataset(h.value, itemEnd, itemUndefined, depth)
		if err != nil {
			return nil, 0, err
		}
		if keep {
			items = append(items, ds)
		}
		off = next
	}
	return items, off, nil
}

// pixelData returns the offset after the pixel data at h, and records where it lies when
// record is set.
func (d *decoder) pixelData(h header, end int64, record bool) (int64, error) {
	if h.length != undefinedLength {
		if int64(h.length) > end-h.value {
			return 0, lengthError(h, end)
		}
		if record {
			d.pixels = pixelLoc{found: true, native: fragment{h.value, int64(h.length)}}
			d.src.allow(int64(h.length))
		}
		return h.value + int64(h.length), nil
	}
	var loc pixelLoc
	defer func() {
		if record {
			d.pixels = loc
		}
	}()
	loc.found, loc.encapsulated = true, true
	off := h.value
	for first := true; ; first = false {
		ih, err := d.readHeader(off, end)
		if err != nil {
			return 0, fmt.Errorf("encapsulated pixel data: %w", err)
		}
		if ih.tag == tagSequenceDelim {
			return ih.value, nil
		}
		if ih.tag != tagItem || ih.length == undefinedLength {
			return 0, fmt.Errorf("%w: encapsulated pixel data: %v of length %#x at offset %d, expected an item", ErrCorrupt, ih.tag, ih.length, off)
		}
		if int64(ih.length) > end-ih.value {
			return 0, fmt.Errorf("encapsulated pixel data: %w", lengthError(ih, end))
		}
		switch {
		case !record:
		case first && ih.length > maxKeptValue: // an offset table of 256 Ki frames: ignored
		case first: // the basic offset table
			b, err := d.src.bytes(ih.value, int(ih.length))
			if err != nil {
				return 0, err
			}
			for i := 0; i+4 <= len(b); i += 4 {
				loc.offsets = append(loc.offsets, d.order.Uint32(b[i:]))
			}
		default:
			loc.fragments = append(loc.fragments, fragment{ih.value, int64(ih.length)})
		}
		off = ih.value + int64(ih.length)
	}
}

// str is the attribute's text with padding (spaces, NULs) trimmed, "" when absent.
func (ds *DataSet) str(t Tag) string {
	v := ds.elems[t]
	if v == nil || v.raw == nil {
		return ""
	}
	return strings.TrimRight(strings.TrimLeft(string(v.raw), " "), " \x00")
}

// floats decodes a numeric attribute (DS, IS as text; FD, FL, US, SS, UL, SL as binary), nil
// when absent or unreadable.
func (ds *DataSet) floats(t Tag) []float64 {
	v := ds.elems[t]
	if v == nil || v.raw == nil {
		return nil
	}
	size := map[string]int{"FD": 8, "FL": 4, "US": 2, "SS": 2, "UL": 4, "SL": 4}[v.vr]
	if size == 0 { // DS, IS, or anything textual
		var out []float64
		for _, f := range strings.Split(ds.str(t), `\`) {
			x, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
			if err != nil {
				return nil
			}
			out = append(out, x)
		}
		return out
	}
	out := make([]float64, 0, len(v.raw)/size)
	for i := 0; i+size <= len(v.raw); i += size {
		b := v.raw[i:]
		switch v.vr {
		case "FD":
			out = append(out, math.Float64frombits(ds.order.Uint64(b)))
		case "FL":
			out = append(out, float64(math.Float32frombits(ds.order.Uint32(b))))
		case "US":
			out = append(out, float64(ds.order.Uint16(b)))
		case "SS":
			out = append(out, float64(int16(ds.order.Uint16(b))))
		case "UL":
			out = append(out, float64(ds.order.Uint32(b)))
		case "SL":
			out = append(out, float64(int32(ds.order.Uint32(b))))
		}
	}
	return out
}

// float is the first value of a numeric attribute, or def.
func (ds *DataSet) float(t Tag, def float64) float64 {
	if v := ds.floats(t); len(v) > 0 && !math.IsNaN(v[0]) && !math.IsInf(v[0], 0) {
		return v[0]
	}
	return def
}

// integer is the first value of an integer attribute, or def.
func (ds *DataSet) integer(t Tag, def int) int {
	v := ds.float(t, math.NaN())
	if math.IsNaN(v) || v != math.Trunc(v) || math.Abs(v) > math.MaxInt32 {
		return def
	}
	return int(v)
}

// item is the first item of a kept sequence, nil when absent or empty.
func (ds *DataSet) item(t Tag) *DataSet {
	if v := ds.elems[t]; v != nil && len(v.items) > 0 {
		return v.items[0]
	}
	return nil
}

// has reports whether the attribute is present with a value.
func (ds *DataSet) has(t Tag) bool {
	v := ds.elems[t]
	return v != nil && (len(v.raw) > 0 || len(v.items) > 0)
}
