package segment

import (
	"errors"
	"strings"
	"testing"
)

// testCard is a complete card for a 4-class model, for tests here and elsewhere.
func testCard() *Card {
	return &Card{
		Name: "test", Version: "1", Modality: "MR T1 (synthetic)",
		SpacingMM: [3]float64{2.5, 2.5, 3}, Orientation: "RAS", Normalization: NormZScore,
		Labels:       []Label{{0, "background", "#000000"}, {1, "tissue", "#e6c84b"}, {2, "fluid", "#3c8cf0"}, {3, "lesion", "#f03c3c"}},
		TrainingData: "phantoms", IntendedUse: "tests",
		Domain: Domain{
			SpacingMinMM: [3]float64{2.5, 2.5, 3}, SpacingMaxMM: [3]float64{2.5, 2.5, 3},
			QuantileLevels:    QuantileLevels,
			QuantileMin:       []float64{-0.7, -0.6, -0.6, -0.55, -0.5, 1.5, 1.9},
			QuantileMax:       []float64{-0.6, -0.55, -0.5, -0.45, 1.2, 1.9, 2.4},
			QuantileTolerance: 0.5,
		},
	}
}

func TestCardRoundTrip(t *testing.T) {
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
	if got := RandomModel(16, 4, 1).Parameters(); got != 14653 {
		t.Errorf("Parameters() = %d, want 14653", got)
	}
}
