package jpeg

import "fmt"

// lookupBits is how many bits the fast path's table decodes at once; longer codes go through
// the canonical limits as the reference does.
const lookupBits = 9

// huffTable is a Huffman table ready to decode: the reference's MAXCODE, MINCODE and VALPTR
// (T.81 F.2.2.3, Figure F.15), and the fast path's look-up table.
type huffTable struct {
	maxcode [17]int32 // the largest code of each length; -1 where there is none
	mincode [17]int32
	valptr  [17]int32
	vals    [256]byte
	// lookup, by the next lookupBits bits: a code of length <= lookupBits that they start
	// with, as length<<8 | value; 0 where the code is longer (or there is none).
	lookup [1 << lookupBits]uint16
}

// build makes the decoding tables of s (which parseDHT has checked: its codes fit).
func (t *huffTable) build(s *huffSpec) {
	t.vals = s.vals
	t.lookup = [1 << lookupBits]uint16{}
	code, k := int32(0), int32(0)
	for l := 1; l <= 16; l++ {
		n := int32(s.counts[l])
		t.valptr[l], t.mincode[l], t.maxcode[l] = k, code, code+n-1
		if n == 0 {
			t.maxcode[l] = -1
		}
		for i := int32(0); i < n && l <= lookupBits; i++ {
			c := code + i
			first := c << (lookupBits - l)
			for j := range int32(1) << (lookupBits - l) {
				t.lookup[first+j] = uint16(l)<<8 | uint16(s.vals[k+i])
			}
		}
		k += n
		code = (code + n) << 1
	}
}

// tables builds the decoding tables of a scan's table selections; a missing table is an error.
func tables(specs *[4]huffSpec, sel int, class string) (*huffTable, error) {
	if sel > 3 || !specs[sel].defined {
		return nil, fmt.Errorf("%w: the scan uses %s Huffman table %d, which is not defined", ErrCorrupt, class, sel)
	}
	t := &huffTable{}
	t.build(&specs[sel])
	return t, nil
}

// extend turns the s-bit value v into the difference it codes (T.81 F.2.2.1, EXTEND):
// v < 2^(s-1) ? v - 2^s + 1 : v.
// It has no branch: the sign of the difference is as good as random.
func extend(v int32, s uint) int32 {
	return v + (v-1<<(s-1))>>31&(1-1<<s)
}
