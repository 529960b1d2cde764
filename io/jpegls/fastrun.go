package jpegls

import "fmt"

// runMode decodes, from cur[x], a run of samples equal to Ra (T.87 A.7.1.2) and, where it
// ends before the row does, the run interruption sample (A.7.2); it returns how many
// samples it decoded.
func (f *fastDecoder) runMode(x, ra int) (int, error) {
	left := f.w + 1 - x
	n := 0
	for f.br.bit() == 1 {
		// A 1: 2^J[RUNindex] samples, or the rest of the row where fewer remain.
		rg := 1 << jTable[f.runIndex]
		m := min(rg, left-n)
		fill(f.cur[x+n:x+n+m], int32(ra))
		n += m
		if m == rg && f.runIndex < 31 {
			f.runIndex++
		}
		if n == left {
			return n, nil
		}
	}
	// A 0: the rest of the run in J[RUNindex] bits, then the interruption sample.
	cnt := f.br.read(uint(jTable[f.runIndex]))
	if n+cnt > left {
		return 0, fmt.Errorf("%w: a run of %d past the row's end", ErrCorrupt, n+cnt)
	}
	fill(f.cur[x+n:x+n+cnt], int32(ra))
	n += cnt
	if n == left {
		return n, nil
	}
	v, err := f.interruption(ra, int(f.prev[x+n]))
	if err != nil {
		return 0, err
	}
	f.cur[x+n] = int32(v)
	return n + 1, nil
}

func fill(s []int32, v int32) {
	for i := range s {
		s[i] = v
	}
}

// interruption decodes a run interruption sample (T.87 A.7.2): RItype 1 where
// |Ra-Rb| <= NEAR (predicted by Ra), else 0 (predicted by Rb, SIGN -1 where Ra > Rb);
// k the least with N*2^k >= A (+ N/2 for RItype 1); the code limited to LIMIT-J[RUNindex]-1.
func (f *fastDecoder) interruption(ra, rb int) (int, error) {
	c := &f.c
	ritype, px, sign := 0, rb, 1
	if abs(ra-rb) <= c.near {
		ritype, px = 1, ra
	} else if ra > rb {
		sign = -1
	}
	ctx := &f.run[ritype]
	k := golombK(ctx.n, ctx.a+ritype*(ctx.n>>1))
	em, ok := f.br.golomb(k, c.limit-jTable[f.runIndex]-1, c.qbpp)
	if !ok {
		return 0, fmt.Errorf("%w: a Golomb code of more than %d zeros", ErrCorrupt, c.limit-jTable[f.runIndex]-1-c.qbpp-1)
	}
	if em > c.maxMErr {
		return 0, fmt.Errorf("%w: mapped error %d for RANGE %d", ErrCorrupt, em, c.rng)
	}
	// EMErrval + RItype = 2*|Errval| - map; Errval < 0 where map equals
	// (k != 0 or 2*Nn >= N).
	t := em + ritype
	mapped := t & 1
	e := (t + mapped) >> 1
	if (k != 0 || 2*ctx.nn >= ctx.n) == (mapped == 1) {
		e = -e
	}
	if e < 0 {
		ctx.nn++
	}
	ctx.a += (em + 1 - ritype) >> 1
	if ctx.n == c.reset {
		ctx.a >>= 1
		ctx.n >>= 1
		ctx.nn >>= 1
	}
	ctx.n++
	if f.runIndex > 0 {
		f.runIndex--
	}
	return reconstruct(c, px, sign*e), nil
}
