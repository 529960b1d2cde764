package kernels

import (
	"os"
	"regexp"
	"strconv"
	"testing"
	"voxpipe/model"
)

// The Go constants of the fused kernel must be the #defines it is compiled with (fused_config.cuh).
func TestFusedConstantsMatchSource(t *testing.T) {
	t.Parallel()
	// go test runs in this folder; scripts/gpu-check.sh runs the test binary from the root.
	src, err := os.ReadFile("fused_config.cuh")
	if os.IsNotExist(err) {
		src, err = os.ReadFile("engine/cuda/kernels/fused_config.cuh")
	}
	if err != nil {
		t.Fatal(err)
	}
	defs := map[string]int{}
	for _, m := range regexp.MustCompile(`(?m)^#define (VF_\w+) (\d+)\b`).FindAllStringSubmatch(string(src), -1) {
		v, _ := strconv.Atoi(m[2])
		defs[m[1]] = v
	}
	for name, want := range map[string]int{
		"VF_TX": FusedTileX, "VF_ROWS_SM90": FusedRowsSM90, "VF_ROWS_SM80": FusedRowsSM80, "VF_NARROW_CLASSES": FusedNarrowClasses,
		"VF_OFF_W1": fusedOffW1, "VF_OFF_B1": fusedOffB1, "VF_OFF_W2": fusedOffW2, "VF_OFF_B2": fusedOffB2,
		"VF_OFF_WG": fusedOffWG, "VF_OFF_BG": fusedOffBG, "VF_OFF_GX": fusedOffGateX, "VF_OFF_GXB": fusedOffGateXB,
		"VF_OFF_GG": fusedOffGateG, "VF_OFF_GGB": fusedOffGateGB, "VF_OFF_PSI": fusedOffPsi, "VF_OFF_PSIB": fusedOffPsiB,
		"VF_OFF_HW": fusedOffHead, "VF_OFF_HB": fusedOffHeadB, "VF_WEIGHTS": FusedWeightsLen,
	} {
		got, ok := defs[name]
		if !ok {
			t.Errorf("fused_config.cuh defines no %s", name)
		} else if got != want {
			t.Errorf("fused_config.cuh: %s = %d, Go has %d", name, got, want)
		}
	}
	// Offsets must tile the buffer without overlap, in order, 16-byte aligned where the kernel
	// reads float2 pairs.
	sizes := []struct {
		off, n int
	}{
		{fusedOffW1, 27 * Channels}, {fusedOffB1, Channels}, {fusedOffW2, 27 * Channels * Channels}, {fusedOffB2, Channels},
		{fusedOffWG, 27 * Channels * Channels}, {fusedOffBG, Channels}, {fusedOffGateX, GateWidth * Channels},
		{fusedOffGateXB, GateWidth}, {fusedOffGateG, GateWidth * Channels}, {fusedOffGateGB, GateWidth},
		{fusedOffPsi, GateWidth}, {fusedOffPsiB, 8}, {fusedOffHead, MaxClasses * Channels}, {fusedOffHeadB, MaxClasses},
	}
	end := 0
	for i, s := range sizes {
		if s.off != end {
			t.Errorf("region %d starts at %d, want %d", i, s.off, end)
		}
		end = s.off + s.n
	}
	if end != FusedWeightsLen {
		t.Errorf("regions end at %d, FusedWeightsLen %d", end, FusedWeightsLen)
	}
	if fusedOffW2%4 != 0 || fusedOffWG%4 != 0 {
		t.Error("conv weights not 16-byte aligned")
	}
}

func TestPackFused(t *testing.T) {
	t.Parallel()
	const c, k = 6, 3
	w := &Weights{Channels: c, Classes: k}
	seq := func(n int, base float32) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = base + float32(i)
		}
		return v
	}
	w.C1W, w.C1B = seq(c*27, 1000), seq(c, 2000)
	w.C2W, w.C2B = seq(c*c*27, 3000), seq(c, 4000)
	w.CGW, w.CGB = seq(c*c*27, 5000), seq(c, 6000)
	w.WXW, w.WXB = seq(c/2*c, 7000), seq(c/2, 7500)
	w.WGW, w.WGB = seq(c/2*c, 8000), seq(c/2, 8500)
	w.PsiW, w.PsiB = seq(c/2, 9000), seq(1, 9500)
	w.HeadW, w.HeadB = seq(k*c, 10000), seq(k, 10500)
	if err := w.check(); err != nil {
		t.Fatal(err)
	}
	p := PackFused(w)
	cases := []struct {
		name string
		got  float32
		want float32
	}{
		{"conv1 co 2 tap 5", p[fusedOffW1+5*Channels+2], w.C1W[2*27+5]},
		{"conv2 co 4 ci 1 tap 26", p[fusedOffW2+(26*Channels+4)*Channels+1], w.C2W[(4*c+1)*27+26]},
		{"convg co 0 ci 5 tap 13", p[fusedOffWG+(13*Channels+0)*Channels+5], w.CGW[(0*c+5)*27+13]},
		{"convg bias 5", p[fusedOffBG+5], w.CGB[5]},
		{"gate wx j 2 c 3", p[fusedOffGateX+2*Channels+3], w.WXW[2*c+3]},
		{"gate wg j 1 c 5", p[fusedOffGateG+1*Channels+5], w.WGW[1*c+5]},
		{"psi 2", p[fusedOffPsi+2], w.PsiW[2]},
		{"psi bias", p[fusedOffPsiB], w.PsiB[0]},
		{"head k 2 c 4", p[fusedOffHead+2*Channels+4], w.HeadW[2*c+4]},
		{"head bias 1", p[fusedOffHeadB+1], w.HeadB[1]},
		{"padded conv2 co 9", p[fusedOffW2+(3*Channels+9)*Channels+1], 0},
		{"padded conv2 ci 7", p[fusedOffW2+(3*Channels+1)*Channels+7], 0},
		{"padded gate j 3", p[fusedOffGateX+3*Channels], 0},
		{"padded head k 3", p[fusedOffHead+3*Channels], 0},
	}
	for _, tc := range cases {
		if tc.got != tc.want {
			t.Errorf("%s: %g, want %g", tc.name, tc.got, tc.want)
		}
	}
}

