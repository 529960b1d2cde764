package segment

import (
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"
)

// CardKey is the safetensors metadata key that holds the model card, a JSON object (Card).
const CardKey = "card"

// QuantileLevels are the levels at which a card records the normalised intensity distribution
// seen in training, and at which a volume's distribution is compared with it.
var QuantileLevels = []float64{0.01, 0.05, 0.25, 0.50, 0.75, 0.95, 0.99}

// Normalisation names.
const (
	// NormZScore is voxpipe's normalisation: (v - mean) / std over all voxels of the volume, after
	// the NIfTI scaling (see Norm).
	NormZScore = "zscore-volume"
)

// Card describes what a model is, what it was trained on and where it may be trusted. It is held
// as JSON under CardKey in the weights file's metadata; baseline/train.py writes it.
type Card struct {
	Name     string `json:"name"`
	Version  string `json:"version"`
	Modality string `json:"modality"`
	// SpacingMM is the voxel size the model was trained at, in mm, along its canonical axes.
	SpacingMM [3]float64 `json:"spacing_mm"`
	// Orientation is the closest canonical orientation of the training volumes' voxel axes: three
	// letters, the direction each of i, j, k points to (nibabel's axis codes, "RAS": i to the
	// right, j anterior, k superior).
	Orientation   string  `json:"orientation"`
	Normalization string  `json:"normalization"`
	Labels        []Label `json:"labels"`
	TrainingData  string  `json:"training_data"`
	IntendedUse   string  `json:"intended_use"`
	Domain        Domain  `json:"domain"`
}

// Label names one class of the model and the colour previews draw it in.
type Label struct {
	Value int    `json:"value"`
	Name  string `json:"name"`
	Color string `json:"color"` // "#rrggbb"
}

// Domain is the input seen in training.
type Domain struct {
	// SpacingMinMM and SpacingMaxMM bound the training volumes' spacing, per canonical axis.
	SpacingMinMM [3]float64 `json:"spacing_min_mm"`
	SpacingMaxMM [3]float64 `json:"spacing_max_mm"`
	// Quantiles of the normalised intensity at QuantileLevels: the lowest and highest value of
	// each over the training volumes.
	QuantileLevels []float64 `json:"quantile_levels"`
	QuantileMin    []float64 `json:"quantile_min"`
	QuantileMax    []float64 `json:"quantile_max"`
	// QuantileTolerance widens [QuantileMin, QuantileMax] on both sides, in normalised units
	// (standard deviations), before a volume is called out of domain.
	QuantileTolerance float64 `json:"quantile_tolerance"`
}

var (
	colorRE       = regexp.MustCompile(`^#[0-9a-fA-F]{6}$`)
	orientationRE = regexp.MustCompile(`^[LR][AP][IS]$|^[LR][IS][AP]$|^[AP][LR][IS]$|^[AP][IS][LR]$|^[IS][LR][AP]$|^[IS][AP][LR]$`)
)

// ParseCard decodes and checks a card for a model of the given number of classes.
func ParseCard(data string, classes int) (*Card, error) {
	dec := json.NewDecoder(strings.NewReader(data))
	dec.DisallowUnknownFields()
	var c Card
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("%w: metadata %s: %w", ErrBadModel, CardKey, err)
	}
	if err := c.Validate(classes); err != nil {
		return nil, err
	}
	return &c, nil
}

// Validate checks the card is complete and consistent with a model of the given classes.
func (c *Card) Validate(classes int) error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: card: %s", ErrBadModel, fmt.Sprintf(format, a...))
	}
	if c.Name == "" || c.Version == "" {
		return bad("name and version are required")
	}
	for i, s := range c.SpacingMM {
		if !(s > 0) || math.IsInf(s, 0) {
			return bad("spacing_mm[%d] = %v: want a positive number of mm", i, s)
		}
	}
	if !orientationRE.MatchString(c.Orientation) {
		return bad("orientation %q: want three axis codes such as RAS", c.Orientation)
	}
	if c.Normalization != NormZScore {
		return bad("normalization %q: this voxpipe applies %q only", c.Normalization, NormZScore)
	}
	if len(c.Labels) != classes {
		return bad("%d labels for a model of %d classes", len(c.Labels), classes)
	}
	for i, l := range c.Labels {
		if l.Value != i {
			return bad("label %d has value %d: labels are listed by value, from 0", i, l.Value)
		}
		if strings.TrimSpace(l.Name) == "" {
			return bad("label %d has no name", i)
		}
		if !colorRE.MatchString(l.Color) {
			return bad("label %d (%s): colour %q, want #rrggbb", i, l.Name, l.Color)
		}
	}
	d := c.Domain
	for i := range 3 {
		if !(d.SpacingMinMM[i] > 0) || d.SpacingMaxMM[i] < d.SpacingMinMM[i] || math.IsInf(d.SpacingMaxMM[i], 0) {
			return bad("domain spacing range on axis %d is [%v, %v]", i, d.SpacingMinMM[i], d.SpacingMaxMM[i])
		}
	}
	if !slices.Equal(d.QuantileLevels, QuantileLevels) {
		return bad("domain quantile_levels %v, want %v", d.QuantileLevels, QuantileLevels)
	}
	if len(d.QuantileMin) != len(QuantileLevels) || len(d.QuantileMax) != len(QuantileLevels) {
		return bad("domain quantile_min/max need %d values each", len(QuantileLevels))
	}
	for i := range d.QuantileMin {
		lo, hi := d.QuantileMin[i], d.QuantileMax[i]
		if math.IsNaN(lo) || math.IsNaN(hi) || math.IsInf(lo, 0) || math.IsInf(hi, 0) || hi < lo {
			return bad("domain quantile range at level %v is [%v, %v]", QuantileLevels[i], lo, hi)
		}
		if i > 0 && (lo < d.QuantileMin[i-1] || hi < d.QuantileMax[i-1]) {
			return bad("domain quantiles decrease at level %v", QuantileLevels[i])
		}
	}
	if !(d.QuantileTolerance >= 0) || math.IsInf(d.QuantileTolerance, 0) {
		return bad("domain quantile_tolerance %v: want >= 0", d.QuantileTolerance)
	}
	return nil
}

// Marshal encodes the card as the metadata value stored under CardKey.
func (c *Card) Marshal() (string, error) {
	b, err := json.Marshal(c)
	if err != nil {
		return "", fmt.Errorf("marshal card: %w", err)
	}
	return string(b), nil
}

// defaultColours colour the labels of a model without a card (label 0 black): distinct hues
// (Sasha Trubetskoy's list), cycled.
var defaultColours = []string{"#e6194b", "#3cb44b", "#ffe119", "#4363d8", "#f58231", "#911eb4", "#42d4f4", "#f032e6", "#bfef45", "#469990"}

// Labels are the model's labels: its card's, or, without a card, its class names in default
// colours.
func (m *Model) Labels() []Label {
	if m.Card != nil {
		return m.Card.Labels
	}
	ls := make([]Label, len(m.ClassNames))
	for i, n := range m.ClassNames {
		c := "#000000"
		if i > 0 {
			c = defaultColours[(i-1)%len(defaultColours)]
		}
		ls[i] = Label{Value: i, Name: n, Color: c}
	}
	return ls
}

// LabelName is the name of label v: from Labels, or "label N" for a value the model does not
// have.
func (m *Model) LabelName(v int) string {
	if ls := m.Labels(); v >= 0 && v < len(ls) {
		return ls[v].Name
	}
	return fmt.Sprintf("label %d", v)
}
