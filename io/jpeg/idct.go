package jpeg

// The inverse DCT of IJG libjpeg's jidctint.c (jpeg_idct_islow), which dcmtk's dcmdjpeg uses
// (its IJG 6b builds for 8 and 12 bits, JDCT_ISLOW): the Loeffler-Ligtenberg-Moschytz
// algorithm in integers, constants scaled by 2^13 (CONST_BITS), the first pass's outputs by
// 2^PASS1_BITS (2 for 8-bit samples, 1 for 12-bit), the results range-limited as libjpeg's
// sample_range_limit table does. The arithmetic follows libjpeg's to the bit: 64-bit products
// (INT32 is a C long on LP64), the work array of 32-bit ints between the passes.

const constBits = 13

// The constants FIX(x) = round(x * 2^13).
const (
	fix0298631336 = 2446
	fix0390180644 = 3196
	fix0541196100 = 4433
	fix0765366865 = 6270
	fix0899976223 = 7373
	fix1175875602 = 9633
	fix1501321110 = 12299
	fix1847759065 = 15137
	fix1961570560 = 16069
	fix2053119869 = 16819
	fix2562915447 = 20995
	fix3072711026 = 25172
)

// idct is jpeg_idct_islow for one precision and quantization table.
type idct struct {
	q         *[64]uint16
	pass1     uint  // PASS1_BITS
	maxSample int64 // MAXJSAMPLE: 2^P - 1
	center    int64 // CENTERJSAMPLE: 2^(P-1)
}

func newIDCT(precision int, q *[64]uint16) *idct {
	t := &idct{q: q, pass1: 2, maxSample: 255, center: 128}
	if precision == 12 {
		t.pass1, t.maxSample, t.center = 1, 4095, 2048
	}
	return t
}

// descale is DESCALE(x, n): x / 2^n rounded, (x + 2^(n-1)) >> n.
func descale(x int64, n uint) int64 { return (x + 1<<(n-1)) >> n }

// limit is libjpeg's post-IDCT range limit: x masked to RANGE_MASK (4*(MAXJSAMPLE+1) - 1)
// and read as a signed value, shifted by CENTERJSAMPLE and clamped to [0, MAXJSAMPLE].
func (t *idct) limit(x int64) int32 {
	span := 4 * (t.maxSample + 1)
	x &= span - 1
	if x >= span/2 {
		x -= span
	}
	return int32(min(max(x+t.center, 0), t.maxSample))
}

// butterfly is the 1-D IDCT's common part: from the eight inputs (dequantized, or the work
// array's row) it returns the even part's tmp10-tmp13 and the odd part's tmp0-tmp3, in
// libjpeg's scale (constants times 2^13).
func butterfly(in [8]int64) (even, odd [4]int64) {
	z2, z3 := in[2], in[6]
	z1 := (z2 + z3) * fix0541196100
	tmp2 := z1 + z3*-fix1847759065
	tmp3 := z1 + z2*fix0765366865
	tmp0 := (in[0] + in[4]) << constBits
	tmp1 := (in[0] - in[4]) << constBits
	even = [4]int64{tmp0 + tmp3, tmp1 + tmp2, tmp1 - tmp2, tmp0 - tmp3}

	t0, t1, t2, t3 := in[7], in[5], in[3], in[1]
	z1, z2, z3 = t0+t3, t1+t2, t0+t2
	z4 := t1 + t3
	z5 := (z3 + z4) * fix1175875602
	t0 *= fix0298631336
	t1 *= fix2053119869
	t2 *= fix3072711026
	t3 *= fix1501321110
	z1 *= -fix0899976223
	z2 *= -fix2562915447
	z3 = z3*-fix1961570560 + z5
	z4 = z4*-fix0390180644 + z5
	odd = [4]int64{t0 + z1 + z3, t1 + z2 + z4, t2 + z2 + z3, t3 + z1 + z4}
	return even, odd
}

// transform dequantizes coef and inverse-transforms it into px, samples in [0, 2^P).
func (t *idct) transform(coef *[64]int32, px *[64]int32) {
	var ws [64]int32
	for c := range 8 { // pass 1: columns, into the work array
		if coef[8+c]|coef[16+c]|coef[24+c]|coef[32+c]|coef[40+c]|coef[48+c]|coef[56+c] == 0 {
			dc := int32(int64(coef[c])*int64(t.q[c])) << t.pass1
			for k := range 8 {
				ws[8*k+c] = dc
			}
			continue
		}
		var in [8]int64
		for k := range 8 {
			in[k] = int64(coef[8*k+c]) * int64(t.q[8*k+c])
		}
		even, odd := butterfly(in)
		for k := range 4 {
			ws[8*k+c] = int32(descale(even[k]+odd[3-k], constBits-t.pass1))
			ws[8*(7-k)+c] = int32(descale(even[k]-odd[3-k], constBits-t.pass1))
		}
	}
	for r := range 8 { // pass 2: rows, into the samples
		row := ws[8*r : 8*r+8]
		if row[1]|row[2]|row[3]|row[4]|row[5]|row[6]|row[7] == 0 {
			v := t.limit(descale(int64(row[0]), t.pass1+3))
			for k := range 8 {
				px[8*r+k] = v
			}
			continue
		}
		var in [8]int64
		for k := range 8 {
			in[k] = int64(row[k])
		}
		even, odd := butterfly(in)
		for k := range 4 {
			px[8*r+k] = t.limit(descale(even[k]+odd[3-k], constBits+t.pass1+3))
			px[8*r+7-k] = t.limit(descale(even[k]-odd[3-k], constBits+t.pass1+3))
		}
	}
}
