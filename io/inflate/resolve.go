package inflate

import "fmt"

// place writes [lo, hi) of a chunk's output decoded right after dst[:o] (syms, then bytes) to
// dst[o+lo:o+hi]: the symbols resolved, the bytes copied.
func place(dst []byte, o int, syms []uint16, bytes []byte, lo, hi int) error {
	n := len(syms)
	if lo < min(hi, n) {
		if err := resolve(dst, o, syms, lo, min(hi, n)); err != nil {
			return err
		}
	}
	if from := max(lo, n); from < hi {
		copy(dst[o+from:o+hi], bytes[from-n:hi-n])
	}
	return nil
}

// resolve writes syms[lo:hi], decoded right after dst[:o], to dst[o+lo:o+hi]: bytes as they
// are, markers as the byte of the 32 KiB window before o that they stand for.
func resolve(dst []byte, o int, syms []uint16, lo, hi int) error {
	out, in := dst[o+lo:o+hi], syms[lo:hi]
	window := o - windowSize
	if window >= 0 {
		// Every symbol through one table, literals to themselves and markers to the window's
		// bytes: no branch per symbol, where markers and literals mix (GNU gzip's files keep
		// markers to a chunk's end in runs of background copied from themselves).
		var lut [1 << 16]byte // indexed by any uint16; markers end at windowMarker+windowSize
		for i := range windowMarker {
			lut[i] = byte(i)
		}
		copy(lut[windowMarker:], dst[window:o])
		for i := 0; i < len(in); i += 8 {
			if i+8 <= len(in) {
				v := (*[8]uint16)(in[i:])
				w := (*[8]byte)(out[i:])
				w[0], w[1], w[2], w[3] = lut[v[0]], lut[v[1]], lut[v[2]], lut[v[3]]
				w[4], w[5], w[6], w[7] = lut[v[4]], lut[v[5]], lut[v[6]], lut[v[7]]
				continue
			}
			for k := i; k < len(in); k++ {
				out[k] = lut[in[k]]
			}
		}
		return nil
	}
	for i := 0; i < len(in); i += 8 {
		if i+8 <= len(in) {
			// Past a chunk's first 32 KiB markers are rare: eight bytes at once without them.
			v := (*[8]uint16)(in[i:])
			if v[0]|v[1]|v[2]|v[3]|v[4]|v[5]|v[6]|v[7] < windowMarker {
				w := (*[8]byte)(out[i:])
				w[0], w[1], w[2], w[3] = byte(v[0]), byte(v[1]), byte(v[2]), byte(v[3])
				w[4], w[5], w[6], w[7] = byte(v[4]), byte(v[5]), byte(v[6]), byte(v[7])
				continue
			}
		}
		for k := i; k < min(i+8, len(in)); k++ {
			v := in[k]
			if v < windowMarker {
				out[k] = byte(v)
				continue
			}
			at := window + int(v-windowMarker)
			if at < 0 {
				return fmt.Errorf("%w: a distance reaches before the start of the stream", ErrCorrupt)
			}
			out[k] = dst[at]
		}
	}
	return nil
}
