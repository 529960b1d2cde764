package model

import (
	"errors"
	"math"
	"strings"
	"testing"
)

// testCard is a complete card for a 4-class model, for tests here and elsewhere.
func testCard() *Card {
	return &Card{
		Name: "test", Version: "1", Modality: "MR T1 (synthetic)",
		SpacingMM: [3]float64{2.5, 2.5, 3}, Orientation: "RAS", Normalization: NormZScore,
		Labels: []Label{{Value: 0, Name: "background", Color: "#000000"}, {Value: 1, Name: "tissue", Color: "#e6c84b"},
			{Value: 2, Name: "fluid", Color: "#3c8cf0"}, {Value: 3, Name: "lesion", Color: "#f03c3c"}},
		TrainingData: "phantoms", IntendedUse: "tests",
		Domain: Domain{
			SpacingMinMM: [3]float64{2.5, 2.5, 3}, SpacingMaxMM: [3]float64{2.5, 2.5, 3},
			QuantileLevels:    QuantileLevels,
			QuantileMin:       []float64{-0.7, -0.6, -0.6, -0.55, -0.5, 1.5, 1.9},
			QuantileMax:       []float64{-0.6, -0.55, -0.5, -0.45, 1.2, 1.9, 2.4},
			QuantileTolerance: 0.5,
			FOVMinMM:          []float64{240, 240, 192}, FOVMaxMM: []float64{240, 240, 192}, FOVTolerance: 1.5,
			HistogramMax: testHistogram(), HistogramMaxExcess: 0.03,
			Confidence: &ConfidenceDomain{MeanMarginMin: 4.5, MeanMarginMax: 11, LowMarginMax: 0.025,
				LabelFractionMin: []float64{0.5, 0.15, 0.001, 0}, LabelFractionMax: []float64{0.85, 0.45, 0.03, 0.05}},
		},
	}
}

// testHistogram is a phantom-like envelope of normalised histograms: up to 80 % background near
// -0.6, the rest spread over tissue and lesions.
func testHistogram() []float64 {
	h := make([]float64, HistogramBins)
	h[histogramBin(-0.6)] = 0.8
	h[histogramBin(1.2)] = 0.2
	h[histogramBin(1.8)] = 0.1
	h[histogramBin(2.6)] = 0.03
	return h
}

func TestCardRoundTrip(t *testing.T) {
	t.Parallel()
	m := RandomModel(4, 4, 1)
	m.ClassNames = []string{"background", "tissue", "fluid", "lesion"}
	m.Card = testCard()
	b, err := m.MarshalSafetensors()
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseModel(b)
	if err != nil {
		t.Fatal(err)
	}
	if got.Card == nil || got.Card.Labels[3].Color != "#f03c3c" || got.Card.Domain.QuantileMax[6] != 2.4 || got.Card.SpacingMM[2] != 3 {
		t.Fatalf("card did not survive: %+v", got.Card)
	}
	if got.LabelName(2) != "fluid" || got.LabelName(9) != "label 9" {
		t.Errorf("LabelName: %q %q", got.LabelName(2), got.LabelName(9))
	}
	m.Card = nil
	b, err = m.MarshalSafetensors()
	if err != nil {
		t.Fatal(err)
	}
	if got, err := ParseModel(b); err != nil || got.Card != nil {
		t.Fatalf("a file without a card: card %v, err %v", got.Card, err)
	}
}

// TestCardRejects names the field at fault for each kind of bad card.
func TestCardRejects(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name  string
		edit  func(c *Card)
		inErr string
	}{
		{"no name", func(c *Card) { c.Name = "" }, "name and version"},
		{"zero spacing", func(c *Card) { c.SpacingMM[1] = 0 }, "spacing_mm[1]"},
		{"orientation", func(c *Card) { c.Orientation = "RAR" }, "orientation"},
		{"normalization", func(c *Card) { c.Normalization = "minmax" }, "normalization"},
		{"label count", func(c *Card) { c.Labels = c.Labels[:3] }, "3 labels"},
		{"label order", func(c *Card) { c.Labels[2].Value = 5 }, "value 5"},
		{"colour", func(c *Card) { c.Labels[1].Color = "red" }, "colour"},
		{"spacing range", func(c *Card) { c.Domain.SpacingMaxMM[0] = 1 }, "spacing range"},
		{"levels", func(c *Card) { c.Domain.QuantileLevels = []float64{0.5} }, "quantile_levels"},
		{"quantile order", func(c *Card) { c.Domain.QuantileMin[3] = -2 }, "decrease"},
		{"range", func(c *Card) { c.Domain.QuantileMax[0] = -1 }, "quantile range"},
		{"tolerance", func(c *Card) { c.Domain.QuantileTolerance = -1 }, "tolerance"},
		{"fov count", func(c *Card) { c.Domain.FOVMaxMM = c.Domain.FOVMaxMM[:2] }, "fov_min_mm and fov_max_mm"},
		{"fov range", func(c *Card) { c.Domain.FOVMinMM[1] = 300 }, "field of view on axis 1"},
		{"fov tolerance", func(c *Card) { c.Domain.FOVTolerance = 0.5 }, "fov_tolerance"},
		{"histogram bins", func(c *Card) { c.Domain.HistogramMax = c.Domain.HistogramMax[:10] }, "10 bins"},
		{"histogram sum", func(c *Card) { c.Domain.HistogramMax[histogramBin(-0.6)] = 0.1 }, "sums to"},
		{"histogram negative", func(c *Card) { c.Domain.HistogramMax[0] = -0.1 }, "holds -0.1"},
		{"histogram excess", func(c *Card) { c.Domain.HistogramMaxExcess = 0 }, "histogram_max_excess"},
		{"margin", func(c *Card) { c.Domain.Confidence.MeanMarginMin = math.NaN() }, "mean margin range"},
		{"margin order", func(c *Card) { c.Domain.Confidence.MeanMarginMax = 1 }, "mean margin range"},
		{"low margin", func(c *Card) { c.Domain.Confidence.LowMarginMax = 2 }, "low_margin_max"},
		{"label fractions", func(c *Card) { c.Domain.Confidence.LabelFractionMax = c.Domain.Confidence.LabelFractionMax[:3] }, "one a label"},
		{"label fraction", func(c *Card) { c.Domain.Confidence.LabelFractionMin[1] = 0.5 }, "label 1 fraction range"},
	} {
		card := testCard()
		c.edit(card)
		err := card.Validate(4)
		if !errors.Is(err, ErrBadModel) || !strings.Contains(err.Error(), c.inErr) {
			t.Errorf("%s: err %v, want ErrBadModel naming %q", c.name, err, c.inErr)
		}
	}
	if _, err := ParseCard(`{"name":"x","extra":1}`, 4); !errors.Is(err, ErrBadModel) {
		t.Errorf("unknown field: %v", err)
	}
	m := RandomModel(4, 4, 1)
	m.ClassNames = []string{"background", "tissue", "water", "lesion"}
	m.Card = testCard()
	if _, err := m.MarshalSafetensors(); !errors.Is(err, ErrBadModel) {
		t.Errorf("card names differ from class_names: %v", err)
	}
}

// TestParameters: the default architecture's count, as docs/model.md gives it.
func TestParameters(t *testing.T) {
	t.Parallel()
	if got := RandomModel(16, 4, 1).Parameters(); got != 14653 {
		t.Errorf("Parameters() = %d, want 14653", got)
	}
}
