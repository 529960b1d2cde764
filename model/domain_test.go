package model

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
	t.Parallel()
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

// inDomainQuantiles are the normalised quantiles of an in-domain volume under testCard.
var inDomainQuantiles = []float64{-0.65, -0.6, -0.55, -0.5, 0, 1.7, 2.0}

// inDomainHistogram is an intensity histogram under testCard's envelope.
func inDomainHistogram() []float64 {
	hist := make([]float64, HistogramBins)
	hist[histogramBin(-0.6)], hist[histogramBin(1.2)], hist[histogramBin(1.8)], hist[histogramBin(2.6)] = 0.72, 0.2, 0.07, 0.01
	return hist
}

// shiftedHistogram is inDomainHistogram moved up by 2 standard deviations.
func shiftedHistogram() []float64 {
	shifted := make([]float64, HistogramBins)
	copy(shifted[8:], inDomainHistogram()[:HistogramBins-8])
	return shifted
}

// inDomainConfidence is the margins of an in-domain volume with these voxels per label.
func inDomainConfidence(labels ...int64) *Confidence {
	c := &Confidence{Labels: labels}
	for l, n := range labels {
		c.Voxels += n
		if l > 0 {
			c.MarginVoxels += n
		}
	}
	c.MarginSum, c.LowMargin = c.MarginVoxels*9*MarginScale, c.MarginVoxels/100
	return c
}

// inDomainInput is a volume testCard finds in domain.
func inDomainInput() DomainInput {
	return DomainInput{Dims: 3, Volumes: 1, SpacingMM: [3]float64{2.5, 2.5, 3}, FOVMM: [3]float64{240, 240, 192}, Orientation: true,
		Quantiles: inDomainQuantiles, Histogram: inDomainHistogram(), Confidence: inDomainConfidence(700, 280, 15, 5)}
}

// domainCases are edits of inDomainInput and the verdict testCard gives each.
var domainCases = []struct {
	name  string
	edit  func(in *DomainInput)
	level DomainLevel
	want  string
}{
	{"4D", func(in *DomainInput) { in.Dims, in.Volumes, in.Volume = 4, 5, 2 }, DomainWarn, "4 dimensions: volume 2 of 5 is segmented"},
	{"reader warning", func(in *DomainInput) { in.Warnings = []string{"scl_slope NaN in a.nii"} }, DomainWarn, "warn: scl_slope NaN in a.nii"},
	{"constant", func(in *DomainInput) { in.Constant = true }, DomainOutOfDomain, "constant volume"},
	{"no orientation", func(in *DomainInput) { in.Orientation = false }, DomainWarn, "no orientation"},
	{"spacing", func(in *DomainInput) { in.SpacingMM[2] = 2.5 }, DomainWarn, "spacing outside training: z 2.5 mm not in [3, 3]"},
	{"spacing far", func(in *DomainInput) { in.SpacingMM[2] = 1 }, DomainOutOfDomain, "spacing far outside training (beyond a factor 1.5): z 1 mm not in [3, 3]"},
	{"bright tail", func(in *DomainInput) { in.Quantiles = slices.Clone(inDomainQuantiles); in.Quantiles[6] = 4.1 }, DomainWarn, "p99 4.10 not in [1.40, 2.90]"},
	{"mouse", func(in *DomainInput) { in.FOVMM = [3]float64{12.8, 12.8, 9.6} }, DomainOutOfDomain, "field of view unlike training: x 12.8 mm not in [160, 360]"},
	{"whale", func(in *DomainInput) { in.FOVMM[1] = 1920 }, DomainOutOfDomain, "y 1920 mm not in [160, 360]"},
	{"histogram", func(in *DomainInput) { in.Histogram = shiftedHistogram() }, DomainOutOfDomain, "intensity unlike training: 100.0 % of the voxels"},
	{"histogram tail", func(in *DomainInput) { // 4 % of the voxels where training had none
		in.Histogram = inDomainHistogram()
		in.Histogram[histogramBin(-0.6)] -= 0.04
		in.Histogram[histogramBin(5)] += 0.04
	}, DomainOutOfDomain, "4.0 % of the voxels at normalised intensities more common than in any training volume (> 3.0 %)"},
	{"less sure", func(in *DomainInput) {
		c := inDomainConfidence(700, 280, 15, 5)
		c.MarginSum = c.MarginVoxels * 2 * MarginScale
		in.Confidence = c
	},
		DomainOutOfDomain, "model less sure than in training: mean foreground margin 2.00 logits < 4.50"},
	{"surer", func(in *DomainInput) {
		c := inDomainConfidence(700, 280, 15, 5)
		c.MarginSum = c.MarginVoxels * 12 * MarginScale
		in.Confidence = c
	},
		DomainOutOfDomain, "model surer than in training: mean foreground margin 12.00 logits > 11.00"},
	{"unsure", func(in *DomainInput) { c := inDomainConfidence(700, 280, 15, 5); c.LowMargin = 30; in.Confidence = c },
		DomainOutOfDomain, "model unsure: 10.00 % of the foreground within 1 logit of another class > 2.50 %"},
	{"lesions", func(in *DomainInput) { in.Confidence = inDomainConfidence(700, 200, 15, 85) }, DomainOutOfDomain, "labels in proportions unlike training: label 3 8.5 % not in [0, 5] %"},
	{"no foreground", func(in *DomainInput) { in.Confidence = inDomainConfidence(1000, 0, 0, 0) }, DomainOutOfDomain, "label 0 100 % not in [50, 85] %"},
}

