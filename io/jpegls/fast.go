package jpegls

import (
	"encoding/binary"
	"fmt"
	"math/bits"
)

// regularCtx is one regular-mode context's A, B, C, N (T.87 A.2.1).
type regularCtx struct{ a, b, c, n int }

// runCtx is one run-interruption context's A, N, Nn.
type runCtx struct{ a, n, nn int }

// fastDecoder is the decoder Decode uses: the bits through a 64-bit cache, the gradients
// quantised by table, the samples read from two row buffers that carry T.87's edge samples
// (prev[0] and cur[0] left of the rows, prev[w+1] right), rows written to dst when done.
type fastDecoder struct {
	c         coding
	dst       []byte
	w, sb     int
	ctx       [regularContexts]regularCtx
	run       [2]runCtx
	runIndex  int
	br        bitReader
	qt        []int8 // Q(d) for d in -T3..T3, at d+T3 (|d| >= T3 quantise to ±4)
	prev, cur []int32
}

func newFast(h *header, dst []byte, sb int) *fastDecoder {
	f := &fastDecoder{c: newCoding(h.Info), dst: dst, w: h.Width, sb: sb}
	f.prev = make([]int32, f.w+2)
	f.cur = make([]int32, f.w+2)
	f.qt = quantTable(f.c)
	return f
}

// quantTable tabulates T.87 A.3.3's gradient quantisation over d = -T3..T3:
//
//	d <= -T3: -4, <= -T2: -3, <= -T1: -2, < -NEAR: -1, <= NEAR: 0, < T1: 1, < T2: 2, < T3: 3, else 4.
func quantTable(c coding) []int8 {
	qt := make([]int8, 2*c.t3+1)
	for i := range qt {
		d := i - c.t3
		var q int8
		switch {
		case d <= -c.t3:
			q = -4
		case d <= -c.t2:
			q = -3
		case d <= -c.t1:
			q = -2
		case d < -c.near:
			q = -1
		case d <= c.near:
			q = 0
		case d < c.t1:
			q = 1
		case d < c.t2:
			q = 2
		case d < c.t3:
			q = 3
		default:
			q = 4
		}
		qt[i] = q
	}
	return qt
}

// interval decodes rows y0..y1-1 of one restart interval from T.87 A.2.1's initial state,
// the rows above the interval taken as 0.
func (f *fastDecoder) interval(data []byte, y0, y1 int) error {
	for i := range f.ctx {
		f.ctx[i] = regularCtx{a: f.c.initA, n: 1}
	}
	f.run = [2]runCtx{{a: f.c.initA, n: 1}, {a: f.c.initA, n: 1}}
	f.runIndex = 0
	f.br = newBitReader(data)
	clear(f.prev)
	clear(f.cur)
	for y := y0; y < y1; y++ {
		if err := f.row(); err != nil {
			if f.br.overran() {
				err = errNeedBits
			}
			return fmt.Errorf("row %d: %w", y, err)
		}
		if f.br.overran() {
			return fmt.Errorf("row %d: %w", y, errNeedBits)
		}
		f.put(y)
		f.prev, f.cur = f.cur, f.prev
	}
	return nil
}

// put writes the finished row cur to dst's row y.
func (f *fastDecoder) put(y int) {
	row := f.cur[1 : f.w+1]
	if f.sb == 1 {
		out := f.dst[y*f.w : (y+1)*f.w]
		for i, v := range row {
			out[i] = byte(v)
		}
		return
	}
	out := f.dst[2*y*f.w : 2*(y+1)*f.w]
	for i := range out[:len(out)/2] {
		binary.NativeEndian.PutUint16(out[2*i:2*i+2], uint16(row[i]))
	}
}

// row decodes one row into cur, prev holding the row above.
func (f *fastDecoder) row() error {
	prev, cur, w := f.prev, f.cur, f.w
	cur[0] = prev[1]       // Ra of the first sample is Rb; prev[0] is Rc, set a row earlier
	prev[w+1] = prev[w]    // Rd of the last sample is Rb
	qt, t3 := f.qt, f.c.t3 // the table covers -T3..T3
	for x := 1; x <= w; {
		ra, rb, rc, rd := int(cur[x-1]), int(prev[x]), int(prev[x-1]), int(prev[x+1])
		// Q = 81*Q1 + 9*Q2 + Q3 over D1 = Rd-Rb, D2 = Rb-Rc, D3 = Rc-Ra (T.87 A.3).
		qs := 81*int(qt[min(max(rd-rb, -t3), t3)+t3]) +
			9*int(qt[min(max(rb-rc, -t3), t3)+t3]) +
			int(qt[min(max(rc-ra, -t3), t3)+t3])
		if qs == 0 {
			n, err := f.runMode(x, ra)
			if err != nil {
				return fmt.Errorf("column %d: %w", x-1, err)
			}
			x += n
			continue
		}
		v, err := f.regular(qs, ra, rb, rc)
		if err != nil {
			return fmt.Errorf("column %d: %w", x-1, err)
		}
		cur[x] = int32(v)
		x++
	}
	return nil
}

