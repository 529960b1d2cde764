package jpegls

import "encoding/binary"

// encOpts are the choices of the test encoder: NEAR, the LSE's parameters (written where
// any is set, 0 leaving one to its default), lines per restart interval (0: no DRI).
type encOpts struct {
	precision, near           int
	maxval, t1, t2, t3, reset int
	restart                   int
	app, fill, padEOI         bool // an APP1 and a COM segment; fill bytes before markers; dcmtk's FF before EOI
	lseFirst                  bool // the LSE before SOF, with 0 for the parameters left to default
}

// encode is a T.87 encoder of one component (Annex A's encoding procedures), for the
// streams dcmcjpls cannot write (restart intervals, any LSE); dcmdjpls judges its output.
func encode(px []int, w, h int, o encOpts) []byte {
	var out []byte
	marker := func(code byte, body []byte) {
		if o.fill && code != markerSOI {
			out = append(out, 0xFF, 0xFF)
		}
		out = append(out, 0xFF, code)
		if body != nil {
			out = binary.BigEndian.AppendUint16(out, uint16(len(body)+2))
			out = append(out, body...)
		}
	}
	marker(markerSOI, nil)
	if o.app {
		marker(0xE1, []byte("voxpipe test"))
		marker(markerCOM, []byte{0xFF, 0xD9, 0})
	}
	h0 := header{Info: Info{Width: w, Height: h, Components: 1, Precision: o.precision, Near: o.near}}
	h0.preset = [5]int{o.maxval, o.t1, o.t2, o.t3, o.reset}
	if err := h0.complete(); err != nil {
		panic(err)
	}
	lse := func(v ...int) {
		b := []byte{1}
		for _, v := range v {
			b = binary.BigEndian.AppendUint16(b, uint16(v))
		}
		marker(markerLSE, b)
	}
	given := o.maxval|o.t1|o.t2|o.t3|o.reset != 0
	if given && o.lseFirst {
		lse(o.maxval, o.t1, o.t2, o.t3, o.reset) // as given, 0 for a default
	}
	marker(markerSOF55, []byte{byte(o.precision), byte(h >> 8), byte(h), byte(w >> 8), byte(w), 1, 1, 0x11, 0})
	if given && !o.lseFirst {
		lse(h0.MaxVal, h0.T1, h0.T2, h0.T3, h0.Reset) // where CharLS writes it, every value given
	}
	if o.restart > 0 {
		marker(markerDRI, []byte{byte(o.restart >> 8), byte(o.restart)})
	}
	marker(markerSOS, []byte{1, 1, 0, byte(o.near), 0, 0})
	e := &encoder{c: newCoding(h0.Info), w: w, px: px}
	lines := o.restart
	if lines == 0 {
		lines = h
	}
	for y0, i := 0, 0; y0 < h; y0, i = y0+lines, i+1 {
		if i > 0 {
			marker(markerRST0+byte((i-1)%8), nil)
		}
		out = append(out, e.interval(y0, min(y0+lines, h))...)
	}
	if o.padEOI {
		out = append(out, 0xFF)
	}
	marker(markerEOI, nil)
	return out
}

// encoder holds the coder's state, the decoder's mirror.
type encoder struct {
	c         coding
	w         int
	px        []int
	ctx       [regularContexts]regularCtx
	run       [2]runCtx
	runIndex  int
	prev, cur []int32
	bw        bitWriter
}

// interval encodes rows y0..y1-1 from the initial state.
func (e *encoder) interval(y0, y1 int) []byte {
	for i := range e.ctx {
		e.ctx[i] = regularCtx{a: e.c.initA, n: 1}
	}
	e.run = [2]runCtx{{a: e.c.initA, n: 1}, {a: e.c.initA, n: 1}}
	e.runIndex, e.bw = 0, bitWriter{}
	e.prev, e.cur = make([]int32, e.w+2), make([]int32, e.w+2)
	r := &refDecoder{c: e.c}
	for y := y0; y < y1; y++ {
		in := e.px[y*e.w : (y+1)*e.w]
		e.cur[0], e.prev[e.w+1] = e.prev[1], e.prev[e.w]
		for x := 1; x <= e.w; {
			ra, rb, rc, rd := int(e.cur[x-1]), int(e.prev[x]), int(e.prev[x-1]), int(e.prev[x+1])
			q1, q2, q3 := r.quantize(rd-rb), r.quantize(rb-rc), r.quantize(rc-ra)
			if q1 == 0 && q2 == 0 && q3 == 0 {
				x += e.runMode(in, x, ra)
				continue
			}
			e.cur[x] = int32(e.regular(81*q1+9*q2+q3, in[x-1], ra, rb, rc))
			x++
		}
		e.prev, e.cur = e.cur, e.prev
	}
	return e.bw.flush()
}

// quantErr is A.4.4's quantisation of a prediction error for NEAR > 0.
func (e *encoder) quantErr(errval int) int {
	if errval > 0 {
		return (errval + e.c.near) / e.c.step
	}
	return -(e.c.near - errval) / e.c.step
}

// reduce is the modulo reduction of Errval into -RANGE/2..RANGE/2 (A.4.5).
func (e *encoder) reduce(errval int) int {
	if errval < 0 {
		errval += e.c.rng
	}
	if errval >= (e.c.rng+1)/2 {
		errval -= e.c.rng
	}
	return errval
}

// regular encodes sample ix in regular mode and returns its reconstruction.
func (e *encoder) regular(qs, ix, ra, rb, rc int) int {
	sign := 1
	if qs < 0 {
		sign, qs = -1, -qs
	}
	ctx := &e.ctx[qs]
	px := ra + rb - rc
	if rc >= max(ra, rb) {
		px = min(ra, rb)
	} else if rc <= min(ra, rb) {
		px = max(ra, rb)
	}
	px = min(max(px+sign*ctx.c, 0), e.c.maxval)
	errval := e.quantErr(sign * (ix - px))
	rx := reconstruct(&e.c, px, sign*errval)
	errval = e.reduce(errval)
	k := golombK(ctx.n, ctx.a)
	var merr int
	switch {
	case e.c.near == 0 && k == 0 && 2*ctx.b <= -ctx.n && errval >= 0:
		merr = 2*errval + 1
	case e.c.near == 0 && k == 0 && 2*ctx.b <= -ctx.n:
		merr = -2 * (errval + 1)
	case errval >= 0:
		merr = 2 * errval
	default:
		merr = -2*errval - 1
	}
	e.bw.golomb(merr, k, e.c.limit, e.c.qbpp)
	(&fastDecoder{c: e.c}).update(ctx, errval)
	return rx
}
