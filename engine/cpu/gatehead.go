package cpu

import (
	"math"
	"voxpipe/model"
)

// The gate and the head: gateHeadRow is the reference, gateHeadRowVector the same arithmetic
// with the vector kernels (gateAVX2, headAVX2: 8 voxels in the lanes of a register).

func relu(v float32) float32 {
	if v > 0 {
		return v
	}
	return 0
}

// dotAdd returns acc + sum of w[i]*v[i] over v, in order, each product rounded.
func dotAdd(acc float32, w, v []float32) float32 {
	w = w[:len(v)]
	for i, x := range v {
		acc += float32(w[i] * x)
	}
	return acc
}

// sigmoid is computed in float64 and rounded once, so it is as exact as float32 allows.
func sigmoid(v float32) float32 {
	return float32(1 / (1 + math.Exp(-float64(v))))
}

// gatePre is psi(relu(wx(s) + wg(g))) at one voxel: the gate before its sigmoid.
func gatePre(m *model.Model, sv, gv []float32) float32 {
	c := len(sv)
	p := m.PsiB[0]
	for j := range m.Gate() {
		ax := dotAdd(m.WXB[j], m.WXW[j*c:], sv)
		ag := dotAdd(m.WGB[j], m.WGW[j*c:], gv)
		p += float32(m.PsiW[j] * relu(ax+ag))
	}
	return p
}

// gateHeadRow finishes a row from s and g: q = relu(wx(s) + wg(g)), a = sigmoid(psi(q)),
// f = a*s + g, logits = head(f), label = first argmax; the labels, and on a sampled plane
// (MarginPlane) the foreground's margins, go to the worker's Confidence.
func (e *Engine) gateHeadRow(out []uint8, ws *workerScratch, sampled bool) {
	m := e.m
	c, cp := e.c, e.cp
	f := ws.f[:c]
	conf := &ws.conf
	conf.Voxels += int64(len(out))
	for x := range out {
		sv := ws.s[x*cp : x*cp+c]
		gv := ws.g[x*cp : x*cp+c]
		a := sigmoid(gatePre(m, sv, gv))
		gv = gv[:len(sv)]
		for i, v := range sv {
			f[i] = float32(a*v) + gv[i]
		}
		best, second, label := float32(0), float32(math.Inf(-1)), 0
		for k := range e.k {
			best, second, label = argmaxStep(k, dotAdd(m.HeadB[k], m.HeadW[k*c:], f), best, second, label)
		}
		out[x] = uint8(label)
		tally(conf, label, best, second, sampled)
	}
}

// argmaxStep folds class k's logit l into the best logit, the second best and the label so
// far (the first class starts them): the first of equal maxima wins.
func argmaxStep(k int, l, best, second float32, label int) (float32, float32, int) {
	switch {
	case k == 0:
		return l, second, label
	case l > best:
		return l, best, k
	case l > second:
		return best, l, label
	}
	return best, second, label
}

// tally counts a voxel's label in conf and, on a sampled plane, the foreground's margin.
func tally(conf *model.Confidence, label int, best, second float32, sampled bool) {
	conf.Labels[label]++
	if sampled && label > 0 {
		u := model.MarginUnits(best - second)
		conf.MarginVoxels++
		conf.MarginSum += u
		if u < model.LowMarginUnits {
			conf.LowMargin++
		}
	}
}

// vectorHead says whether the engine runs gateHeadRowVector: with any vector kernels.
func (e *Engine) vectorHead() bool { return e.kern != kernelsGo }

// transposedLen is the float32s gateHeadRowVector needs for a row of nx voxels: s and g
// transposed (cp channels), the gate's values and the logits, each channel or class rounded up
// to 8 voxels.
func (e *Engine) transposedLen(nx int) int {
	return (2*e.cp + 1 + e.k) * ((nx + 7) &^ 7)
}

// gateHeadRowVector is gateHeadRow with the vector kernels, bit for bit: s and g (rows of nx
// rounded up to 8 voxels: the lanes after nx compute what is never read) transposed to
// [channel][x] (transposeAVX2), the gate (gateAVX2), the sigmoid in Go, f and the logits
// (headAVX2), then the argmax and the tally per voxel in Go.
func (e *Engine) gateHeadRowVector(out []uint8, ws *workerScratch, sampled bool) {
	cp, k, nx := e.cp, e.k, len(out)
	n := (nx + 7) &^ 7
	t := ws.t[:e.transposedLen(nx)]
	sT, gT, a, l := t[:cp*n], t[cp*n:2*cp*n], t[2*cp*n:(2*cp+1)*n], t[(2*cp+1)*n:]
	transposeVector(sT, ws.s, cp, n, n)
	transposeVector(gT, ws.g, cp, n, n)
	gateVector(a, sT, gT, e.m, n, n)
	for x, p := range a[:nx] {
		a[x] = sigmoid(p)
	}
	headVector(l, sT, gT, a, e.m, n, n)
	conf := &ws.conf
	conf.Voxels += int64(nx)
	for x := range out {
		best, second, label := float32(0), float32(math.Inf(-1)), 0
		for j := range k {
			best, second, label = argmaxStep(j, l[j*n+x], best, second, label)
		}
		out[x] = uint8(label)
		tally(conf, label, best, second, sampled)
	}
}