// golombK is the Golomb parameter of T.87 A.5.1, the least k with N*2^k >= A, from the
// bit lengths: k = max(0, len(A)-len(N)), plus 1 where N*2^k is still below A.
func golombK(n, a int) int {
	k := max(0, bits.Len(uint(a))-bits.Len(uint(n)))
	if n<<k < a {
		k++
	}
	return k
}

// regular decodes one sample in regular mode (T.87 A.3.4 to A.6) in context qs = ±Q.
func (f *fastDecoder) regular(qs, ra, rb, rc int) (int, error) {
	c := &f.c
	sign := 1
	if qs < 0 {
		sign, qs = -1, -qs
	}
	ctx := &f.ctx[qs]
	// MED prediction: min(Ra,Rb) where Rc >= max, max(Ra,Rb) where Rc <= min, else Ra+Rb-Rc;
	// corrected by SIGN*C[Q] and clamped to 0..MAXVAL.
	lo, hi := min(ra, rb), max(ra, rb)
	px := ra + rb - rc
	if rc >= hi {
		px = lo
	} else if rc <= lo {
		px = hi
	}
	px = min(max(px+sign*ctx.c, 0), c.maxval)
	k := golombK(ctx.n, ctx.a)
	merr, ok := f.br.golomb(k, c.limit, c.qbpp)
	if !ok {
		return 0, fmt.Errorf("%w: a Golomb code of more than %d zeros", ErrCorrupt, c.limit-c.qbpp-1)
	}
	if merr > c.maxMErr {
		return 0, fmt.Errorf("%w: mapped error %d for RANGE %d", ErrCorrupt, merr, c.rng)
	}
	// Errval = MErrval/2 (even) or -(MErrval+1)/2 (odd); for NEAR = 0, k = 0 and
	// 2*B[Q] <= -N[Q] the mapping is the other way round: -Errval-1.
	e := merr>>1 ^ -(merr & 1)
	if k == 0 && c.near == 0 && 2*ctx.b <= -ctx.n {
		e = ^e
	}
	f.update(ctx, e)
	if c.near == 0 {
		// Lossless: Rx = (Px + SIGN*Errval) modulo RANGE = MAXVAL+1, in 0..MAXVAL.
		rx := px + sign*e
		if rx < 0 {
			rx += c.rng
		} else if rx > c.maxval {
			rx -= c.rng
		}
		return min(max(rx, 0), c.maxval), nil
	}
	return reconstruct(c, px, sign*e), nil
}

// update is T.87 A.6.1 and A.6.2: A += |Errval|, B += Errval*(2*NEAR+1), A, B, N halved
// when N reaches RESET, N += 1; then B brought into -N+1..0, moving C by one.
func (f *fastDecoder) update(ctx *regularCtx, e int) {
	ctx.b += e * f.c.step
	ctx.a += abs(e)
	if ctx.n == f.c.reset {
		ctx.a >>= 1
		ctx.b >>= 1
		ctx.n >>= 1
	}
	ctx.n++
	if ctx.b <= -ctx.n {
		ctx.b = max(ctx.b+ctx.n, -ctx.n+1)
		ctx.c -= b2i(ctx.c > -128)
	} else if ctx.b > 0 {
		ctx.b = min(ctx.b-ctx.n, 0)
		ctx.c += b2i(ctx.c < 127)
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// reconstruct is T.87 A.8: Rx = Px + Errval*(2*NEAR+1), brought back by RANGE*(2*NEAR+1)
// where below -NEAR or above MAXVAL+NEAR, clamped to 0..MAXVAL.
func reconstruct(c *coding, px, e int) int {
	rx := px + e*c.step
	if rx < -c.near {
		rx += c.rng * c.step
	} else if rx > c.maxval+c.near {
		rx -= c.rng * c.step
	}
	return min(max(rx, 0), c.maxval)
}
