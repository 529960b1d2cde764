package eval

import (
	"math"
	"testing"
)

func TestCompare(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name        string
		pred, truth []uint8
		classes     int
		accuracy    float64
		dice        []float64
		recall      []float64
		outOfRange  int64
	}{
		{"identical", []uint8{0, 1, 2, 1}, []uint8{0, 1, 2, 1}, 3, 1, []float64{1, 1, 1}, []float64{1, 1, 1}, 0},
		{"empty class is perfect", []uint8{0, 0, 1}, []uint8{0, 0, 1}, 3, 1, []float64{1, 1, 1}, []float64{1, 1, 1}, 0},
		// class 0: pred 3, truth 2, both 2 -> dice 4/5, recall 1
		// class 1: pred 1, truth 2, both 1 -> dice 2/3, recall 1/2
		{"hand counted", []uint8{0, 0, 0, 1}, []uint8{0, 0, 1, 1}, 2, 0.75, []float64{0.8, 2.0 / 3}, []float64{1, 0.5}, 0},
		// class 1 predicted where absent: dice 0, recall 1 (nothing to find)
		{"false positives only", []uint8{1, 0}, []uint8{0, 0}, 2, 0.5, []float64{2.0 / 3, 0}, []float64{0.5, 1}, 0},
		{"label out of range", []uint8{0, 5}, []uint8{0, 1}, 2, 0.5, []float64{1, 0}, []float64{1, 0}, 1},
		{"empty masks", nil, nil, 2, 1, []float64{1, 1}, []float64{1, 1}, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := Compare(tc.pred, tc.truth, tc.classes)
			if m.Voxels != int64(len(tc.pred)) || m.Accuracy != tc.accuracy || m.OutOfRange != tc.outOfRange {
				t.Errorf("voxels %d accuracy %v out of range %d, want %d %v %d", m.Voxels, m.Accuracy, m.OutOfRange, len(tc.pred), tc.accuracy, tc.outOfRange)
			}
			if len(m.Classes) != tc.classes {
				t.Fatalf("%d classes, want %d", len(m.Classes), tc.classes)
			}
			for k, c := range m.Classes {
				if math.Abs(c.Dice-tc.dice[k]) > 1e-12 || math.Abs(c.Recall-tc.recall[k]) > 1e-12 {
					t.Errorf("class %d: dice %v recall %v, want %v %v (%+v)", k, c.Dice, c.Recall, tc.dice[k], tc.recall[k], c)
				}
			}
		})
	}
	m := Compare([]uint8{0, 0, 0, 1}, []uint8{0, 0, 1, 1}, 2)
	if got := m.MeanDice(1); math.Abs(got-2.0/3) > 1e-12 {
		t.Errorf("MeanDice(1) = %v, want 2/3", got)
	}
	if got := m.MeanDice(0); math.Abs(got-(0.8+2.0/3)/2) > 1e-12 {
		t.Errorf("MeanDice(0) = %v", got)
	}
}

func TestCompareLengthMismatchPanics(t *testing.T) {
	t.Parallel()
	defer func() {
		if recover() == nil {
			t.Error("no panic for masks of different lengths")
		}
	}()
	Compare([]uint8{1}, []uint8{1, 2}, 3)
}

// TestPrecisionAndPool: precision by hand, and Pool equal to comparing the concatenation.
func TestPrecisionAndPool(t *testing.T) {
	t.Parallel()
	// class 1: pred 3 (two right), truth 2 -> precision 2/3, recall 1
	a := Compare([]uint8{1, 1, 1, 0}, []uint8{1, 1, 0, 0}, 2)
	if c := a.Classes[1]; math.Abs(c.Precision-2.0/3) > 1e-12 || c.Recall != 1 {
		t.Errorf("class 1: %+v", c)
	}
	if c := Compare([]uint8{0}, []uint8{1}, 2).Classes[1]; c.Precision != 1 || c.Recall != 0 {
		t.Errorf("nothing predicted: precision %v recall %v, want 1 0", c.Precision, c.Recall)
	}
	b := Compare([]uint8{0, 2, 2}, []uint8{2, 2, 1}, 3)
	a3 := Compare([]uint8{1, 1, 1, 0}, []uint8{1, 1, 0, 0}, 3)
	pooled := Pool([]Metrics{a3, b})
	whole := Compare([]uint8{1, 1, 1, 0, 0, 2, 2}, []uint8{1, 1, 0, 0, 2, 2, 1}, 3)
	if pooled.Voxels != whole.Voxels || pooled.Correct != whole.Correct || pooled.Accuracy != whole.Accuracy {
		t.Errorf("pooled %+v, whole %+v", pooled, whole)
	}
	for k := range whole.Classes {
		if pooled.Classes[k] != whole.Classes[k] {
			t.Errorf("class %d: pooled %+v, whole %+v", k, pooled.Classes[k], whole.Classes[k])
		}
	}
}
