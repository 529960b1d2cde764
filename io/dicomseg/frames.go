package dicomseg

import (
	"encoding/binary"
	"strconv"
)

// sharedGroups writes what every frame shares: the plane orientation and the pixel measures
// of the source series.
func (p *segPlan) sharedGroups(e *encoder) {
	s := p.s
	fr := s.Slices[0].File.Frames[s.Slices[0].Frame]
	thickness := fr.SliceThickness
	if thickness <= 0 {
		thickness = s.Spacing[2]
	}
	e.item1(0x52009229, func() {
		e.item1(0x00209116, func() { e.str(0x00200037, "DS", dss(fr.Orientation[:]...)) })
		e.item1(0x00289110, func() {
			e.str(0x00180050, "DS", ds(thickness))
			e.str(0x00180088, "DS", ds(s.Spacing[2]))
			e.str(0x00280030, "DS", dss(fr.PixelSpacing[0], fr.PixelSpacing[1]))
		})
	})
}

// perFrameGroups writes each frame's source image, dimension index values, position and
// segment.
func (p *segPlan) perFrameGroups(e *encoder) {
	multiFrame := map[string]bool{}
	for _, sl := range p.s.Slices {
		if sl.File.NumberOfFrames > 1 {
			multiFrame[sl.File.SOPInstanceUID] = true
		}
	}
	e.seq(0x52009230, len(p.frames), func(i int) {
		f := p.frames[i]
		sl := p.s.Slices[f.z]
		e.item1(0x00089124, func() { // DerivationImageSequence
			e.item1(0x00082112, func() { // SourceImageSequence
				e.str(0x00081150, "UI", sl.File.SOPClassUID)
				e.str(0x00081155, "UI", sl.File.SOPInstanceUID)
				if multiFrame[sl.File.SOPInstanceUID] {
					e.str(0x00081160, "IS", strconv.Itoa(sl.Frame+1))
				}
				e.item1(0x0040A170, func() { e.code(Code{"DCM", "121322", "Source image for image processing operation"}) })
			})
			e.item1(0x00089215, func() { e.code(Code{"DCM", "113076", "Segmentation"}) })
		})
		e.item1(0x00209111, func() { e.ul(0x00209157, uint32(f.segment), uint32(f.z+1)) })
		e.item1(0x00209113, func() { e.str(0x00200032, "DS", dss(sl.Position[:]...)) })
		e.item1(0x0062000A, func() { e.us(0x0062000B, uint16(f.segment)) })
	})
}

// pixelData writes the frames' bits, packed contiguously across frame boundaries, least
// significant bit first (PS3.5 8.1.1), padded to an even length. One frame is held at a time:
// its pixels in frame order (rows top down), then its bits.
func (p *segPlan) pixelData(e *encoder, mask []byte) {
	rows, cols := p.rows, p.cols
	plane := rows * cols
	bits := int64(len(p.frames)) * int64(plane)
	n := (bits + 7) / 8
	padded := n + n%2
	e.header(0x7FE00010, "OB", uint32(padded))
	pixels := make([]byte, plane)
	packed := make([]byte, (plane+7)/8+1)
	var carry byte // the bits of the last byte begun, carryBits of them
	carryBits := 0
	for _, f := range p.frames {
		base := f.z * plane
		for r := range rows { // frame row r is mask row y = rows-1-r (dcm2niix's flip)
			copy(pixels[r*cols:(r+1)*cols], mask[base+(rows-1-r)*cols:base+(rows-r)*cols])
		}
		nb := packFrame(packed, pixels, byte(f.segment))
		carry, carryBits = e.writeBits(packed[:nb], plane, carry, carryBits)
	}
	if carryBits > 0 {
		e.write([]byte{carry})
	}
	if padded > n {
		e.write([]byte{0})
	}
}

// writeBits writes nbits bits (packed from bit 0 of b) after the carryBits bits of carry, and
// returns the bits of the last byte begun.
func (e *encoder) writeBits(b []byte, nbits int, carry byte, carryBits int) (byte, int) {
	if carryBits != 0 {
		// shift the frame's bits up by carryBits, carry's bits below them
		k := uint(carryBits)
		prev := carry
		for i, v := range b {
			b[i] = v<<k | prev
			prev = v >> (8 - k)
		}
		b = append(b, prev)
	}
	total := carryBits + nbits
	e.write(b[:total/8])
	if total%8 == 0 {
		return 0, 0
	}
	return b[total/8] & (1<<uint(total%8) - 1), total % 8
}

// packFrame sets bit i of dst (least significant first) where src[i] == v, and returns the
// bytes it filled. Eight pixels at a time: each byte equal to v is found without a branch (a
// zero byte of the XOR, exactly: no borrow between bytes), and their top bits gathered into
// one byte by a multiplication. packFrameRef is the plain loop it must equal.
func packFrame(dst, src []byte, v byte) int {
	const lo7, hi = 0x7F7F7F7F7F7F7F7F, 0x8080808080808080
	splat := uint64(v) * 0x0101010101010101
	n := len(src) / 8
	for i := range n {
		x := binary.LittleEndian.Uint64(src[8*i:]) ^ splat
		zero := ^((x&lo7 + lo7) | x) & hi // 0x80 in each byte of src that equals v
		dst[i] = byte((zero >> 7) * 0x0102040810204080 >> 56)
	}
	nb := n
	if rest := src[8*n:]; len(rest) > 0 {
		var b byte
		for j, s := range rest {
			if s == v {
				b |= 1 << uint(j)
			}
		}
		dst[n] = b
		nb++
	}
	return nb
}

// packFrameRef is packFrame one bit at a time, the reference its tests compare with.
func packFrameRef(dst, src []byte, v byte) int {
	nb := (len(src) + 7) / 8
	clear(dst[:nb])
	for i, s := range src {
		if s == v {
			dst[i/8] |= 1 << uint(i%8)
		}
	}
	return nb
}
