package model

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
	// Category and Type code what the label segments, for DICOM SEG segments (Segmented
	// Property Category and Type, e.g. SNOMED CT "Morphologically Altered Structure" /
	// "Lesion"). Added later and optional: a card without them loads.
	Category *Code `json:"category,omitempty"`
	Type     *Code `json:"type,omitempty"`
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
	// (standard deviations), before a volume's quantiles count as outside training (a warning).
	QuantileTolerance float64 `json:"quantile_tolerance"`

	// The fields below were added later: a card without them still loads, and its volumes are
	// not checked on what they describe.

	// FOVMinMM and FOVMaxMM bound the training volumes' field of view (voxels times voxel size,
	// mm) per canonical axis; a volume outside [min/FOVTolerance, max*FOVTolerance] on any axis
	// is out of domain.
	FOVMinMM     []float64 `json:"fov_min_mm,omitempty"`
	FOVMaxMM     []float64 `json:"fov_max_mm,omitempty"`
	FOVTolerance float64   `json:"fov_tolerance,omitempty"`
	// HistogramMax is, per bin, the largest share of a training volume's voxels in that bin of
	// its normalised intensity histogram (HistogramBins bins of HistogramWidth from
	// HistogramLow, model.VolumeIntensity): the envelope of the training histograms. A volume
	// whose histogram exceeds it by more than HistogramMaxExcess in all (HistogramExcess: the
	// share of its voxels at intensities more common than in any training volume) is out of
	// domain.
	HistogramMax       []float64 `json:"histogram_max,omitempty"`
	HistogramMaxExcess float64   `json:"histogram_max_excess,omitempty"`
	// Confidence bounds the model's own confidence (model.Confidence) as seen on its training
	// volumes, widened; outside them a volume is out of domain.
	Confidence *ConfidenceDomain `json:"confidence,omitempty"`
}

// ConfidenceDomain is the range of the model's confidence over its training volumes, widened
// into thresholds (docs/model.md says how the default model's were calibrated). A volume
// outside any of them is out of domain.
type ConfidenceDomain struct {
	// MeanMarginMin, MeanMarginMax bound the mean foreground margin (logits): a model much less
	// sure than in training, or much surer (its foreground made of what it has never seen
	// ambiguous), is not looking at its training domain.
	MeanMarginMin float64 `json:"mean_margin_min"`
	MeanMarginMax float64 `json:"mean_margin_max"`
	// LowMarginMax: the largest fraction of the foreground within 1 logit of another class.
	LowMarginMax float64 `json:"low_margin_max"`
	// LabelFractionMin, LabelFractionMax: per label, by value, the fraction of the volume the
	// model gives it.
	LabelFractionMin []float64 `json:"label_fraction_min"`
	LabelFractionMax []float64 `json:"label_fraction_max"`
}

// HasFOV reports whether the card records the training field of view.
func (d *Domain) HasFOV() bool { return len(d.FOVMinMM) == 3 }

// HasHistogram reports whether the card records the training intensity histogram.
func (d *Domain) HasHistogram() bool { return len(d.HistogramMax) > 0 }

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
		if err := l.validateCodes(); err != nil {
			return bad("label %d (%s): %v", i, l.Name, err)
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
	return d.validateLater(classes, bad)
}

// validateLater checks the domain fields added later: each group absent, or complete and
// consistent.
func (d *Domain) validateLater(classes int, bad func(string, ...any) error) error {
	finite := func(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
	if len(d.FOVMinMM) != 0 || len(d.FOVMaxMM) != 0 || d.FOVTolerance != 0 {
		if len(d.FOVMinMM) != 3 || len(d.FOVMaxMM) != 3 {
			return bad("domain fov_min_mm and fov_max_mm need 3 values each")
		}
		for i := range 3 {
			if !(d.FOVMinMM[i] > 0) || !finite(d.FOVMaxMM[i]) || d.FOVMaxMM[i] < d.FOVMinMM[i] {
				return bad("domain field of view on axis %d is [%v, %v]", i, d.FOVMinMM[i], d.FOVMaxMM[i])
			}
		}
		if !(d.FOVTolerance >= 1) || !finite(d.FOVTolerance) {
			return bad("domain fov_tolerance %v: want a factor >= 1", d.FOVTolerance)
		}
	}
	if len(d.HistogramMax) != 0 || d.HistogramMaxExcess != 0 {
		if len(d.HistogramMax) != HistogramBins {
			return bad("domain histogram_max has %d bins, want %d", len(d.HistogramMax), HistogramBins)
		}
		sum := 0.0
		for _, v := range d.HistogramMax {
			if !(v >= 0 && v <= 1) {
				return bad("domain histogram_max holds %v: want fractions", v)
			}
			sum += v
		}
		if sum < 1-1e-4 { // an envelope's bins, rounded, may lose a little
			return bad("domain histogram_max sums to %v: an envelope of histograms sums to 1 or more", sum)
		}
		if !(d.HistogramMaxExcess > 0 && d.HistogramMaxExcess <= 1) {
			return bad("domain histogram_max_excess %v: want a fraction > 0", d.HistogramMaxExcess)
		}
	}
	if k := d.Confidence; k != nil {
		if !(k.MeanMarginMin >= 0) || !(k.MeanMarginMax >= k.MeanMarginMin) || !finite(k.MeanMarginMax) {
			return bad("domain confidence mean margin range [%v, %v]: want 0 <= min <= max", k.MeanMarginMin, k.MeanMarginMax)
		}
		if !(k.LowMarginMax >= 0 && k.LowMarginMax <= 1) {
			return bad("domain confidence low_margin_max %v: want a fraction", k.LowMarginMax)
		}
		if len(k.LabelFractionMin) != classes || len(k.LabelFractionMax) != classes {
			return bad("domain confidence label_fraction_min/max need %d values each (one a label)", classes)
		}
		for i := range classes {
			if lo, hi := k.LabelFractionMin[i], k.LabelFractionMax[i]; !(lo >= 0 && lo <= hi && hi <= 1) {
				return bad("domain confidence label %d fraction range [%v, %v]: want fractions, min <= max", i, lo, hi)
			}
		}
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
