package model

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

// codedCard is testCard with SNOMED CT codes on tissue and lesion (fluid left without).
func codedCard() *Card {
	c := testCard()
	c.Labels[1].Category = &Code{"SCT", "91723000", "Anatomical Structure"}
	c.Labels[1].Type = &Code{"SCT", "85756007", "Tissue"}
	c.Labels[3].Category = &Code{"SCT", "49755003", "Morphologically Altered Structure"}
	c.Labels[3].Type = &Code{"SCT", "52988006", "Lesion"}
	return c
}

// Codes survive Marshal, ParseCard and a weights file, and a label without them stays without.
func TestCardCodesRoundTrip(t *testing.T) {
	t.Parallel()
	c := codedCard()
	if err := c.Validate(4); err != nil {
		t.Fatal(err)
	}
	s, err := c.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(s, `"category":{"scheme":"SCT","value":"49755003","meaning":"Morphologically Altered Structure"}`) {
		t.Errorf("marshalled card lacks the lesion's category: %s", s)
	}
	got, err := ParseCard(s, 4)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.Labels, c.Labels) {
		t.Errorf("labels after ParseCard: %+v, want %+v", got.Labels, c.Labels)
	}
	if got.Labels[2].Category != nil || got.Labels[2].Type != nil {
		t.Errorf("fluid gained codes: %+v", got.Labels[2])
	}

	m := RandomModel(4, 4, 1)
	m.ClassNames = []string{"background", "tissue", "fluid", "lesion"}
	m.Card = c
	b, err := m.MarshalSafetensors()
	if err != nil {
		t.Fatal(err)
	}
	back, err := ParseModel(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back.Labels(), c.Labels) {
		t.Errorf("labels from the weights file: %+v, want %+v", back.Labels(), c.Labels)
	}
	if got := back.Labels()[3].Type.String(); got != "SCT 52988006 Lesion" {
		t.Errorf("Code.String() = %q", got)
	}
}

// A card written before codes existed loads, and marshals without them.
func TestCardWithoutCodesLoads(t *testing.T) {
	t.Parallel()
	s, err := testCard().Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(s, "category") || strings.Contains(s, `"type"`) {
		t.Fatalf("a card without codes marshals them: %s", s)
	}
	// The label list as cards before codes stored it.
	if !strings.Contains(s, `{"value":3,"name":"lesion","color":"#f03c3c"}`) {
		t.Fatalf("unexpected label encoding: %s", s)
	}
	c, err := ParseCard(s, 4)
	if err != nil {
		t.Fatalf("a card without codes: %v", err)
	}
	for _, l := range c.Labels {
		if l.Category != nil || l.Type != nil {
			t.Errorf("label %d gained codes: %+v", l.Value, l)
		}
	}
}

// TestCardCodeRejects: each bad code is refused, and the error names the label and the field.
func TestCardCodeRejects(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name  string
		edit  func(c *Label)
		inErr string
	}{
		{"empty scheme", func(l *Label) { l.Category.Scheme = "" }, "label 3 (lesion): category: scheme is empty"},
		{"blank value", func(l *Label) { l.Type.Value = "  " }, "label 3 (lesion): type: value is empty"},
		{"empty meaning", func(l *Label) { l.Type.Meaning = "" }, "type: meaning is empty"},
		{"long scheme", func(l *Label) { l.Category.Scheme = strings.Repeat("S", 17) }, "category: scheme \"SSSSSSSSSSSSSSSSS\" has 17 characters, DICOM allows 16"},
		{"long value", func(l *Label) { l.Type.Value = strings.Repeat("1", 17) }, "type: value"},
		{"long meaning", func(l *Label) { l.Type.Meaning = strings.Repeat("m", 65) }, "65 characters, DICOM allows 64"},
		{"backslash", func(l *Label) { l.Category.Meaning = `Altered\Structure` }, "no backslash"},
		{"newline", func(l *Label) { l.Type.Meaning = "Lesion\n" }, "no backslash or control"},
		{"tab", func(l *Label) { l.Type.Value = "5298\t8006" }, "no backslash or control"},
		{"escape", func(l *Label) { l.Category.Scheme = "S\x1bCT" }, "no backslash or control"},
		{"invalid utf-8", func(l *Label) { l.Type.Meaning = "Les\xffion" }, "not UTF-8"},
	} {
		card := codedCard()
		c.edit(&card.Labels[3])
		err := card.Validate(4)
		if !errors.Is(err, ErrBadModel) || !strings.Contains(err.Error(), c.inErr) || !strings.Contains(err.Error(), "lesion") {
			t.Errorf("%s: err %v, want ErrBadModel naming lesion and %q", c.name, err, c.inErr)
		}
	}
	// The limits themselves are allowed: 16 characters of SH, 64 of LO (counted in characters).
	card := codedCard()
	card.Labels[3].Type = &Code{strings.Repeat("S", 16), strings.Repeat("1", 16), strings.Repeat("é", 64)}
	if err := card.Validate(4); err != nil {
		t.Errorf("codes at the length limits: %v", err)
	}
	// A code object without its fields, as JSON may hold one, is refused too.
	good, err := codedCard().Marshal()
	if err != nil {
		t.Fatal(err)
	}
	s := strings.Replace(good, `{"scheme":"SCT","value":"85756007","meaning":"Tissue"}`, `{}`, 1)
	if _, err := ParseCard(s, 4); !errors.Is(err, ErrBadModel) || !strings.Contains(err.Error(), "label 1 (tissue): type: scheme is empty") {
		t.Errorf("an empty code object: %v", err)
	}
	if _, err := ParseCard(strings.Replace(good, `"scheme":"SCT"`, `"scheme":"SCT","designator":"x"`, 1), 4); !errors.Is(err, ErrBadModel) || !strings.Contains(err.Error(), "designator") {
		t.Errorf("an unknown code field: %v", err)
	}
}
