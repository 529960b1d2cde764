package pipeline

import (
	"context"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unsafe"
	"voxpipe/engine/cpu"
	"voxpipe/engine/engine"

	"voxpipe/fixtures"
	"voxpipe/io/nifti"
	"voxpipe/model"
	"voxpipe/phantom"
)

// writePhantom writes phantom seed (96x96x64, the default model's training size) to path, its
// labels' voxels given other intensities when hu is set (mean by label: background, tissue,
// fluid, lesion; plus a little noise): the head's anatomy, shape, size and spacing, in CT's
// Hounsfield units or another contrast.
func writePhantom(t *testing.T, path string, seed uint64, hu *[4]float64) {
	t.Helper()
	ph, err := phantom.Generate(phantom.Params{NX: 96, NY: 96, NZ: 64, Seed: seed})
	if err != nil {
		t.Fatal(err)
	}
	if hu != nil {
		for i, l := range ph.Truth {
			ph.Image[i] = int16(hu[l]) + int16(i*7919%11) - 5
		}
	}
	if err := nifti.Write(path, ph.Header, ph.ImageBytes(), nifti.WriteOptions{Level: 1}); err != nil {
		t.Fatal(err)
	}
}

// TestRunDomainVerdicts runs the default model (CPU engine, its card) on a phantom of its
// training distribution and on foreign volumes of the same anatomy, size and spacing: a CT
// (Hounsfield units) and a T2-like contrast (fluid bright, lesions dark). Each got "ok" from the
// quantile and spacing checks alone. Now the foreign ones are out of domain in summary.csv and
// keep their masks; with StrictDomain they fail, without a mask, and the phantom is done.
func TestRunDomainVerdicts(t *testing.T) {
	t.Parallel()
	if raceEnabled {
		t.Skip("the CPU engine on four phantoms takes minutes under the race detector; TestRunStrictDomainAfterSegmentation covers the stages")
	}
	if testing.Short() {
		t.Skip("-short: the CPU engine on six phantoms takes ~20 s (the full run, CI's, has it); TestRunStrictDomainAfterSegmentation covers the stages")
	}
	m, err := model.ParseModel(fixtures.DefaultModel)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	b := &batch{in: filepath.Join(dir, "in"), out: filepath.Join(dir, "out")}
	os.MkdirAll(b.in, 0o755)
	writePhantom(t, filepath.Join(b.in, "phantom.nii"), 77, nil)
	writePhantom(t, filepath.Join(b.in, "ct.nii"), 78, &[4]float64{-1000, 40, 8, 70})
	writePhantom(t, filepath.Join(b.in, "t2.nii"), 79, &[4]float64{0, 600, 1500, 300})
	eng := cpu.New(m, 0)
	withModel := func(strict bool) func(*Config) {
		return func(c *Config) {
			c.Prepare.Card, c.Output.Classes, c.Prepare.Resample, c.Prepare.StrictDomain, c.Workers.Slab = m.Card, m.Classes, true, strict, 16
		}
	}
	out := runBatch(t, context.Background(), b, eng, withModel(false))
	if out.err != nil {
		t.Fatal(out.err)
	}
	rows := statusByVolume(out.summary)
	if r := rows["phantom"]; r.Status != "ok" || r.Domain != string(model.DomainOK) || !strings.Contains(r.DomainEvidence, "margin ") {
		t.Errorf("phantom: %s, domain %q, evidence %q; want ok, ok and the model's confidence", r.Status, r.Domain, r.DomainEvidence)
	}
	for _, name := range []string{"ct", "t2"} {
		r := rows[name]
		if r.Status != "ok" || model.ParseVerdictLevel(r.Domain) != model.DomainOutOfDomain || !strings.Contains(r.Domain, "intensity unlike training") {
			t.Errorf("%s: %s, domain %q; want its mask and out-of-domain for its intensity", name, r.Status, r.Domain)
		}
		if _, err := os.Stat(filepath.Join(b.out, name+"_mask.nii.gz")); err != nil {
			t.Errorf("%s: no mask without StrictDomain: %v", name, err)
		}
	}

	b.out = filepath.Join(dir, "strict")
	out = runBatch(t, context.Background(), b, eng, withModel(true))
	rows = statusByVolume(out.summary)
	if r := rows["phantom"]; r.Status != "ok" {
		t.Errorf("strict: phantom %s (%s)", r.Status, r.Error)
	}
	for _, name := range []string{"ct", "t2"} {
		r := rows[name]
		if r.Status != "failed" || !strings.Contains(r.Error, ErrOutOfDomain.Error()) || model.ParseVerdictLevel(r.Domain) != model.DomainOutOfDomain {
			t.Errorf("strict: %s %s, error %q, domain %q; want failed out of domain", name, r.Status, r.Error, r.Domain)
		}
		if _, err := os.Stat(filepath.Join(b.out, name+"_mask.nii.gz")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("strict: %s has a mask (%v)", name, err)
		}
	}
	if out.res.Failed != 2 || out.res.OK != 1 {
		t.Errorf("strict: result %+v, want 1 ok and 2 failed", out.res)
	}
}

// confEngine is signEngine reporting a confidence: margin logits of mean foreground margin
// over the voxels it labels 1 or 2.
type confEngine struct {
	signEngine
	margin float64
}

