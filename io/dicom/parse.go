package dicom

import (
	"bytes"
	"encoding/binary"
	"fmt"
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
	extended     []uint64 // the Extended Offset Table, nil when absent
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
			if off, err = d.sequence(ds, h, end, depth, kept); err != nil {
				return ds, 0, err
			}
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

// sequence parses the sequence at h (a kept SQ, or any element of undefined length) up to
// end at the latest, keeping its items in ds when kept, and returns the offset after it.
func (d *decoder) sequence(ds *DataSet, h header, end int64, depth int, kept bool) (int64, error) {
	// UN of undefined length is a sequence encoded implicit VR little endian (PS3.5 6.2.2).
	sub := d
	if h.vr == "UN" {
		sub = &decoder{src: d.src, order: binary.LittleEndian}
	}
	seqEnd := end
	if h.length != undefinedLength {
		if int64(h.length) > end-h.value {
			return 0, lengthError(h, end)
		}
		seqEnd = h.value + int64(h.length)
	}
	items, next, err := sub.items(h.value, seqEnd, h.length == undefinedLength, depth+1, kept)
	if err != nil {
		return 0, fmt.Errorf("in sequence %v: %w", h.tag, err)
	}
	if kept {
		ds.elems[h.tag] = &value{vr: "SQ", items: items}
	}
	return next, nil
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
