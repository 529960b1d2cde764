package segment

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// referenceQuantiles sorts every sampled normalised value: what VolumeQuantiles computes.
func referenceQuantiles(vals []float64, step int) []float64 {
	var s []float64
	for i := 0; i < len(vals); i += step {
		s = append(s, vals[i])
	}
	slices.Sort(s)
	q := make([]float64, len(QuantileLevels))
	for i, p := range QuantileLevels {
		pos := p * float64(len(s)-1)
		k := int(pos)
		if k+1 < len(s) {
			q[i] = s[k] + (pos-float64(k))*(s[k+1]-s[k])
		} else {
			q[i] = s[k]
		}
	}
	return q
}

// TestVolumeQuantiles compares the int16 histogram path and the float32 sort path with a plain
// sort, on a volume small enough to be read whole and one that is sampled.
func TestVolumeQuantiles(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, dims := range [][3]int{{17, 13, 11}, {128, 128, 80}} {
		n := dims[0] * dims[1] * dims[2]
		vol := &Volume{NX: dims[0], NY: dims[1], NZ: dims[2], I16: make([]int16, n), Norm: Norm{Scale: 0.01, Shift: -3}}
		f := &Volume{NX: dims[0], NY: dims[1], NZ: dims[2], F32: make([]float32, n), Norm: vol.Norm}
		norm := make([]float64, n)
		for i := range n {
			v := int16(r.NormFloat64()*300 + 200)
			if r.IntN(4) == 0 {
				v = -1000
			}
			vol.I16[i], f.F32[i] = v, float32(v)
			norm[i] = float64(vol.Norm.Apply(float32(v)))
		}
		step := max(1, n/quantileSample)
		if step > 1 && step%2 == 0 {
			step++
		}
		want := referenceQuantiles(norm, step)
		for name, got := range map[string][]float64{"int16": VolumeQuantiles(vol), "float32": VolumeQuantiles(f)} {
			for i := range want {
				if math.Abs(got[i]-want[i]) > 1e-9 {
					t.Errorf("%v %s: level %v: %v, want %v", dims, name, QuantileLevels[i], got[i], want[i])
				}
			}
		}
	}
	f := &Volume{NX: 2, NY: 1, NZ: 1, F32: []float32{float32(math.NaN()), float32(math.Inf(1))}, Norm: Norm{Scale: 1}}
	if q := VolumeQuantiles(f); !math.IsNaN(q[0]) {
		t.Errorf("no finite value: %v, want NaN", q)
	}
}

func TestCheckDomain(t *testing.T) {
	card := testCard()
	inside := []float64{-0.65, -0.6, -0.55, -0.5, 0, 1.7, 2.0}
	base := DomainInput{Dims: 3, Volumes: 1, SpacingMM: [3]float64{2.5, 2.5, 3}, Orientation: true, Quantiles: inside}
	if v := CheckDomain(card, base); !v.OK() || v.String() != DomainOK {
		t.Fatalf("in domain: %v", v)
	}
	for _, c := range []struct {
		name string
		edit func(in *DomainInput)
		want string
	}{
		{"4D", func(in *DomainInput) { in.Dims, in.Volumes = 4, 5 }, "4 dimensions: only volume 0 of 5"},
		{"constant", func(in *DomainInput) { in.Constant = true }, "constant volume"},
		{"no orientation", func(in *DomainInput) { in.Orientation = false }, "no orientation"},
		{"spacing", func(in *DomainInput) { in.SpacingMM[2] = 1 }, "spacing outside training: z 1 mm not in [3, 3]"},
		{"bright tail", func(in *DomainInput) { in.Quantiles = slices.Clone(inside); in.Quantiles[6] = 4.1 }, "p99 4.10 not in [1.40, 2.90]"},
	} {
		in := base
		c.edit(&in)
		v := CheckDomain(card, in)
		if v.OK() || !strings.HasPrefix(v.String(), "warn: ") || !strings.Contains(v.String(), c.want) {
			t.Errorf("%s: verdict %q, want a warning with %q", c.name, v, c.want)
		}
	}
	// Resampled to the card's spacing, up to the rounding of the voxel count.
	in := base
	in.SpacingMM, in.Resampled, in.ModelDims = [3]float64{2.512, 2.5, 2.985}, true, [3]int{96, 96, 80}
	if v := CheckDomain(card, in); !v.OK() {
		t.Errorf("resampled: %v", v)
	}
	// 4 voxels of 2 mm become 3 of 2.67 mm: within the rounding of so few.
	in.SpacingMM, in.ModelDims = [3]float64{2.67, 2.5, 3}, [3]int{3, 96, 80}
	if v := CheckDomain(card, in); !v.OK() {
		t.Errorf("resampled, 3 voxels: %v", v)
	}
	in.SpacingMM[1] = 2.67
	if v := CheckDomain(card, in); v.OK() {
		t.Errorf("resampled to 2.67 mm over 96 voxels: ok, want a warning")
	}
	if v := CheckDomain(nil, base); v.OK() || !strings.Contains(v.String(), "no card") {
		t.Errorf("no card: %v", v)
	}
}
