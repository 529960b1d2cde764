package jpegls

import (
	"encoding/binary"
	"fmt"
)

// decodeReference is Decode through refDecoder, the plain transcription of T.87 that the
// fast path is tested against.
func decodeReference(dst, src []byte, width, height, sampleBytes int) error {
	h, err := prepare(dst, src, width, height, sampleBytes)
	if err != nil {
		return err
	}
	r := &refDecoder{c: newCoding(h.Info), dst: dst, w: width, sb: sampleBytes}
	return intervals(src, &h, r.interval)
}

// refDecoder decodes as T.87 Annex A writes it, for clarity over speed: T.87's variables
// (A, B, C, N, Nn, RUNindex) in arrays indexed by context, one bit read at a time, and the
// neighbours Ra, Rb, Rc, Rd read back from the samples already in dst.
type refDecoder struct {
	c          coding
	dst        []byte
	w, sb, y0  int
	A, B, C, N [regularContexts + 2]int
	Nn         [regularContexts + 2]int
	runIndex   int
	in         refBits
}

// interval decodes rows y0..y1-1 of one restart interval (the whole scan without DRI).
func (r *refDecoder) interval(data []byte, y0, y1 int) error {
	// A.2.1: initialise the context variables and RUNindex at the start of each interval.
	for q := range r.A {
		r.A[q], r.B[q], r.C[q], r.N[q], r.Nn[q] = r.c.initA, 0, 0, 1, 0
	}
	r.runIndex, r.y0, r.in = 0, y0, refBits{data: data}
	for y := y0; y < y1; y++ {
		for x := 0; x < r.w; {
			n, err := r.sample(x, y)
			if err != nil {
				return fmt.Errorf("row %d: %w", y, err)
			}
			x += n
		}
	}
	return nil
}

// get is the reconstructed sample at (x, y) with T.87's edge rules: rows above the interval
// are 0; left of a row's first sample is the sample above it (so Ra = Rb there, and Rc is
// the first sample two rows up); right of a row's last sample is that sample (Rd = Rb).
func (r *refDecoder) get(x, y int) int {
	if x < 0 {
		x, y = 0, y-1
	}
	if y < r.y0 {
		return 0
	}
	x = min(x, r.w-1)
	if r.sb == 1 {
		return int(r.dst[y*r.w+x])
	}
	return int(binary.NativeEndian.Uint16(r.dst[2*(y*r.w+x):]))
}

func (r *refDecoder) put(x, y, v int) {
	if r.sb == 1 {
		r.dst[y*r.w+x] = byte(v)
		return
	}
	binary.NativeEndian.PutUint16(r.dst[2*(y*r.w+x):], uint16(v))
}

// sample decodes the sample at (x, y), or a run from it, and returns how many it decoded.
func (r *refDecoder) sample(x, y int) (int, error) {
	ra, rb, rc, rd := r.get(x-1, y), r.get(x, y-1), r.get(x-1, y-1), r.get(x+1, y-1)
	// A.3.1: the local gradients, quantised per A.3.3.
	q1, q2, q3 := r.quantize(rd-rb), r.quantize(rb-rc), r.quantize(rc-ra)
	if q1 == 0 && q2 == 0 && q3 == 0 {
		return r.runMode(x, y, ra)
	}
	return 1, r.regular(x, y, [3]int{q1, q2, q3}, ra, rb, rc)
}

// quantize is A.3.3's gradient quantisation of Di to -4..4:
//
//	Di <= -T3: -4, <= -T2: -3, <= -T1: -2, < -NEAR: -1, <= NEAR: 0, < T1: 1, < T2: 2, < T3: 3, else 4.
func (r *refDecoder) quantize(d int) int {
	c := r.c
	switch {
	case d <= -c.t3:
		return -4
	case d <= -c.t2:
		return -3
	case d <= -c.t1:
		return -2
	case d < -c.near:
		return -1
	case d <= c.near:
		return 0
	case d < c.t1:
		return 1
	case d < c.t2:
		return 2
	case d < c.t3:
		return 3
	}
	return 4
}

// regular decodes one sample in regular mode (A.3.4 to A.6).
func (r *refDecoder) regular(x, y int, q [3]int, ra, rb, rc int) error {
	c := r.c
	// A.3.4: merge contexts of opposite sign; SIGN is -1 where the first nonzero Qi is negative.
	sign := 1
	if q[0] < 0 || q[0] == 0 && (q[1] < 0 || q[1] == 0 && q[2] < 0) {
		sign, q = -1, [3]int{-q[0], -q[1], -q[2]}
	}
	Q := 81*q[0] + 9*q[1] + q[2]
	// A.4.1: the edge-detecting predictor; A.4.2: its correction by C[Q], clamped.
	var px int
	switch {
	case rc >= max(ra, rb):
		px = min(ra, rb)
	case rc <= min(ra, rb):
		px = max(ra, rb)
	default:
		px = ra + rb - rc
	}
	px = min(max(px+sign*r.C[Q], 0), c.maxval)
	// A.5.1 (code segment A.10): k is the least k with N[Q]*2^k >= A[Q].
	k := 0
	for r.N[Q]<<k < r.A[Q] {
		k++
	}
	merr, err := r.golomb(k, c.limit)
	if err != nil {
		return fmt.Errorf("column %d: %w", x, err)
	}
	// A.5.2 inverted: MErrval = 2*Errval (Errval >= 0) or -2*Errval-1, except for NEAR = 0,
	// k = 0 and 2*B[Q] <= -N[Q], where it is 2*Errval+1 or -2*(Errval+1).
	var errval int
	if c.near == 0 && k == 0 && 2*r.B[Q] <= -r.N[Q] {
		if merr%2 == 1 {
			errval = (merr - 1) / 2
		} else {
			errval = -merr/2 - 1
		}
	} else if merr%2 == 0 {
		errval = merr / 2
	} else {
		errval = -(merr + 1) / 2
	}
	r.update(Q, errval)
	r.put(x, y, reconstruct(&r.c, px, sign*errval))
	return nil
}

// update is A.6.1's update of A, B, N (code segment A.12) and A.6.2's bias correction of
// B and C (code segment A.13).
func (r *refDecoder) update(Q, errval int) {
	r.B[Q] += errval * r.c.step
	r.A[Q] += abs(errval)
	if r.N[Q] == r.c.reset {
		r.A[Q] >>= 1
		r.B[Q] >>= 1
		r.N[Q] >>= 1
	}
	r.N[Q]++
	if r.B[Q] <= -r.N[Q] {
		r.B[Q] += r.N[Q]
		if r.C[Q] > -128 {
			r.C[Q]--
		}
		if r.B[Q] <= -r.N[Q] {
			r.B[Q] = -r.N[Q] + 1
		}
	} else if r.B[Q] > 0 {
		r.B[Q] -= r.N[Q]
		if r.C[Q] < 127 {
			r.C[Q]++
		}
		if r.B[Q] > 0 {
			r.B[Q] = 0
		}
	}
}

func abs(v int) int {
	if v < 0 {
		return -v
	}
	return v
}
