package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"voxpipe/fixtures"
	"voxpipe/model"
)

const cardJSON = `{"name":"brains","version":"2","modality":"MR T1","spacing_mm":[1,1,1.2],"orientation":"RAS",
"normalization":"zscore-volume","labels":[{"value":0,"name":"background","color":"#000000"},
{"value":1,"name":"grey","color":"#808080"},{"value":2,"name":"white","color":"#ffffff"}],
"training_data":"three brains","intended_use":"research only",
"domain":{"spacing_min_mm":[0.9,0.9,1],"spacing_max_mm":[1.1,1.1,1.4],
"quantile_levels":[0.01,0.05,0.25,0.5,0.75,0.95,0.99],
"quantile_min":[-1,-1,-0.5,0,0.5,1,2],"quantile_max":[-0.9,-0.8,-0.4,0.1,0.6,1.5,2.5],"quantile_tolerance":0.5}}`

// writeModel writes a random 3-class model, with the card when card is non-empty.
func writeModel(t *testing.T, card string) string {
	t.Helper()
	m := model.RandomModel(4, 3, 7)
	m.ClassNames = []string{"background", "grey", "white"}
	if card != "" {
		c, err := model.ParseCard(card, 3)
		if err != nil {
			t.Fatal(err)
		}
		m.Card = c
	}
	b, err := m.MarshalSafetensors()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "m.safetensors")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestModelInfo runs the binary, as a user would.
func TestModelInfo(t *testing.T) {
	t.Parallel()
	path := writeModel(t, cardJSON)
	code, out, stderr := cliRun(t, "model", "info", path)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"brains 2", "research only", "1 x 1 x 1.2 mm (x y z), orientation RAS", "1 grey", "#ffffff", "three brains", "p99 [2.00, 2.50]"} {
		if !strings.Contains(out, want) {
			t.Errorf("model info lacks %q:\n%s", want, out)
		}
	}
	code, out, stderr = cliRun(t, "model", "info", path, "--json")
	if code != 0 {
		t.Fatalf("--json: exit %d: %s", code, stderr)
	}
	var card model.Card
	if err := json.Unmarshal([]byte(out), &card); err != nil || card.Name != "brains" || card.Labels[2].Name != "white" {
		t.Fatalf("--json printed %q (%v)", out, err)
	}

	// The embedded default model has its card.
	code, out, stderr = cliRun(t, "model", "info")
	for _, want := range []string{"name            voxpipe-default", "not for clinical use", "2.5 x 2.5 x 3 mm (x y z), orientation RAS", "3 lesion"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("model info of the default: exit %d, lacks %q:\n%s%s", code, want, out, stderr)
		}
	}

	bare := writeModel(t, "")
	code, out, _ = cliRun(t, "model", "info", bare)
	if code != 0 || !strings.Contains(out, "none: this weights file predates model cards") || !strings.Contains(out, "background, grey, white") {
		t.Errorf("no card: exit %d\n%s", code, out)
	}
	if code, _, stderr = cliRun(t, "model", "info", "--json", bare); code != exitFailed || !strings.Contains(stderr, errNoCard.Error()) {
		t.Errorf("--json without a card: exit %d, stderr %q", code, stderr)
	}
	if code, _, _ = cliRun(t, "model", "info", filepath.Join(t.TempDir(), "missing.safetensors")); code == 0 {
		t.Errorf("a missing file: exit 0")
	}
	if code, _, _ = cliRun(t, "model", "info", path, path); code != exitUsage {
		t.Errorf("two files: exit %d, want %d", code, exitUsage)
	}
}

// The embedded model's card shows its later domain fields: field of view, histogram, confidence.
func TestModelInfoShowsLaterDomainFields(t *testing.T) {
	t.Parallel()
	code, out, stderr := cliRun(t, "model", "info")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"field of view 240 x 240 x 192", "intensity histogram: 48 bins", "confidence: mean foreground margin", "label shares: background ["} {
		if !strings.Contains(out, want) {
			t.Errorf("model info lacks %q:\n%s", want, out)
		}
	}
}

// loadModel's identity is the name and SHA-256 of the very bytes it parsed: the weights file
// for --model, the embedded model without.
func TestLoadModelIdentity(t *testing.T) {
	t.Parallel()
	path, want := testModel(t)
	m, name, id, err := loadModel(path)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	if name != "model.safetensors" || id.Name != name || id.SHA256 != hex.EncodeToString(sum[:]) {
		t.Errorf("identity %+v, name %q; want model.safetensors, sha256 %x", id, name, sum)
	}
	if m.Classes != want.Classes {
		t.Errorf("%d classes, want %d", m.Classes, want.Classes)
	}
	_, name, id, err = loadModel("")
	sum = sha256.Sum256(fixtures.DefaultModel)
	if err != nil || name != fixtures.DefaultModelName || id.Name != name || id.SHA256 != hex.EncodeToString(sum[:]) {
		t.Errorf("embedded: identity %+v, name %q, %v", id, name, err)
	}
}

// A label's codes (category and type, for DICOM SEG segments) show on its line; a label
// without them shows none.
func TestModelInfoShowsLabelCodes(t *testing.T) {
	t.Parallel()
	coded := strings.Replace(cardJSON, `"color":"#808080"}`, `"color":"#808080",
"category":{"scheme":"SCT","value":"91723000","meaning":"Anatomical Structure"},
"type":{"scheme":"SCT","value":"85756007","meaning":"Tissue"}}`, 1)
	coded = strings.Replace(coded, `"color":"#ffffff"}`, `"color":"#ffffff","type":{"scheme":"99VOXTEST","value":"W1","meaning":"White matter"}}`, 1)
	code, out, stderr := cliRun(t, "model", "info", writeModel(t, coded))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	lines := strings.Split(out, "\n")
	for _, want := range []struct{ label, codes string }{
		{"1 grey", "#808080  SCT 91723000 Anatomical Structure / SCT 85756007 Tissue"},
		{"2 white", "#ffffff  type 99VOXTEST W1 White matter"},
		{"0 background", "#000000"},
	} {
		found := false
		for _, l := range lines {
			if strings.Contains(l, want.label) {
				found = true
				if !strings.HasSuffix(l, want.codes) {
					t.Errorf("label line %q does not end in %q", l, want.codes)
				}
			}
		}
		if !found {
			t.Errorf("model info has no line for %q:\n%s", want.label, out)
		}
	}

	// The embedded default model's card codes its three segments in SNOMED CT.
	code, out, stderr = cliRun(t, "model", "info")
	for _, want := range []string{
		"1 tissue       #3cb44b  SCT 91723000 Anatomical Structure / SCT 85756007 Tissue",
		"2 fluid        #4363d8  SCT 91723000 Anatomical Structure / SCT 35764002 Cerebral ventricle",
		"3 lesion       #e6194b  SCT 49755003 Morphologically Altered Structure / SCT 52988006 Lesion",
	} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("model info of the default: exit %d, lacks %q:\n%s%s", code, want, out, stderr)
		}
	}
	if strings.Contains(out, "0 background   #000000  ") {
		t.Errorf("the default's background has codes:\n%s", out)
	}
}
