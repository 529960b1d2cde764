package jpegls

// runMode encodes the run from cur[x] (A.7.1.1) and its interruption sample; it returns how
// many samples it coded.
func (e *encoder) runMode(in []int, x, ra int) int {
	n := 0
	for x+n <= e.w && abs(in[x+n-1]-ra) <= e.c.near {
		e.cur[x+n] = int32(ra)
		n++
	}
	cnt := n
	for cnt >= 1<<jTable[e.runIndex] {
		e.bw.put(1, 1)
		cnt -= 1 << jTable[e.runIndex]
		if e.runIndex < 31 {
			e.runIndex++
		}
	}
	if x+n > e.w {
		if cnt > 0 {
			e.bw.put(1, 1)
		}
		return n
	}
	e.bw.put(0, 1)
	e.bw.put(cnt, jTable[e.runIndex])
	e.cur[x+n] = int32(e.interruption(in[x+n-1], ra, int(e.prev[x+n])))
	return n + 1
}

// interruption encodes a run interruption sample (A.7.2) and returns its reconstruction.
func (e *encoder) interruption(ix, ra, rb int) int {
	ritype, px, sign := 0, rb, 1
	if abs(ra-rb) <= e.c.near {
		ritype, px = 1, ra
	} else if ra > rb {
		sign = -1
	}
	errval := e.quantErr(sign * (ix - px))
	rx := reconstruct(&e.c, px, sign*errval)
	errval = e.reduce(errval)
	ctx := &e.run[ritype]
	k := golombK(ctx.n, ctx.a+ritype*(ctx.n>>1))
	mapped := 0
	if k == 0 && errval > 0 && 2*ctx.nn < ctx.n || errval < 0 && (2*ctx.nn >= ctx.n || k != 0) {
		mapped = 1
	}
	em := 2*abs(errval) - ritype - mapped
	e.bw.golomb(em, k, e.c.limit-jTable[e.runIndex]-1, e.c.qbpp)
	if errval < 0 {
		ctx.nn++
	}
	ctx.a += (em + 1 - ritype) >> 1
	if ctx.n == e.c.reset {
		ctx.a, ctx.n, ctx.nn = ctx.a>>1, ctx.n>>1, ctx.nn>>1
	}
	ctx.n++
	if e.runIndex > 0 {
		e.runIndex--
	}
	return rx
}

// bitWriter writes bits most significant first, a 0 bit stuffed after each 0xFF byte.
type bitWriter struct {
	out  []byte
	cur  int // bits of the byte being filled
	n    int // how many
	room int // bits the byte holds: 7 after 0xFF, else 8
}

func (b *bitWriter) put(v, n int) {
	for i := n - 1; i >= 0; i-- {
		if b.room == 0 {
			b.room = 8
		}
		b.cur = b.cur<<1 | v>>i&1
		b.n++
		if b.n == b.room {
			b.out = append(b.out, byte(b.cur))
			b.room = 8
			if b.cur == 0xFF {
				b.room = 7
			}
			b.cur, b.n = 0, 0
		}
	}
}

// golomb writes a limited-length Golomb code of order k (A.5.3).
func (b *bitWriter) golomb(v, k, limit, qbpp int) {
	escape := limit - qbpp - 1
	if q := v >> k; q < escape {
		b.put(0, q)
		b.put(1, 1)
		b.put(v, k)
		return
	}
	b.put(0, escape)
	b.put(1, 1)
	b.put(v-1, qbpp)
}

// flush pads the last byte with 0 bits (and a 0 byte after a final 0xFF) and returns the data.
func (b *bitWriter) flush() []byte {
	if b.n > 0 || b.room == 7 {
		b.put(0, b.room-b.n)
	}
	return b.out
}
