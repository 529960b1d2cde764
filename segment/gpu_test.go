package segment

import (
	"errors"
	"math"
	"testing"
)

func TestCUDAOptionsPrecision(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		err      bool
	}{
		{"", PrecisionFP16, false},
		{"fp16", PrecisionFP16, false},
		{"fp32", PrecisionFP32, false},
		{"FP16", "", true},
		{"bf16", "", true},
	} {
		got, err := CUDAOptions{Precision: tc.in}.precision()
		if tc.err {
			if !errors.Is(err, ErrBadPrecision) {
				t.Errorf("precision %q: error %v, want ErrBadPrecision", tc.in, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("precision %q: %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

func TestOpenEnginesPrecision(t *testing.T) {
	m := RandomModel(4, 2, 1)
	// A bad precision fails for every engine kind, before anything is opened.
	for _, kind := range []string{KindCPU, KindAuto, KindCUDA} {
		if _, err := OpenEngines(m, kind, "all", 1, CUDAOptions{Precision: "fp8"}); !errors.Is(err, ErrBadPrecision) {
			t.Errorf("kind %s, precision fp8: %v, want ErrBadPrecision", kind, err)
		}
	}
	engines, err := OpenEngines(m, KindCPU, "all", 1, CUDAOptions{Precision: PrecisionFP32})
	if err != nil || len(engines) != 1 || engines[0].Name() != "cpu" {
		t.Fatalf("cpu with fp32: %v, %v", engines, err)
	}
	engines[0].Close()
	if !CUDACompiled {
		if _, err := OpenEngines(m, KindCUDA, "all", 1, CUDAOptions{}); !errors.Is(err, ErrNoCUDA) {
			t.Errorf("cuda without CUDA: %v, want ErrNoCUDA", err)
		}
		if _, err := NewCUDAEngineWith(m, 0, CUDAOptions{Precision: "x"}); !errors.Is(err, ErrBadPrecision) {
			t.Errorf("NewCUDAEngineWith bad precision: %v, want ErrBadPrecision", err)
		}
	}
}

// refLogitsAt is refLogits (reference_test.go) for the one voxel (z, y, x): the float64
// network on the neighbourhood it reads, e from x, s and g from e, then gate and head.
func refLogitsAt(m *Model, vol *Volume, z, y, x int) []float64 {
	c, gw, k := m.Channels, m.Gate(), m.Classes
	xAt := func(z, y, x int) float64 {
		if z < 0 || z >= vol.NZ || y < 0 || y >= vol.NY || x < 0 || x >= vol.NX {
			return 0
		}
		i := (z*vol.NY+y)*vol.NX + x
		var v float32
		if vol.I16 != nil {
			v = float32(vol.I16[i])
		} else {
			v = vol.F32[i]
		}
		prod := v * vol.Norm.Scale // float32 multiply, rounded
		return float64(prod + vol.Norm.Shift)
	}
	eAt := func(ch, z, y, x int) float64 {
		if z < 0 || z >= vol.NZ || y < 0 || y >= vol.NY || x < 0 || x >= vol.NX {
			return 0
		}
		acc := float64(m.C1B[ch])
		for t := 0; t < 27; t++ {
			acc += float64(m.C1W[ch*27+t]) * xAt(z+t/9-1, y+t/3%3-1, x+t%3-1)
		}
		return math.Max(acc, 0)
	}
	// e on the 5x5x5 neighbourhood, [ch][dz][dy][dx] with offsets -2..2.
	var e [16][5][5][5]float64
	for ch := 0; ch < c; ch++ {
		for dz := 0; dz < 5; dz++ {
			for dy := 0; dy < 5; dy++ {
				for dx := 0; dx < 5; dx++ {
					e[ch][dz][dy][dx] = eAt(ch, z+dz-2, y+dy-2, x+dx-2)
				}
			}
		}
	}
	conv := func(w, b []float32, co, dil int) float64 {
		acc := float64(b[co])
		for ci := 0; ci < c; ci++ {
			for t := 0; t < 27; t++ {
				acc += float64(w[(co*c+ci)*27+t]) * e[ci][2+(t/9-1)*dil][2+(t/3%3-1)*dil][2+(t%3-1)*dil]
			}
		}
		return math.Max(acc, 0)
	}
	s, g := make([]float64, c), make([]float64, c)
	for co := 0; co < c; co++ {
		s[co], g[co] = conv(m.C2W, m.C2B, co, 1), conv(m.CGW, m.CGB, co, 2)
	}
	p := float64(m.PsiB[0])
	for j := 0; j < gw; j++ {
		ax, ag := float64(m.WXB[j]), float64(m.WGB[j])
		for ch := 0; ch < c; ch++ {
			ax += float64(m.WXW[j*c+ch]) * s[ch]
			ag += float64(m.WGW[j*c+ch]) * g[ch]
		}
		p += float64(m.PsiW[j]) * math.Max(ax+ag, 0)
	}
	a := 1 / (1 + math.Exp(-p))
	l := make([]float64, k)
	for kk := 0; kk < k; kk++ {
		acc := float64(m.HeadB[kk])
		for ch := 0; ch < c; ch++ {
			acc += float64(m.HeadW[kk*c+ch]) * (a*s[ch] + g[ch])
		}
		l[kk] = acc
	}
	return l
}

// refLogitsAt must be refLogits at every voxel (it checks the GPU engines' near-ties cheaply).
func TestRefLogitsAt(t *testing.T) {
	for _, c := range []struct {
		m     *Model
		int16 bool
	}{{RandomModel(16, 4, 3), true}, {RandomModel(6, 3, 4), false}} {
		vol := randomVolume(9, 7, 6, 5, c.int16)
		all := refLogits(c.m, vol)
		for i, want := range all {
			got := refLogitsAt(c.m, vol, i/(9*7), i%(9*7)/9, i%9)
			for k := range want {
				if math.Abs(got[k]-want[k]) > 1e-9*(1+math.Abs(want[k])) {
					t.Fatalf("voxel %d class %d: %g, want %g", i, k, got[k], want[k])
				}
			}
		}
	}
}

// Device lists are checked whatever GPUs are present; every usage error wraps its flag's
// sentinel.
func TestEngineFlagErrors(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{"", "all", " all ", "0", "0,1", "3"} {
		if err := CheckDevices(ok); err != nil {
			t.Errorf("CheckDevices(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{"abc", "-1", "0,0", "1,x", ","} {
		if err := CheckDevices(bad); !errors.Is(err, ErrDevices) {
			t.Errorf("CheckDevices(%q): %v; want ErrDevices", bad, err)
		}
	}
	if _, err := ParseDevices("3", 1); !errors.Is(err, ErrDevices) {
		t.Errorf("a GPU beyond those present: %v", err)
	}
	m := RandomModel(4, 3, 1)
	if _, err := OpenEngines(m, KindCPU, "abc", 1, CUDAOptions{}); !errors.Is(err, ErrDevices) {
		t.Errorf("cpu engine, --devices abc: %v", err)
	}
	if _, err := OpenEngines(m, KindCPU, "all", -1, CUDAOptions{}); !errors.Is(err, ErrWorkers) {
		t.Errorf("--workers -1: %v", err)
	}
	if _, err := OpenEngines(m, "gpu", "all", 1, CUDAOptions{}); !errors.Is(err, ErrEngineKind) {
		t.Errorf("--engine gpu: %v", err)
	}
}
