package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"

	"voxpipe/engine/cpu"
	"voxpipe/engine/engine"
	"voxpipe/io/nifti"
	"voxpipe/model"
)

// ---- the card's training statistics ----

func card(args []string) error {
	fs := flag.NewFlagSet("card", flag.ExitOnError)
	in := fs.String("model", "", "weights file with a card")
	train := fs.String("train", "", "training folder (voxpipe gen layout)")
	out := fs.String("o", "", "weights file to write")
	fovTol := fs.Float64("fov-tolerance", 1.5, "field of view factor (Domain.FOVTolerance)")
	widen := fs.Float64("widen", 1, "each training range is widened by this times its own width on each side (fractions: by this power of their ratio, at least 1.5; the histogram excess: times 1+widen)")
	fs.Parse(args)
	if *in == "" || *train == "" || *out == "" {
		return errors.New("card: -model, -train and -o are required")
	}
	m, err := model.LoadModel(*in)
	if err != nil {
		return err
	}
	if m.Card == nil {
		return fmt.Errorf("card: %s has no card to add to", *in)
	}
	files, err := filepath.Glob(filepath.Join(*train, "volumes", "*.nii*"))
	if err != nil || len(files) == 0 {
		return fmt.Errorf("card: no volumes in %s/volumes", *train)
	}
	sort.Strings(files)
	d := &m.Card.Domain
	hists, confs, err := trainingStats(m, files)
	if err != nil {
		return err
	}
	d.FOVTolerance = *fovTol
	histogramDomain(d, hists, *widen)
	k := confidenceDomain(m, confs, *widen)
	d.Confidence = k
	fmt.Printf("card: fov %v..%v mm (x/%g); histogram_max_excess %v; mean margin [%v, %v]; low_margin_max %v; label fractions %v..%v\n",
		d.FOVMinMM, d.FOVMaxMM, d.FOVTolerance, d.HistogramMaxExcess, k.MeanMarginMin, k.MeanMarginMax, k.LowMarginMax, k.LabelFractionMin, k.LabelFractionMax)
	b, err := m.MarshalSafetensors()
	if err != nil {
		return err
	}
	return os.WriteFile(*out, b, 0o644)
}

// trainingStats runs m's CPU engine on the training volumes files: it sets the card's field
// of view range to theirs, and returns each one's intensity histogram and confidence.
func trainingStats(m *model.Model, files []string) ([][]float64, []model.Confidence, error) {
	eng := cpu.New(m, 0)
	d := &m.Card.Domain
	d.FOVMinMM, d.FOVMaxMM = []float64{math.Inf(1), math.Inf(1), math.Inf(1)}, []float64{0, 0, 0}
	var hists [][]float64
	var confs []model.Confidence
	for _, f := range files {
		h, data, err := nifti.ReadFloat32(f)
		if err != nil {
			return nil, nil, err
		}
		if h.QformCode == 0 && h.SformCode == 0 {
			return nil, nil, fmt.Errorf("card: %s: no orientation", f)
		}
		// Training phantoms are RAS and at the card's spacing: the model reads them as stored.
		mm := h.Affine().VoxelSizes()
		n := [3]int{h.NX(), h.NY(), h.NZ()}
		for a := range 3 {
			fov := float64(n[a]) * mm[a] * h.MMPerUnit()
			d.FOVMinMM[a], d.FOVMaxMM[a] = math.Min(d.FOVMinMM[a], fov), math.Max(d.FOVMaxMM[a], fov)
		}
		var st model.Stats
		st.AddFloat32(data)
		mu, sigma := st.MeanStd(1, 0)
		v := &model.Volume{NX: n[0], NY: n[1], NZ: n[2], F32: data, Norm: model.NormFor(mu, sigma, 1, 0)}
		_, hist := model.VolumeIntensity(v)
		hists = append(hists, hist)
		var c model.Confidence
		if err := eng.Segment(context.Background(), v, make([]uint8, len(data)), engine.Options{Slab: 32, Confidence: &c}); err != nil {
			return nil, nil, err
		}
		confs = append(confs, c)
		fmt.Printf("%s: margin %.3f low %.4f labels %v\n", filepath.Base(f), c.MeanMargin(), c.LowFraction(), c.Labels)
	}
	return hists, confs, nil
}

// histogramDomain sets the card's histogram fields from the training histograms.
func histogramDomain(d *model.Domain, hists [][]float64, widen float64) {
	// The envelope of the training histograms, and how far each training volume exceeds the
	// envelope of the others (leave one out): the threshold is the largest such excess,
	// widened.
	envelope := func(skip int) []float64 {
		env := make([]float64, model.HistogramBins)
		for j, h := range hists {
			for i, v := range h {
				if j != skip {
					env[i] = math.Max(env[i], v)
				}
			}
		}
		return env
	}
	loo := 0.0
	for j, h := range hists {
		loo = math.Max(loo, model.HistogramExcess(h, envelope(j)))
	}
	env := envelope(-1)
	for i := range env {
		env[i] = round(env[i], 1e-6)
	}
	d.HistogramMax, d.HistogramMaxExcess = env, round(loo*(1+widen), 1e-3)
	fmt.Printf("training histogram excess over the others' envelope <= %.4f -> histogram_max_excess %v\n", loo, d.HistogramMaxExcess)
}

// confidenceDomain is the card's confidence ranges: the training volumes' ranges, widened.
func confidenceDomain(m *model.Model, confs []model.Confidence, widen float64) *model.ConfidenceDomain {
	span := func(name string, f func(model.Confidence) float64) (float64, float64) {
		lo, hi := math.Inf(1), math.Inf(-1)
		for _, c := range confs {
			lo, hi = math.Min(lo, f(c)), math.Max(hi, f(c))
		}
		fmt.Printf("training %s [%.5g, %.5g]\n", name, lo, hi)
		return lo, hi
	}
	k := &model.ConfidenceDomain{}
	mlo, mhi := span("mean margin", model.Confidence.MeanMargin)
	k.MeanMarginMin, k.MeanMarginMax = round(math.Max(0, mlo-widen*(mhi-mlo)), 1e-3), round(mhi+widen*(mhi-mlo), 1e-3)
	llo, lhi := span("low-margin fraction", model.Confidence.LowFraction)
	k.LowMarginMax = round(math.Min(1, lhi+widen*(lhi-llo)), 1e-5)
	for l := range m.Classes {
		flo, fhi := span(fmt.Sprintf("label %d fraction", l), func(c model.Confidence) float64 { return c.LabelFraction(l) })
		r := math.Pow(math.Max(1.5, fhi/flo), widen)
		if flo == 0 {
			r = 1
		}
		k.LabelFractionMin = append(k.LabelFractionMin, round(flo/r, 1e-6))
		k.LabelFractionMax = append(k.LabelFractionMax, round(math.Min(1, fhi*r), 1e-6))
	}
	return k
}

// round rounds v to a multiple of unit, as the shortest decimal that is (so the card's JSON
// holds 0.1238, not 0.12380000000000001).
func round(v, unit float64) float64 {
	digits := max(0, int(math.Ceil(-math.Log10(unit))))
	r, _ := strconv.ParseFloat(strconv.FormatFloat(math.Round(v/unit)*unit, 'f', digits, 64), 64)
	return r
}