func (e *confEngine) Segment(ctx context.Context, vol *model.Volume, out []uint8, opt engine.Options) error {
	if err := e.signEngine.Segment(ctx, vol, out, opt); err != nil {
		return err
	}
	if c := opt.Confidence; c != nil {
		*c = model.Confidence{Voxels: int64(len(out)), Labels: make([]int64, 3)}
		for _, l := range out {
			c.Labels[l]++
		}
		c.MarginVoxels = c.Labels[1] + c.Labels[2]
		c.MarginSum = int64(e.margin*model.MarginScale) * c.MarginVoxels
	}
	return nil
}

// TestRunStrictDomainAfterSegmentation: a volume whose input is in domain but on which the
// model's confidence is not is judged once segmented, before its mask is committed: with
// StrictDomain it fails, and neither its mask nor a temporary file is left; without, it keeps
// its mask and the verdict says why. A volume whose confidence is in domain is done either way.
func TestRunStrictDomainAfterSegmentation(t *testing.T) {
	t.Parallel()
	card := &model.Card{Name: "t", Version: "1", SpacingMM: [3]float64{1, 1, 1.5}, Orientation: "RAS",
		Normalization: model.NormZScore, Labels: []model.Label{{Value: 0, Name: "bg", Color: "#000000"}, {Value: 1, Name: "a", Color: "#ff0000"}, {Value: 2, Name: "b", Color: "#00ff00"}},
		Domain: model.Domain{SpacingMinMM: [3]float64{1, 1, 1.5}, SpacingMaxMM: [3]float64{1, 1, 1.5},
			QuantileLevels: model.QuantileLevels, QuantileMin: make([]float64, 7), QuantileMax: make([]float64, 7), QuantileTolerance: 10,
			Confidence: &model.ConfidenceDomain{MeanMarginMin: 4, MeanMarginMax: 12, LowMarginMax: 1,
				LabelFractionMin: []float64{0, 0, 0}, LabelFractionMax: []float64{1, 1, 1}}}}
	if err := card.Validate(3); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		margin float64
		strict bool
		ok     bool
	}{{"sure", 8, true, true}, {"unsure strict", 2, true, false}, {"unsure", 2, false, true}} {
		b := newBatch(t, 1)
		out := runBatch(t, context.Background(), b, &confEngine{margin: c.margin}, func(cfg *Config) {
			cfg.Prepare.Card, cfg.Prepare.StrictDomain = card, c.strict
		})
		r := statusByVolume(out.summary)["vola"]
		_, statErr := os.Stat(filepath.Join(b.out, "vola_mask.nii.gz"))
		switch {
		case c.ok && (r.Status != "ok" || statErr != nil):
			t.Errorf("%s: %s (%s), mask %v; want ok with its mask", c.name, r.Status, r.Error, statErr)
		case !c.ok && (r.Status != "failed" || !strings.Contains(r.Error, ErrOutOfDomain.Error()) || !errors.Is(statErr, os.ErrNotExist)):
			t.Errorf("%s: %s (%s), mask %v; want failed out of domain, no mask", c.name, r.Status, r.Error, statErr)
		}
		assertNoTemporaries(t, b.out)
		wantDomain := "ok"
		if c.margin < 4 {
			wantDomain = "out-of-domain: model less sure than in training: mean foreground margin 2.00 logits < 4.00"
		}
		if r.Domain != wantDomain || !strings.Contains(r.DomainEvidence, "margin ") {
			t.Errorf("%s: domain %q, evidence %q; want %q", c.name, r.Domain, r.DomainEvidence, wantDomain)
		}
	}
}

// TestRunDomainNamesTheVolumeSegmented: with Config.Volume 2 of a 3-volume file, the domain
// warning names volume 2, the one segmented (it said "only volume 0 of 3 is segmented").
func TestRunDomainNamesTheVolumeSegmented(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	b := &batch{in: filepath.Join(dir, "in"), out: filepath.Join(dir, "out")}
	os.MkdirAll(b.in, 0o755)
	const nx, ny, nz, nt = 9, 7, 5, 3
	vals := make([]int16, nx*ny*nz*nt)
	for i := range vals {
		vals[i] = int16(i % 301)
	}
	h := &nifti.Header{Version: 1, ByteOrder: binary.LittleEndian, Datatype: nifti.Int16, BitPix: 16,
		Dim: [8]int64{4, nx, ny, nz, nt, 1, 1, 1}, PixDim: [8]float64{1, 1, 1, 1, 1}, SclSlope: 1,
		QformCode: 1, SformCode: 1, SrowX: [4]float64{1, 0, 0, 0}, SrowY: [4]float64{0, 1, 0, 0},
		SrowZ: [4]float64{0, 0, 1, 0}, XYZTUnits: 10, Magic: "n+1"}
	raw := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(vals))), 2*len(vals))
	if err := nifti.Write(filepath.Join(b.in, "fmri.nii"), h, raw, nifti.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	volume := 2
	out := runBatch(t, context.Background(), b, &signEngine{}, func(c *Config) { c.Input.Volume = &volume })
	r := statusByVolume(out.summary)["fmri"]
	if r.Status != "ok" || !strings.Contains(r.Domain, "4 dimensions: volume 2 of 3 is segmented") {
		t.Errorf("fmri: %s (%s), domain %q; want ok, naming volume 2 of 3", r.Status, r.Error, r.Domain)
	}
	if model.ParseVerdictLevel(r.Domain) != model.DomainWarn {
		t.Errorf("fmri: domain %q, want a warning", r.Domain)
	}
}
