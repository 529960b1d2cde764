package dicom

import (
	"fmt"
	"io"
)

// maxCompressedSlack is what a compressed frame may hold beyond four times its decoded size
// (tables, markers, padding): more is refused as corrupt, so that a fragment whose length lies
// within the file's size still cannot make a reader hold more than that per frame.
const maxCompressedSlack = 1 << 20

// maxCompressed bounds a frame's compressed bytes. Four times the decoded size is beyond
// what any of the codecs produces (lossless JPEG spends at most 32 bits on a 16-bit sample).
func (f *File) maxCompressed() int64 { return 4*f.frameBytes() + maxCompressedSlack }

// compressedBound is the most a reader of f holds for one compressed frame.
func (f *File) compressedBound() int64 {
	if !f.pixels.encapsulated {
		return 0
	}
	total := int64(0)
	for _, fr := range f.pixels.fragments {
		total += fr.n
	}
	return min(total, f.maxCompressed())
}

// extendedOffsets is the Extended Offset Table (7FE0,0001), nil when absent or not a whole
// number of 64-bit offsets.
func extendedOffsets(ds *DataSet) []uint64 {
	v := ds.elems[tagExtendedOffsets]
	if v == nil || len(v.raw) == 0 || len(v.raw)%8 != 0 {
		return nil
	}
	out := make([]uint64, len(v.raw)/8)
	for i := range out {
		out[i] = ds.order.Uint64(v.raw[8*i:])
	}
	return out
}

// frameFragments groups the encapsulated fragments by frame (PS3.5 A.4): one frame takes
// them all; else by the Extended Offset Table or the basic offset table when it has one entry
// per frame; else one fragment per frame; else, with more fragments than frames and no table,
// a frame starts at each fragment that opens with a JPEG SOI marker (FF D8), read from r.
func (f *File) frameFragments(r io.ReaderAt) ([][]fragment, error) {
	n, frags := f.NumberOfFrames, f.pixels.fragments
	switch {
	case len(frags) == 0:
		return nil, fmt.Errorf("%w: encapsulated pixel data without fragments", ErrCorrupt)
	case n == 1:
		return [][]fragment{frags}, nil
	case len(f.pixels.extended) == n:
		return byOffsets(f.pixels.extended, frags, "extended offset table")
	case len(f.pixels.offsets) == n:
		offs := make([]uint64, n)
		for i, o := range f.pixels.offsets {
			offs[i] = uint64(o)
		}
		return byOffsets(offs, frags, "basic offset table")
	case len(frags) == n:
		out := make([][]fragment, n)
		for i := range frags {
			out[i] = frags[i : i+1]
		}
		return out, nil
	case len(frags) > n && f.Syntax != RLELossless && f.Syntax != EncapsulatedUncompressed:
		return bySOI(r, frags, n)
	}
	return nil, fmt.Errorf("%w: %d fragments for %d frames and no offset table with an entry per frame", ErrCorrupt, len(frags), n)
}

// byOffsets groups fragments by an offset table: offsets[i] is where frame i's first item
// starts, counted from the first fragment's item tag; they start at 0 and increase, each at
// an item.
func byOffsets(offsets []uint64, frags []fragment, table string) ([][]fragment, error) {
	out := make([][]fragment, len(offsets))
	pos, frame := uint64(0), -1
	for _, fr := range frags {
		if frame+1 < len(offsets) && offsets[frame+1] == pos {
			frame++
		}
		if frame < 0 || frame+1 < len(offsets) && offsets[frame+1] < pos {
			return nil, fmt.Errorf("%w: %s entry %d (%d) is not where a fragment starts", ErrCorrupt, table, frame+1, offsets[frame+1])
		}
		out[frame] = append(out[frame], fr)
		pos += 8 + uint64(fr.n)
	}
	if frame+1 != len(offsets) {
		return nil, fmt.Errorf("%w: %s entry %d (%d) lies past the last fragment", ErrCorrupt, table, frame+1, offsets[frame+1])
	}
	return out, nil
}

// bySOI groups fragments into n frames, each starting at a fragment that opens with FF D8.
func bySOI(r io.ReaderAt, frags []fragment, n int) ([][]fragment, error) {
	var out [][]fragment
	var b [2]byte
	for i, fr := range frags {
		if fr.n >= 2 {
			if err := readFull(r, b[:], fr.off); err != nil {
				return nil, err
			}
		}
		switch soi := fr.n >= 2 && b == [2]byte{0xFF, 0xD8}; {
		case soi:
			out = append(out, nil)
		case i == 0:
			return nil, fmt.Errorf("%w: the first fragment does not start a JPEG stream", ErrCorrupt)
		}
		out[len(out)-1] = append(out[len(out)-1], fr)
	}
	if len(out) != n {
		return nil, fmt.Errorf("%w: %d JPEG streams in %d fragments for %d frames", ErrCorrupt, len(out), len(frags), n)
	}
	return out, nil
}

// readEncapsulated decodes the frames (grouped by frameFragments), frame i into to(i) (nil:
// skipped), with the syntax's codec. buf is the caller's scratch for a frame's compressed
// bytes, grown as needed up to maxCompressed.
func (f *File) readEncapsulated(r io.ReaderAt, frames [][]fragment, to func(frame int) []byte, buf *[]byte) error {
	decode, ok := codecs[f.Syntax]
	if !ok {
		return refuse(f.Syntax)
	}
	for i, frags := range frames {
		dst := to(i)
		if dst == nil {
			continue
		}
		total := int64(0)
		for _, fr := range frags {
			total += fr.n
		}
		if total > f.maxCompressed() {
			return fmt.Errorf("%w: frame %d holds %d compressed bytes, more than %d for a %d-byte frame", ErrCorrupt, i, total, f.maxCompressed(), len(dst))
		}
		if int64(cap(*buf)) < total {
			*buf = make([]byte, total)
		}
		b := (*buf)[:total]
		at := int64(0)
		for _, fr := range frags {
			if err := readFull(r, b[at:at+fr.n], fr.off); err != nil {
				return err
			}
			at += fr.n
		}
		if err := decode(dst, b, f); err != nil {
			return fmt.Errorf("frame %d: %w", i, codecError(err))
		}
	}
	return nil
}
