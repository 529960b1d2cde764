package pipeline

import (
	"errors"
	"fmt"
	"time"

	"voxpipe/geometry"
	"voxpipe/io/nifti"
	"voxpipe/model"
	"voxpipe/stage"
)

// The prepare step ends the read stage: it checks the volume against the model's domain
// (model.CheckDomain, summary.csv's domain and domain_evidence columns) on what the input
// shows, and, when the volume is not stored the way
// the model was trained, makes the model's view of it (gridPlan): reoriented to the card's
// orientation by permutations and flips, and resampled to the card's spacing when
// Config.Resample allows and it differs by more than geometry.SpacingTolerance. The engine then
// segments that view (work.prep.model), and the restore step (segment.go) brings its labels back to
// the input's grid, so the mask always has the input's exact geometry. Once segmented, the
// check is made again with the model's confidence on the volume (concludeDomain), before the
// mask is committed; its verdict is the volume's.

// ErrOutOfDomain fails a volume judged out of domain (model.DomainOutOfDomain), under
// Config.StrictDomain: as soon as its input shows it, or once the model's confidence does,
// before its mask is committed. Warnings never fail a volume.
var ErrOutOfDomain = errors.New("pipeline: volume outside the model's domain (--strict-domain)")

// domainState is what the domain check keeps of a volume from its read to its end.
type domainState struct {
	// Warnings are the reader's warnings about the input (e.g. a non-finite scl_slope): each
	// makes the verdict at least a warning. The read stage appends them, before prepare.
	Warnings []string
	in       model.DomainInput // the input's evidence (prepare)
	conf     model.Confidence  // the engine's confidence on the model's view (Options.Confidence)
}

// gridPlan is how one volume is brought to the model's grid.
type gridPlan struct {
	ro     geometry.Reorient
	rs     *geometry.Resample // nil: not resampled
	from   string             // the input's closest canonical orientation
	to     string             // the model's
	inMM   [3]float64         // the input's voxel size along the model's axes
	seenMM [3]float64         // what the model sees: inMM, or the resampled size
	// oriented: the header gives an orientation (qform or sform); without one the voxel axes
	// are taken as they come (NIfTI's method 1: RAS).
	oriented bool
}

// identity reports whether the model reads the volume as stored.
func (p *gridPlan) identity() bool { return p.ro.Identity() && p.rs == nil }

// inPlace reports whether the model's view is the volume with x and/or y reversed (LAS, LPS,
// RPS to RAS, the common cases): the input buffer is flipped in place, the engine's labels go
// to the writer slab by slab as for a volume read as stored, and the writer flips each range
// of planes back before writing it. No copy, and the engine keeps its pinned input.
func (p *gridPlan) inPlace() bool { return p != nil && p.rs == nil && p.ro.InPlaceXY() }

// modelDims are the dims of the model's view.
func (p *gridPlan) modelDims() [3]int {
	if p.rs != nil {
		return p.rs.Out
	}
	return p.ro.OutDims()
}

// modelVoxels is the size of the model's view.
func (p *gridPlan) modelVoxels() int64 {
	d := p.modelDims()
	return int64(d[0]) * int64(d[1]) * int64(d[2])
}

// String is summary.csv's grid column: "RAS", "LPS->RAS", "RAS 1x1x1->2.5x2.5x3 mm"...
func (p *gridPlan) String() string {
	if p == nil {
		return ""
	}
	s := p.from
	if !p.ro.Identity() {
		s += "->" + p.to
	}
	if p.rs != nil {
		s += fmt.Sprintf(" %s->%s mm", mmString(p.inMM), mmString(p.seenMM))
	}
	return s
}

func mmString(s [3]float64) string { return fmt.Sprintf("%.3gx%.3gx%.3g", s[0], s[1], s[2]) }

// planFor works out the model's view of a volume from its header alone: the producer makes
// it (work.prep.plan), for the rerun check, the memory budget and the prepare step.
func (c Prepare) planFor(h *nifti.Header) (*gridPlan, error) {
	card := c.Card
	dims := [3]int{h.NX(), h.NY(), h.NZ()}
	p := &gridPlan{to: geometry.Canonical, oriented: h.QformCode > 0 || h.SformCode > 0}
	if card != nil {
		p.to = card.Orientation
	}
	a := h.Affine()
	from, err := geometry.Axcodes(a)
	if err != nil {
		return nil, fmt.Errorf("orientation: %w", err)
	}
	p.from = from
	if p.ro, err = geometry.NewReorient(from, p.to, dims); err != nil {
		return nil, err
	}
	var mm [3]float64
	for i, s := range a.VoxelSizes() {
		mm[i] = s * h.MMPerUnit()
	}
	p.inMM = p.ro.Spacing(mm)
	p.seenMM = p.inMM
	if c.Resample && card != nil && geometry.NeedsResample(p.inMM, card.SpacingMM) {
		if p.rs, err = geometry.NewResample(p.ro.OutDims(), p.inMM, card.SpacingMM); err != nil {
			return nil, err
		}
		p.seenMM = p.rs.OutSpacing(p.inMM)
	}
	return p, nil
}

// prepareBytes is the heap memory the model's view takes at its peak: the reoriented copy (when
// the volume is reoriented), the resampled image with the intermediate volumes of its passes
// (when it is resampled), and the mask on the model's grid.
func (p *gridPlan) prepareBytes(h *nifti.Header) int64 {
	if p == nil || p.identity() || p.inPlace() {
		return 0
	}
	var b int64
	if !p.ro.Identity() {
		d := p.ro.In
		sample := int64(4)
		if nifti.Int16Exact(h.Datatype) {
			sample = 2
		}
		b += int64(d[0]) * int64(d[1]) * int64(d[2]) * sample
	}
	if p.rs != nil {
		b += p.rs.ImageBytes()
	}
	return b + p.modelVoxels()
}

