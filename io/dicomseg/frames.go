package dicomseg

import "strconv"

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
// significant bit first (PS3.5 8.1.1), padded to an even length. One frame's bytes are
// built at a time.
func (p *segPlan) pixelData(e *encoder, mask []byte) {
	rows, cols := p.rows, p.cols
	plane := rows * cols
	bits := int64(len(p.frames)) * int64(plane)
	n := (bits + 7) / 8
	padded := n + n%2
	e.header(0x7FE00010, "OB", uint32(padded))
	buf := make([]byte, plane/8+2)
	var carry byte
	carryBits := 0
	for _, f := range p.frames {
		clear(buf)
		buf[0] = carry
		bit := carryBits
		seg := byte(f.segment)
		base := f.z * plane
		for r := range rows {
			row := mask[base+(rows-1-r)*cols : base+(rows-r)*cols]
			for _, v := range row {
				if v == seg {
					buf[bit>>3] |= 1 << (bit & 7)
				}
				bit++
			}
		}
		e.write(buf[:bit>>3])
		carryBits = bit & 7
		carry = buf[bit>>3]
	}
	if carryBits > 0 {
		e.write([]byte{carry})
	}
	if padded > n {
		e.write([]byte{0})
	}
}
