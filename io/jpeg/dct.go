package jpeg

import (
	"encoding/binary"
	"fmt"
)

// decodeDCT decodes a sequential DCT scan of one component (T.81 F.2): its MCU is one 8x8
// block whatever the sampling factors (A.2.2), ceil(w/8) x ceil(h/8) blocks row by row, each
// Huffman-decoded, dequantized and inverse-transformed as IJG libjpeg does, and cropped to the
// frame. r is the fast reader or the reference; the rest is shared.
func (s *scan) decodeDCT(r entropyReader) error {
	hd, f := s.hdr, s.f
	dc, err := tables(&hd.dc, hd.td, "DC")
	if err != nil {
		return err
	}
	ac, err := tables(&hd.ac, hd.ta, "AC")
	if err != nil {
		return err
	}
	t := newIDCT(hd.info.Precision, &hd.quant[hd.tq])
	var coef [64]int32
	var px [64]int32
	pred := int32(0)
	interval, mcu := hd.info.RestartInterval, 0
	for y0 := 0; y0 < f.h; y0 += 8 {
		for x0 := 0; x0 < f.w; x0 += 8 {
			if interval > 0 && mcu > 0 && mcu%interval == 0 {
				if err := s.restart(r, mcu); err != nil {
					return err
				}
				pred = 0
			}
			mcu++
			if err := decodeBlock(r, dc, ac, &pred, &coef); err != nil {
				return fmt.Errorf("%w (block row %d, column %d)", err, y0/8, x0/8)
			}
			t.transform(&coef, &px)
			f.putBlock(&px, x0, y0)
		}
		if r.overrun() {
			return fmt.Errorf("%w: the entropy-coded data ends before block row %d is complete", ErrTruncated, y0/8)
		}
	}
	return nil
}

// decodeBlock reads one block's coefficients (F.2.2.1, F.2.2.2) into coef, in natural order:
// the DC difference added to the prediction pred, then the AC coefficients as run/size
// symbols. Coefficients are kept to 16 bits, as IJG libjpeg's JCOEF is.
func decodeBlock(r entropyReader, dc, ac *huffTable, pred *int32, coef *[64]int32) error {
	*coef = [64]int32{}
	t, err := r.decode(dc)
	if err != nil {
		return err
	}
	if t > 15 {
		return fmt.Errorf("%w: DC difference category %d", ErrCorrupt, t)
	}
	v, err := r.receive(uint(t))
	if err != nil {
		return err
	}
	if t > 0 {
		*pred += extend(v, uint(t))
	}
	coef[0] = int32(int16(*pred))
	for k := 1; k < 64; k++ {
		rs, err := r.decode(ac)
		if err != nil {
			return err
		}
		run, size := rs>>4, uint(rs&15)
		if size == 0 {
			if run != 15 {
				break // EOB
			}
			k += 15 // ZRL: sixteen zeros
			continue
		}
		k += run
		v, err := r.receive(size)
		if err != nil {
			return err
		}
		coef[zigzag[k]] = int32(int16(extend(v, size)))
	}
	return nil
}

// putBlock writes the block's samples at (x0, y0), cropped to the frame.
func (f *frame) putBlock(px *[64]int32, x0, y0 int) {
	w, h := min(8, f.w-x0), min(8, f.h-y0)
	for y := range h {
		row := px[8*y : 8*y+w]
		i := (y0+y)*f.w + x0
		if f.sb == 1 {
			dst := f.dst[i : i+w]
			for x, v := range row {
				dst[x] = byte(v)
			}
			continue
		}
		dst := f.dst[2*i : 2*(i+w)]
		for x, v := range row {
			binary.NativeEndian.PutUint16(dst[2*x:], uint16(v))
		}
	}
}