// prepare checks the domain and makes the model's view of the volume (see the top of this
// file).
func (r *readers) prepare(w *work, track string) error {
	start := time.Now()
	if w.prep.plan == nil && w.prep.planErr == nil { // read without the producer (ReadAll)
		w.prep.plan, w.prep.planErr = r.cfg.Prepare.planFor(w.src.hdr)
	}
	if w.prep.planErr != nil {
		return fmt.Errorf("read %s: %w", w.job.Input, w.prep.planErr)
	}
	p := w.prep.plan
	w.rec.sum.Grid = p.String()
	in := model.DomainInput{
		Dims: int(w.src.hdr.Dim[0]), Volumes: w.src.hdr.Volumes(), SpacingMM: p.seenMM, Resampled: p.rs != nil, ModelDims: p.modelDims(),
		Orientation: p.oriented, Constant: w.prep.flat, Warnings: w.prep.dom.Warnings,
	}
	if r.cfg.Input.Volume != nil {
		in.Volume = int64(*r.cfg.Input.Volume)
	}
	dims := p.ro.OutDims()
	for a := range 3 {
		in.FOVMM[a] = float64(dims[a]) * p.inMM[a]
	}
	in.Quantiles, in.Histogram = model.VolumeIntensity(&w.vol)
	w.prep.dom.in = in
	verdict := model.CheckDomain(r.cfg.Prepare.Card, in)
	w.rec.sum.Domain, w.rec.sum.DomainEvidence = verdict.String(), in.Evidence(r.cfg.Prepare.Card)
	if r.cfg.Prepare.StrictDomain && verdict.Level() == model.DomainOutOfDomain {
		return fmt.Errorf("%s: %w: %s", w.job.Input, ErrOutOfDomain, w.rec.sum.Domain)
	}
	switch {
	case p.inPlace():
		flipVolume(&w.vol, p)
	case !p.identity():
		r.makeModelView(w)
	}
	r.rec.span(w, span{stage: stage.Prepare, slab: -1, device: stage.Host, track: track,
		start: start, end: time.Now(), voxels: int64(w.vol.NX) * int64(w.vol.NY) * int64(w.vol.NZ)})
	return nil
}

// concludeDomain makes the domain check again with the model's confidence on the volume, once
// the engine has segmented it without error: the volume's verdict, logged when it is not ok.
// Under Config.StrictDomain an out-of-domain verdict is the volume's error (its mask is not
// committed).
func (r *engines) concludeDomain(w *work) error {
	in := w.prep.dom.in
	conf := w.prep.dom.conf
	in.Confidence = &conf
	verdict := model.CheckDomain(r.cfg.Prepare.Card, in)
	w.rec.mu.Lock()
	w.rec.sum.Domain, w.rec.sum.DomainEvidence = verdict.String(), in.Evidence(r.cfg.Prepare.Card)
	domain, evidence := w.rec.sum.Domain, w.rec.sum.DomainEvidence
	w.rec.mu.Unlock()
	if verdict.OK() {
		return nil
	}
	r.log.Warn("domain check", "volume", w.job.Name, "verdict", string(verdict.Level()), "domain", domain, "evidence", evidence)
	if r.cfg.Prepare.StrictDomain && verdict.Level() == model.DomainOutOfDomain {
		return fmt.Errorf("%w: %s", ErrOutOfDomain, domain)
	}
	return nil
}

// makeModelView fills w.prep.model (and an empty w.prep.modelMask) from w.vol by w.prep.plan.
func (r *readers) makeModelView(w *work) {
	p := w.prep.plan
	if r.mem.budget != nil { // admit reserved it (volumeNeeds)
		w.prep.modelBytes = p.prepareBytes(w.src.hdr)
		w.mem.reserved -= w.prep.modelBytes
	}
	n := len(w.vol.I16) + len(w.vol.F32)
	out := p.ro.OutDims()
	view := model.Volume{NX: out[0], NY: out[1], NZ: out[2], Norm: w.vol.Norm}
	switch {
	case p.ro.Identity(): // resampled from the input buffer itself
		view.I16, view.F32 = w.vol.I16, w.vol.F32
	case w.vol.I16 != nil:
		view.I16 = make([]int16, n)
		geometry.Apply(p.ro, view.I16, w.vol.I16)
	default:
		view.F32 = make([]float32, n)
		geometry.Apply(p.ro, view.F32, w.vol.F32)
	}
	if p.rs != nil {
		var f []float32
		if view.I16 != nil {
			f = geometry.Image(p.rs, view.I16)
		} else {
			f = geometry.Image(p.rs, view.F32)
		}
		// Normalised over the resampled values, as the model would see a volume stored at
		// its spacing; stored-value units, so the scaling still applies.
		var st model.Stats
		st.AddFloat32(f)
		slope, inter := w.src.hdr.EffectiveScaling()
		view = model.Volume{NX: p.rs.Out[0], NY: p.rs.Out[1], NZ: p.rs.Out[2], F32: f, Norm: st.Norm(slope, inter)}
	}
	w.prep.model = &view
	w.prep.modelMask = make([]uint8, p.modelVoxels())
}

// flipVolume reverses vol's x and/or y axis in place, as plan p says (inPlace); twice is the
// identity.
func flipVolume(vol *model.Volume, p *gridPlan) {
	if vol.I16 != nil {
		geometry.FlipXY(vol.I16, vol.NX, vol.NY, p.ro.Flip[0], p.ro.Flip[1])
	} else {
		geometry.FlipXY(vol.F32, vol.NX, vol.NY, p.ro.Flip[0], p.ro.Flip[1])
	}
}
