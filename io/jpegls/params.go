package jpegls

import "math/bits"

// Info is what the markers up to the first scan's header declare, with T.87's defaults
// filled in where the stream leaves a parameter out.
type Info struct {
	Width, Height, Components, Precision, Near, Interleave int
	MaxVal, T1, T2, T3, Reset                              int
}

// Default thresholds for MAXVAL 255, NEAR 0 (T.87 Table C.3) and the default RESET.
const (
	basicT1      = 3
	basicT2      = 7
	basicT3      = 21
	defaultReset = 64
)

// clampT is T.87 C.2.4.1.1's CLAMP(i, j, MAXVAL): j where i > MAXVAL or i < j, else i.
func clampT(i, j, maxval int) int {
	if i > maxval || i < j {
		return j
	}
	return i
}

// defaultThresholds computes T1, T2, T3 per T.87 C.2.4.1.1:
//
//	MAXVAL >= 128: FACTOR = (min(MAXVAL,4095)+128)/256,
//	  T1 = CLAMP(FACTOR*(BASIC_T1-2)+2+3*NEAR, NEAR+1, MAXVAL),
//	  T2 = CLAMP(FACTOR*(BASIC_T2-3)+3+5*NEAR, T1, MAXVAL),
//	  T3 = CLAMP(FACTOR*(BASIC_T3-4)+4+7*NEAR, T2, MAXVAL);
//	else: FACTOR = 256/(MAXVAL+1),
//	  T1 = CLAMP(max(2, BASIC_T1/FACTOR+3*NEAR), NEAR+1, MAXVAL), and so on with 3 and 4.
func defaultThresholds(maxval, near int) (t1, t2, t3 int) {
	if maxval >= 128 {
		f := (min(maxval, 4095) + 128) / 256
		t1 = clampT(f*(basicT1-2)+2+3*near, near+1, maxval)
		t2 = clampT(f*(basicT2-3)+3+5*near, t1, maxval)
		t3 = clampT(f*(basicT3-4)+4+7*near, t2, maxval)
		return t1, t2, t3
	}
	f := 256 / (maxval + 1)
	t1 = clampT(max(2, basicT1/f+3*near), near+1, maxval)
	t2 = clampT(max(3, basicT2/f+5*near), t1, maxval)
	t3 = clampT(max(4, basicT3/f+7*near), t2, maxval)
	return t1, t2, t3
}

// coding holds the values a scan is decoded with, derived per T.87 A.2.1:
//
//	RANGE = (MAXVAL+2*NEAR)/(2*NEAR+1) + 1, qbpp = ceil(log2 RANGE),
//	bpp = max(2, ceil(log2(MAXVAL+1))), LIMIT = 2*(bpp + max(8, bpp)).
type coding struct {
	maxval, near, t1, t2, t3, reset int
	rng, qbpp, limit                int
	step                            int // 2*NEAR+1, the quantisation step
	maxMErr                         int // the largest mapped error accepted (2*RANGE)
	initA                           int // A's initial value: max(2, (RANGE+32)/64)
}

func newCoding(in Info) coding {
	c := coding{maxval: in.MaxVal, near: in.Near, t1: in.T1, t2: in.T2, t3: in.T3, reset: in.Reset}
	c.step = 2*c.near + 1
	c.rng = (c.maxval+2*c.near)/c.step + 1
	c.qbpp = bits.Len(uint(c.rng - 1))
	bpp := max(2, bits.Len(uint(c.maxval)))
	c.limit = 2 * (bpp + max(8, bpp))
	c.maxMErr = 2 * c.rng
	c.initA = max(2, (c.rng+32)/64)
	return c
}

// jTable is T.87's J: the order of the run-length code for each RUNindex (A.7.1.1).
var jTable = [32]int{0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3,
	4, 4, 5, 5, 6, 6, 7, 7, 8, 9, 10, 11, 12, 13, 14, 15}

// Context indices beyond the 365 regular ones: the two run-interruption contexts.
const (
	regularContexts = 365
	runContext0     = 365 // RItype 0
)
