package kernels

import (
	"errors"
	"fmt"
)

// Sizes the kernels are compiled for (common.cuh).
const (
	Channels   = 16 // VP_C: models with fewer channels are zero-padded
	GateWidth  = 8  // VP_GATE
	MaxClasses = 16 // VP_MAXK
)

// ErrUnsupported is wrapped by errors about a GPU, driver or model these kernels cannot serve.
var ErrUnsupported = errors.New("kernels: unsupported")

// Weights is a network in PyTorch layouts (as model.Model holds it): c1W [C][1][3][3][3], c2W
// and cgW [C][C][3][3][3], wxW and wgW [C/2][C], psiW [1][C/2], headW [K][C].
type Weights struct {
	Channels, Classes int

	C1W, C1B, C2W, C2B, CGW, CGB []float32
	WXW, WXB, WGW, WGB           []float32
	PsiW, PsiB, HeadW, HeadB     []float32
}

func (w *Weights) check() error {
	c, k, g := w.Channels, w.Classes, w.Channels/2
	if c < 1 || c > Channels || g > GateWidth {
		return fmt.Errorf("%w: %d channels (the kernels handle 1..%d)", ErrUnsupported, c, Channels)
	}
	if k < 1 || k > MaxClasses {
		return fmt.Errorf("%w: %d classes (the kernels handle 1..%d)", ErrUnsupported, k, MaxClasses)
	}
	for _, t := range []struct {
		name string
		v    []float32
		n    int
	}{
		{"c1.weight", w.C1W, c * 27}, {"c1.bias", w.C1B, c},
		{"c2.weight", w.C2W, c * c * 27}, {"c2.bias", w.C2B, c},
		{"cg.weight", w.CGW, c * c * 27}, {"cg.bias", w.CGB, c},
		{"wx.weight", w.WXW, g * c}, {"wx.bias", w.WXB, g},
		{"wg.weight", w.WGW, g * c}, {"wg.bias", w.WGB, g},
		{"psi.weight", w.PsiW, g}, {"psi.bias", w.PsiB, 1},
		{"head.weight", w.HeadW, k * c}, {"head.bias", w.HeadB, k},
	} {
		if len(t.v) != t.n {
			return fmt.Errorf("kernels: %s has %d values, want %d for C=%d K=%d", t.name, len(t.v), t.n, c, k)
		}
	}
	return nil
}

// The confidence counters gate_head and count_confidence accumulate (common.cuh's
// VP_CONF_*; model.Confidence): ConfLen unsigned 64-bit counters, foreground voxels, margin
// units, low-margin voxels, then the voxels of each label. The margin's units are segment's
// (MarginScale and the rest, VP_MARGIN_*); TestConfidenceConstantsMatchSource checks both sides.
const (
	ConfForeground = 0 // VP_CONF_FG
	ConfMargin     = 1 // VP_CONF_MARGIN
	ConfLow        = 2 // VP_CONF_LOW
	ConfLabels     = 3 // VP_CONF_LABELS
	ConfLen        = ConfLabels + MaxClasses

	MarginScale    = 64    // VP_MARGIN_SCALE: units per logit
	MarginCapUnits = 65535 // VP_MARGIN_CAP
	LowMarginUnits = 64    // VP_LOW_MARGIN
	// MarginStride: the margins are counted on the planes whose z in the volume is a multiple
	// of it (VP_CONF_STRIDE); the labels on every plane.
	MarginStride = 8
)
