package phantom

import "math"

// Cheap log and exp for the noise and the bias field, where 1e-9 relative error is plenty:
// math.Log and math.Exp were a quarter of the generation time. Plain arithmetic, so they
// give the same bits wherever Go's float64 operations are not fused.

// logUnit returns ln(u) for u in (0, 1].
func logUnit(u float64) float64 {
	// u = m * 2^e with m in [sqrt(1/2), sqrt(2)); ln m = 2 atanh(t), t = (m-1)/(m+1).
	bits := math.Float64bits(u)
	e := int(bits>>52&0x7FF) - 1023
	m := math.Float64frombits(bits&(1<<52-1) | 1023<<52) // [1, 2)
	if m >= math.Sqrt2 {
		m /= 2
		e++
	}
	t := (m - 1) / (m + 1)
	t2 := t * t
	// |t| <= 0.1716: the series' first omitted term, 2 t^13/13, is below 2e-11.
	p := 1 + t2*(1.0/3+t2*(1.0/5+t2*(1.0/7+t2*(1.0/9+t2*(1.0/11)))))
	return float64(e)*math.Ln2 + 2*t*p
}

// expSmall returns e^x for |x| <= 1 (the log-bias field stays well inside).
func expSmall(x float64) float64 {
	// e^x = (e^(x/4))^4; Taylor to degree 8 at |x/4| <= 1/4 errs below 1e-11.
	y := x / 4
	p := 1 + y*(1+y*(1.0/2+y*(1.0/6+y*(1.0/24+y*(1.0/120+y*(1.0/720+y*(1.0/5040+y*(1.0/40320))))))))
	p *= p
	return p * p
}