func TestCheckDomain(t *testing.T) {
	t.Parallel()
	card := testCard()
	if v := CheckDomain(card, inDomainInput()); !v.OK() || v.String() != string(DomainOK) || v.Level() != DomainOK {
		t.Fatalf("in domain: %v", v)
	}
	for _, c := range domainCases {
		in := inDomainInput()
		c.edit(&in)
		v := CheckDomain(card, in)
		if v.Level() != c.level || !strings.HasPrefix(v.String(), string(c.level)+": ") || !strings.Contains(v.String(), c.want) {
			t.Errorf("%s: verdict %q, want %s with %q", c.name, v, c.level, c.want)
		}
		if got := ParseVerdictLevel(v.String()); got != c.level {
			t.Errorf("%s: ParseVerdictLevel(%q) = %q", c.name, v, got)
		}
	}
	// The most severe reason first, after the verdict's level.
	in := inDomainInput()
	in.Orientation, in.FOVMM[0] = false, 10
	if got := CheckDomain(card, in).String(); !strings.HasPrefix(got, "out-of-domain: field of view") || !strings.HasSuffix(got, "axes taken as RAS") {
		t.Errorf("two reasons: %q", got)
	}
	if v := CheckDomain(nil, inDomainInput()); v.Level() != DomainWarn || !strings.Contains(v.String(), "no card") {
		t.Errorf("no card: %v", v)
	}
	if ParseVerdictLevel("") != "" || ParseVerdictLevel("maybe: x") != "" || ParseVerdictLevel("ok") != DomainOK {
		t.Error("ParseVerdictLevel of an empty, unknown or bare column")
	}
}

// What the verdict rests on when parts are missing: the confidence, the card's later fields.
func TestCheckDomainWithWhatThereIs(t *testing.T) {
	t.Parallel()
	card := testCard()
	// Before segmentation (no confidence) and with an engine that reports none (no voxels),
	// the verdict rests on the input.
	in := inDomainInput()
	in.Confidence = nil
	if v := CheckDomain(card, in); !v.OK() {
		t.Errorf("no confidence: %v", v)
	}
	in.Confidence = &Confidence{}
	if v := CheckDomain(card, in); !v.OK() {
		t.Errorf("empty confidence: %v", v)
	}
	// A card written before the later fields checks what it has.
	old := testCard()
	old.Domain.FOVMinMM, old.Domain.FOVMaxMM, old.Domain.FOVTolerance = nil, nil, 0
	old.Domain.HistogramMax, old.Domain.HistogramMaxExcess, old.Domain.Confidence = nil, 0, nil
	in = inDomainInput()
	in.FOVMM, in.Histogram, in.Confidence = [3]float64{1, 1, 1}, shiftedHistogram(), inDomainConfidence(10, 0, 0, 0)
	if v := CheckDomain(old, in); !v.OK() {
		t.Errorf("old card: %v", v)
	}
}

// Resampled to the card's spacing, up to the rounding of the voxel count.
func TestCheckDomainResampled(t *testing.T) {
	t.Parallel()
	card := testCard()
	in := inDomainInput()
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
	if v := CheckDomain(card, in); v.Level() != DomainWarn {
		t.Errorf("resampled to 2.67 mm over 96 voxels: %v, want a warning", v)
	}
}

func TestHistogram(t *testing.T) {
	t.Parallel()
	// Every voxel at normalised 0 falls in bin 16 ([0, 0.25)); below -4 and above 8 in the ends.
	vol := &Volume{NX: 4, NY: 1, NZ: 1, F32: []float32{0, 0.1, -100, 100}, Norm: Norm{Scale: 1}}
	_, h := VolumeIntensity(vol)
	if h[16] != 0.5 || h[0] != 0.25 || h[HistogramBins-1] != 0.25 {
		t.Errorf("histogram %v", h)
	}
	i16 := &Volume{NX: 4, NY: 1, NZ: 1, I16: []int16{0, 1, -400, 400}, Norm: Norm{Scale: 0.1}}
	if _, h2 := VolumeIntensity(i16); !slices.Equal(h, h2) {
		t.Errorf("int16 histogram %v, float32 %v", h2, h)
	}
	env := []float64{0.5, 0.3, 0.4}
	if x := HistogramExcess([]float64{0.2, 0.5, 0.3}, env); math.Abs(x-0.2) > 1e-12 {
		t.Errorf("excess %v, want 0.2", x)
	}
	if x := HistogramExcess(env, env); x != 0 {
		t.Errorf("excess of the envelope itself %v", x)
	}
}

// TestSampleHistogram: the counts made on several goroutines equal a plain loop's, for steps
// that do and do not divide the length, and for a volume too small to split.
func TestSampleHistogram(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(9, 9))
	v := make([]int16, 3<<20+17)
	for i := range v {
		v[i] = int16(rng.NormFloat64() * 3000)
	}
	for _, c := range []struct{ n, step int }{{len(v), 1}, {len(v), 3}, {len(v), 7}, {1000, 1}, {1, 1}, {len(v), len(v) + 5}} {
		var want [1 << 16]int32
		count := 0
		for i := 0; i < c.n; i += c.step {
			want[uint16(v[i])^0x8000]++
			count++
		}
		got := new([1 << 16]int32)
		got[7] = 99 // what a pooled array held before
		n := sampleHistogram(got, v[:c.n], c.step)
		if n != count || *got != want {
			t.Errorf("n %d step %d: %d samples (want %d), counts equal: %v", c.n, c.step, n, count, *got == want)
		}
	}
}
