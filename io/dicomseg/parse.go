package dicomseg

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// Limits on what a file can make the reader do. Every length is checked against the bytes
// left before anything is read or sized by it.
const (
	// maxDepth bounds the nesting of sequences (a SEG nests four deep).
	maxDepth = 16
	// maxValue bounds a kept attribute's value; a longer one is skipped as if absent.
	maxValue = 1 << 20
	// maxElements bounds the element headers parsed (kept or not), so that a file of tiny
	// elements cannot keep the reader busy: a SEG of 50,000 frames has about 2 million.
	maxElements = 1 << 23
	// maxKept bounds the kept elements and items, and so the memory the tree takes (about
	// 100 bytes each).
	maxKept = 1 << 21
	// MaxPixelBytes bounds the pixel data ReadFile reads (a BINARY SEG of 512x512 frames
	// holds 65,536 frames in it).
	MaxPixelBytes = 2 << 30
	// windowSize is how much of the file the parser reads at once.
	windowSize = 64 << 10
)

const undefinedLength = 0xFFFFFFFF

// Tags of the structure of a data set.
const (
	tagItem          = 0xFFFEE000
	tagItemDelim     = 0xFFFEE00D
	tagSequenceDelim = 0xFFFEE0DD
	tagPixelData     = 0x7FE00010
)

// elem is a kept element: its VR, its value, or the items of a sequence.
type elem struct {
	tag   uint32
	vr    string
	raw   []byte
	items []*dataset
}

// dataset is a data set or sequence item: its kept elements in file order.
type dataset struct {
	order binary.ByteOrder
	elems []*elem
}

func (d *dataset) find(tag uint32) *elem {
	for _, e := range d.elems {
		if e.tag == tag {
			return e
		}
	}
	return nil
}

// str is the attribute's text, padding (spaces, NULs) trimmed; "" when absent.
func (d *dataset) str(tag uint32) string {
	e := d.find(tag)
	if e == nil {
		return ""
	}
	return strings.TrimRight(strings.TrimLeft(string(e.raw), " "), " \x00")
}