func TestFusedZChunk(t *testing.T) {
	t.Parallel()
	cases := []struct {
		nx, ny, nz, sms, want int32
	}{
		{512, 512, 64, 132, 64},     // 4096 tiles: whole slabs
		{512, 512, 1, 132, 1},       // a 1-plane slab
		{37, 53, 29, 132, 8},        // 12 tiles (16-row tiles): chunks of at least 8 planes
		{37, 53, 200, 132, 10},      // 12 tiles, 22 chunks for 264 blocks
		{16, 4, 5, 132, 5},          // thinner than 8: one chunk
		{64, 64, 100, 0, 100},       // unknown SM count: 1; 256 tiles suffice
		{1, 1, 1000, 132, 8},        // one tile: as thin as allowed
		{1, 1, 1 << 20, 4, 1 << 17}, // chunk count stays within the grid's z limit
	}
	for _, c := range cases {
		if got := FusedZChunk(c.nx, c.ny, c.nz, FusedRowsSM90, c.sms); got != c.want {
			t.Errorf("FusedZChunk(%d, %d, %d, %d) = %d, want %d", c.nx, c.ny, c.nz, c.sms, got, c.want)
		}
	}
}

// The confidence counters' layout and units must be common.cuh's.
func TestConfidenceConstantsMatchSource(t *testing.T) {
	t.Parallel()
	src, err := os.ReadFile("common.cuh")
	if os.IsNotExist(err) {
		src, err = os.ReadFile("engine/cuda/kernels/common.cuh")
	}
	if err != nil {
		t.Fatal(err)
	}
	defs := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^#define (VP_\w+) (.+)$`).FindAllStringSubmatch(string(src), -1) {
		defs[m[1]] = m[2]
	}
	for name, want := range map[string]string{
		"VP_CONF_FG": strconv.Itoa(ConfForeground), "VP_CONF_MARGIN": strconv.Itoa(ConfMargin), "VP_CONF_LOW": strconv.Itoa(ConfLow),
		"VP_CONF_LABELS": strconv.Itoa(ConfLabels), "VP_MAXK": strconv.Itoa(MaxClasses) + " ",
		"VP_MARGIN_SCALE": strconv.Itoa(MarginScale) + ".f", "VP_MARGIN_CAP": strconv.Itoa(MarginCapUnits) + "u", "VP_LOW_MARGIN": strconv.Itoa(LowMarginUnits) + "u",
		"VP_CONF_STRIDE": strconv.Itoa(MarginStride),
	} {
		if got, ok := defs[name]; !ok || !regexp.MustCompile(`^`+regexp.QuoteMeta(want)).MatchString(got+" ") {
			t.Errorf("common.cuh: %s is %q, Go has %q", name, got, want)
		}
	}
	if defs["VP_CONF_LEN"] != "(VP_CONF_LABELS + VP_MAXK)" || ConfLen != ConfLabels+MaxClasses {
		t.Errorf("VP_CONF_LEN is %q", defs["VP_CONF_LEN"])
	}
}

// The kernels count margins in the model's units (model.MarginScale and the rest), which the
// CPU engine and the domain check use.
func TestMarginUnitsMatchKernels(t *testing.T) {
	t.Parallel()
	if model.MarginScale != MarginScale || model.MarginCapUnits != MarginCapUnits || model.LowMarginUnits != LowMarginUnits {
		t.Errorf("the model's margin units (%d, %d, %d) differ from the kernels' (%d, %d, %d)", model.MarginScale, model.MarginCapUnits, model.LowMarginUnits,
			MarginScale, MarginCapUnits, LowMarginUnits)
	}
}

// The engine's description names the instructions the loaded build's convs issue.
func TestFusedGeometryInstructions(t *testing.T) {
	t.Parallel()
	for bits, want := range map[int32]string{
		0: "mma.sync", 3: "wgmma",
		1: "conv2 on wgmma, the dilated conv on mma.sync", 2: "the dilated conv on wgmma, conv2 on mma.sync",
	} {
		if got := (FusedGeometry{WGMMA: bits}).Instructions(); got != want {
			t.Errorf("WGMMA %d: %q, want %q", bits, got, want)
		}
	}
}
