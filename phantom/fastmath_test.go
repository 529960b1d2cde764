package phantom

import (
	"math"
	"testing"
)

func TestLogUnit(t *testing.T) {
	t.Parallel()
	s := newStream(1, 99)
	worst := 0.0
	for i := range 200000 {
		u := (float64(s.next()>>11) + 0.5) * 0x1p-53
		if i%4 == 0 {
			u = math.Pow(u, 20) // deep into the tail as well
		}
		if i == 0 {
			u = 1
		}
		want := math.Log(u)
		worst = max(worst, math.Abs(logUnit(u)-want)/max(1e-300, math.Abs(want)+1e-3))
	}
	if worst > 1e-9 {
		t.Errorf("logUnit: worst relative error %.3g", worst)
	}
}

func TestExpSmall(t *testing.T) {
	t.Parallel()
	worst := 0.0
	for x := -1.0; x <= 1; x += 1.0 / 4096 {
		worst = max(worst, math.Abs(expSmall(x)-math.Exp(x))/math.Exp(x))
	}
	if worst > 1e-9 {
		t.Errorf("expSmall: worst relative error %.3g", worst)
	}
}