// floats decodes a numeric attribute (DS and IS as text; FD, FL, US, SS, UL, SL as binary);
// nil when absent or unreadable.
func (d *dataset) floats(tag uint32) []float64 {
	e := d.find(tag)
	if e == nil || len(e.raw) == 0 {
		return nil
	}
	size := map[string]int{"FD": 8, "FL": 4, "US": 2, "SS": 2, "UL": 4, "SL": 4}[e.vr]
	if size == 0 {
		var out []float64
		for _, f := range strings.Split(d.str(tag), `\`) {
			x, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
			if err != nil || math.IsNaN(x) || math.IsInf(x, 0) {
				return nil
			}
			out = append(out, x)
		}
		return out
	}
	out := make([]float64, 0, len(e.raw)/size)
	for i := 0; i+size <= len(e.raw); i += size {
		b := e.raw[i:]
		switch e.vr {
		case "FD":
			out = append(out, math.Float64frombits(d.order.Uint64(b)))
		case "FL":
			out = append(out, float64(math.Float32frombits(d.order.Uint32(b))))
		case "US":
			out = append(out, float64(d.order.Uint16(b)))
		case "SS":
			out = append(out, float64(int16(d.order.Uint16(b))))
		case "UL":
			out = append(out, float64(d.order.Uint32(b)))
		case "SL":
			out = append(out, float64(int32(d.order.Uint32(b))))
		}
	}
	return out
}

// integer is the first value of an integer attribute, ok false when absent or not an
// integer of at most 32 bits.
func (d *dataset) integer(tag uint32) (int, bool) {
	v := d.floats(tag)
	if len(v) == 0 || v[0] != math.Trunc(v[0]) || math.Abs(v[0]) > math.MaxInt32 {
		return 0, false
	}
	return int(v[0]), true
}

// items are the items of a kept sequence; item is the first, nil when absent or empty.
func (d *dataset) items(tag uint32) []*dataset {
	if e := d.find(tag); e != nil {
		return e.items
	}
	return nil
}

func (d *dataset) item(tag uint32) *dataset {
	if it := d.items(tag); len(it) > 0 {
		return it[0]
	}
	return nil
}

// source reads a file through a window.
type source struct {
	r    io.ReaderAt
	size int64
	buf  []byte
	at   int64
}

// bytes returns n bytes at off, valid until the next call; the caller checked that they lie
// in the file.
func (s *source) bytes(off int64, n int) ([]byte, error) {
	if off < 0 || n < 0 || int64(n) > s.size-off {
		return nil, fmt.Errorf("%w: %d bytes at offset %d past the end of the file (%d bytes)", ErrNotSEG, n, off, s.size)
	}
	if off >= s.at && off+int64(n) <= s.at+int64(len(s.buf)) {
		return s.buf[off-s.at:][:n], nil
	}
	if n > windowSize {
		b := make([]byte, n)
		return b, readAt(s.r, b, off)
	}
	m := int(min(windowSize, s.size-off))
	if cap(s.buf) < windowSize {
		s.buf = make([]byte, windowSize)
	}
	s.buf = s.buf[:m]
	s.at = off
	if err := readAt(s.r, s.buf, off); err != nil {
		s.buf = s.buf[:0]
		return nil, err
	}
	return s.buf[:n], nil
}

func readAt(r io.ReaderAt, b []byte, off int64) error {
	n, err := r.ReadAt(b, off)
	if n == len(b) {
		return nil
	}
	if err == nil || err == io.EOF {
		return fmt.Errorf("%w: the file ends at offset %d, before its declared length (changed while read?)", ErrNotSEG, off+int64(n))
	}
	return fmt.Errorf("read at offset %d: %w", off, err)
}

// parser walks a data set, keeping the elements of keep (tag to VR: the VR of implicit VR
// files, and which are sequences to keep).
type parser struct {
	src      *source
	order    binary.ByteOrder
	explicit bool
	keep     map[uint32]string
	// stopAtPixels ends the top-level data set at its pixel data (for reading what precedes
	// it only).
	stopAtPixels bool
	parsed, kept *int // shared with the sub-parsers of UN sequences
	pixels       pixelLoc
}

// pixelLoc is where the top-level pixel data lies.
type pixelLoc struct {
	found, encapsulated bool
	off, n              int64
}

func newParser(src *source, order binary.ByteOrder, explicit bool, keep map[uint32]string) *parser {
	return &parser{src: src, order: order, explicit: explicit, keep: keep, parsed: new(int), kept: new(int)}
}

type header struct {
	tag    uint32
	vr     string
	length uint32
	value  int64 // offset of the value
}

func corrupt(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrNotSEG, fmt.Sprintf(format, args...))
}

// readHeader reads the element header at off; end bounds it.
func (p *parser) readHeader(off, end int64) (header, error) {
	if *p.parsed++; *p.parsed > maxElements {
		return header{}, corrupt("more than %d elements", maxElements)
	}
	if end-off < 8 {
		return header{}, corrupt("%d bytes left at offset %d, an element header needs 8", max(end-off, 0), off)
	}
	b, err := p.src.bytes(off, 8)
	if err != nil {
		return header{}, err
	}
	tag := uint32(p.order.Uint16(b[0:2]))<<16 | uint32(p.order.Uint16(b[2:4]))
	if tag>>16 == 0xFFFE || !p.explicit {
		return header{tag: tag, length: p.order.Uint32(b[4:8]), value: off + 8}, nil
	}
	vr := string(b[4:6])
	if !isVR(vr) {
		return header{}, corrupt("element %s at offset %d has no VR (%q)", tagName(tag), off, vr)
	}
	if !longVR(vr) {
		return header{tag: tag, vr: vr, length: uint32(p.order.Uint16(b[6:8])), value: off + 8}, nil
	}
	if end-off < 12 {
		return header{}, corrupt("element %s at offset %d: its header needs 12 bytes, %d left", tagName(tag), off, end-off)
	}
	if b, err = p.src.bytes(off+8, 4); err != nil {
		return header{}, err
	}
	return header{tag: tag, vr: vr, length: p.order.Uint32(b), value: off + 12}, nil
}

func isVR(vr string) bool { return vr[0] >= 'A' && vr[0] <= 'Z' && vr[1] >= 'A' && vr[1] <= 'Z' }

// longVR is in vr.go (shared with the writer).

func tagName(t uint32) string { return fmt.Sprintf("(%04X,%04X)", t>>16, t&0xFFFF) }

func lengthError(h header, end int64) error {
	return corrupt("element %s declares %d bytes at offset %d, %d are left", tagName(h.tag), h.length, h.value, max(end-h.value, 0))
}

// dataset parses elements into ds from off up to end (a defined length), or up to an item
// delimiter when undefined, and returns the offset after them. On an error ds holds what was
// parsed before it.
func (p *parser) dataset(ds *dataset, off, end int64, undefined bool, depth int) (int64, error) {
	if depth > maxDepth {
		return 0, corrupt("sequences nested deeper than %d", maxDepth)
	}
	for off < end {
		h, err := p.readHeader(off, end)
		if err != nil {
			return 0, err
		}
		switch {
		case h.tag == tagItemDelim && undefined:
			return h.value, nil
		case h.tag>>16 == 0xFFFE:
			return 0, corrupt("%s where an element was expected, at offset %d", tagName(h.tag), off)
		case h.tag == tagPixelData && depth == 0:
			if p.stopAtPixels {
				return off, nil
			}
			if off, err = p.pixelData(h, end); err != nil {
				return 0, err
			}
			continue
		}
		vr, kept := p.keep[h.tag]
		if p.explicit && h.vr != "UN" {
			vr = h.vr
		}
		if h.length == undefinedLength || kept && vr == "SQ" {
			if off, err = p.sequence(ds, h, end, depth, kept); err != nil {
				return 0, fmt.Errorf("in %s: %w", tagName(h.tag), err)
			}
			continue
		}
		if int64(h.length) > end-h.value {
			return 0, lengthError(h, end)
		}
		if kept && h.length <= maxValue {
			if *p.kept++; *p.kept > maxKept {
				return 0, corrupt("more than %d attributes", maxKept)
			}
			b, err := p.src.bytes(h.value, int(h.length))
			if err != nil {
				return 0, err
			}
			ds.elems = append(ds.elems, &elem{tag: h.tag, vr: vr, raw: bytes.Clone(b)})
		}
		off = h.value + int64(h.length)
	}
	if undefined {
		return 0, corrupt("an item without its delimiter before offset %d", end)
	}
	return off, nil
}

// sequence parses the sequence (or other element of undefined length) at h, keeping its
// items in ds when kept, and returns the offset after it.
func (p *parser) sequence(ds *dataset, h header, end int64, depth int, kept bool) (int64, error) {
	seqEnd, undefined := end, h.length == undefinedLength
	if !undefined {
		if int64(h.length) > end-h.value {
			return 0, lengthError(h, end)
		}
		seqEnd = h.value + int64(h.length)
	}
	if undefined && (h.tag == tagPixelData || p.explicit && (h.vr == "OB" || h.vr == "OW")) {
		return p.fragments(h.value, end) // an icon's encapsulated pixels
	}
	sub := p
	if h.vr == "UN" { // a sequence encoded implicit VR little endian (PS3.5 6.2.2)
		sub = &parser{src: p.src, order: binary.LittleEndian, keep: p.keep, parsed: p.parsed, kept: p.kept}
	}
	var items []*dataset
	off := h.value
	for off < seqEnd || undefined {
		ih, err := sub.readHeader(off, seqEnd)
		if err != nil {
			return 0, err
		}
		if ih.tag == tagSequenceDelim && undefined {
			off = ih.value
			break
		}
		if ih.tag != tagItem {
			return 0, corrupt("%s in a sequence at offset %d, expected an item", tagName(ih.tag), off)
		}
		itemEnd, itemUndefined := seqEnd, ih.length == undefinedLength
		if !itemUndefined {
			if int64(ih.length) > seqEnd-ih.value {
				return 0, lengthError(ih, seqEnd)
			}
			itemEnd = ih.value + int64(ih.length)
		}
		item := &dataset{order: sub.order}
		if kept {
			if *p.kept++; *p.kept > maxKept {
				return 0, corrupt("more than %d attributes", maxKept)
			}
			items = append(items, item)
		}
		if off, err = sub.dataset(item, ih.value, itemEnd, itemUndefined, depth+1); err != nil {
			return 0, fmt.Errorf("item %d: %w", len(items), err)
		}
	}
	if kept {
		ds.elems = append(ds.elems, &elem{tag: h.tag, vr: "SQ", items: items})
	}
	return off, nil
}

// fragments skips encapsulated pixel data (items up to a sequence delimiter) from off and
// returns the offset after it.
func (p *parser) fragments(off, end int64) (int64, error) {
	for {
		h, err := p.readHeader(off, end)
		if err != nil {
			return 0, fmt.Errorf("encapsulated pixel data: %w", err)
		}
		if h.tag == tagSequenceDelim {
			return h.value, nil
		}
		if h.tag != tagItem || h.length == undefinedLength || int64(h.length) > end-h.value {
			return 0, corrupt("encapsulated pixel data: %s of length %#x at offset %d", tagName(h.tag), h.length, off)
		}
		off = h.value + int64(h.length)
	}
}

// pixelData records where the top-level pixel data lies and returns the offset after it.
func (p *parser) pixelData(h header, end int64) (int64, error) {
	if h.length == undefinedLength {
		p.pixels = pixelLoc{found: true, encapsulated: true}
		return p.fragments(h.value, end)
	}
	if int64(h.length) > end-h.value {
		return 0, lengthError(h, end)
	}
	p.pixels = pixelLoc{found: true, off: h.value, n: int64(h.length)}
	return h.value + int64(h.length), nil
}
