package dicomtest

import "encoding/binary"

// EncodeRLE16 encodes 16-bit samples as one RLE frame (two segments, high bytes first), with
// both literal and replicate runs.
func EncodeRLE16(px []uint16) []byte {
	segs := [2][]byte{}
	for s := range 2 {
		plane := make([]byte, len(px))
		for i, v := range px {
			plane[i] = byte(v >> (8 * (1 - s)))
		}
		segs[s] = packBits(plane)
		if len(segs[s])%2 == 1 {
			segs[s] = append(segs[s], 0x80) // a no-op run pads to even length
		}
	}
	hdr := make([]byte, 64)
	binary.LittleEndian.PutUint32(hdr, 2)
	binary.LittleEndian.PutUint32(hdr[4:], 64)
	binary.LittleEndian.PutUint32(hdr[8:], uint32(64+len(segs[0])))
	return append(append(hdr, segs[0]...), segs[1]...)
}

// packBits is the PackBits encoding of b: runs of 3 or more as replicate runs, the rest as
// literal runs.
func packBits(b []byte) []byte {
	var out []byte
	for i := 0; i < len(b); {
		run := 1
		for i+run < len(b) && run < 128 && b[i+run] == b[i] {
			run++
		}
		if run >= 3 {
			out = append(out, byte(int8(1-run)), b[i])
			i += run
			continue
		}
		lit := 1
		for i+lit < len(b) && lit < 128 && !(i+lit+2 < len(b) && b[i+lit] == b[i+lit+1] && b[i+lit] == b[i+lit+2]) {
			lit++
		}
		out = append(out, byte(lit-1))
		out = append(out, b[i:i+lit]...)
		i += lit
	}
	return out
}
