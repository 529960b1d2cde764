package jpegls

import "fmt"

// runMode decodes a run of samples equal to Ra from (x, y) (A.7.1.2) and, where it ends
// before the end of the row, the run interruption sample (A.7.2); it returns how many
// samples it decoded.
func (r *refDecoder) runMode(x, y, ra int) (int, error) {
	left := r.w - x
	n := 0
	for {
		bit, err := r.in.bit()
		if err != nil {
			return 0, err
		}
		if bit == 0 {
			break
		}
		// A 1: a run of 2^J[RUNindex] samples, or the rest of the row where fewer remain.
		rg := 1 << jTable[r.runIndex]
		m := min(rg, left-n)
		for range m {
			r.put(x+n, y, ra)
			n++
		}
		if m == rg && r.runIndex < 31 {
			r.runIndex++
		}
		if n == left {
			return n, nil
		}
	}
	// A 0: the run's remaining length in J[RUNindex] bits, then the interruption sample.
	cnt, err := r.in.bits(jTable[r.runIndex])
	if err != nil {
		return 0, err
	}
	if n+cnt > left {
		return 0, fmt.Errorf("%w: column %d: a run of %d past the row's end", ErrCorrupt, x, n+cnt)
	}
	for range cnt {
		r.put(x+n, y, ra)
		n++
	}
	if n == left {
		return n, nil // as CharLS accepts: a run that ends at the row's end after a 0 bit
	}
	if err := r.interruption(x+n, y, ra); err != nil {
		return 0, err
	}
	return n + 1, nil
}

// interruption decodes the run interruption sample at (x, y) (A.7.2).
func (r *refDecoder) interruption(x, y, ra int) error {
	c := r.c
	rb := r.get(x, y-1)
	// A.7.2.1: RItype 1 where |Ra-Rb| <= NEAR, predicted by Ra; else predicted by Rb, with
	// SIGN -1 where Ra > Rb.
	ritype, px, sign := 0, rb, 1
	if abs(ra-rb) <= c.near {
		ritype, px = 1, ra
	} else if ra > rb {
		sign = -1
	}
	Q := runContext0 + ritype
	// A.7.2.3: TEMP = A[Q] (+ N[Q]/2 for RItype 1); k is the least k with N[Q]*2^k >= TEMP.
	temp := r.A[Q]
	if ritype == 1 {
		temp += r.N[Q] >> 1
	}
	k := 0
	for r.N[Q]<<k < temp {
		k++
	}
	em, err := r.golomb(k, c.limit-jTable[r.runIndex]-1)
	if err != nil {
		return fmt.Errorf("column %d: %w", x, err)
	}
	// A.7.2.4 inverted: EMErrval = 2*|Errval| - RItype - map, where map is 1 for
	// Errval > 0 with k = 0 and 2*Nn[Q] < N[Q], or for Errval < 0 otherwise.
	t := em + ritype
	mapped := t % 2
	errval := (t + mapped) / 2
	negMap := 0
	if k != 0 || 2*r.Nn[Q] >= r.N[Q] {
		negMap = 1
	}
	if mapped == negMap {
		errval = -errval
	}
	// A.7.2.5: update A, N, Nn of the run interruption context.
	if errval < 0 {
		r.Nn[Q]++
	}
	r.A[Q] += (em + 1 - ritype) >> 1
	if r.N[Q] == c.reset {
		r.A[Q] >>= 1
		r.N[Q] >>= 1
		r.Nn[Q] >>= 1
	}
	r.N[Q]++
	r.put(x, y, reconstruct(&r.c, px, sign*errval))
	if r.runIndex > 0 {
		r.runIndex--
	}
	return nil
}

// golomb reads a limited-length Golomb code of order k (A.5.3 and A.6.1's LIMIT):
// q zeros and a 1, then q < LIMIT-qbpp-1: MErrval = q*2^k + the next k bits;
// q = LIMIT-qbpp-1: MErrval = the next qbpp bits + 1.
func (r *refDecoder) golomb(k, limit int) (int, error) {
	c := r.c
	escape := limit - c.qbpp - 1
	q := 0
	for {
		bit, err := r.in.bit()
		if err != nil {
			return 0, err
		}
		if bit == 1 {
			break
		}
		if q++; q > escape {
			return 0, fmt.Errorf("%w: a Golomb code of more than %d zeros", ErrCorrupt, escape)
		}
	}
	var v int
	if q < escape {
		low, err := r.in.bits(k)
		if err != nil {
			return 0, err
		}
		v = q<<k + low
	} else {
		low, err := r.in.bits(c.qbpp)
		if err != nil {
			return 0, err
		}
		v = low + 1
	}
	if v > c.maxMErr {
		return 0, fmt.Errorf("%w: mapped error %d for RANGE %d", ErrCorrupt, v, c.rng)
	}
	return v, nil
}

// refBits reads the entropy-coded data one bit at a time, most significant bit first; a
// byte after 0xFF gives only its low 7 bits (its high bit is the stuffed 0 of T.87 A.1).
type refBits struct {
	data []byte
	pos  int  // the next byte
	cur  byte // the byte being read
	left uint // its bits not yet read
}

func (b *refBits) bit() (int, error) {
	if b.left == 0 {
		if b.pos >= len(b.data) {
			return 0, errNeedBits
		}
		b.cur, b.left = b.data[b.pos], 8
		if b.pos > 0 && b.data[b.pos-1] == 0xFF {
			b.left = 7
		}
		b.pos++
	}
	b.left--
	return int(b.cur>>b.left) & 1, nil
}

// bits reads n bits as an unsigned number.
func (b *refBits) bits(n int) (int, error) {
	v := 0
	for range n {
		bit, err := b.bit()
		if err != nil {
			return 0, err
		}
		v = v<<1 | bit
	}
	return v, nil
}
