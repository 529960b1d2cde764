package phantom

import "math"

// lesionEdge is how much of its contrast a lesion keeps at its edge.
const lesionEdge = 0.3

// candidate is a blob that may touch a row, with the x range it may touch.
type candidate struct {
	b      *blob
	x0, x1 int
}

// planeScratch is one worker's reusable state; nothing in it is a volume-sized buffer.
type planeScratch struct {
	planeFluids, planeLesions []*blob
	rowFluids, rowLesions     []candidate
	biasCoef, texCoef         []float64
}

func newPlaneScratch(sc *scene) *planeScratch {
	return &planeScratch{biasCoef: make([]float64, sc.bias.coefLen()), texCoef: make([]float64, sc.texture.coefLen())}
}

// nearPlane keeps the blobs whose bounding sphere reaches plane z.
func nearPlane(dst []*blob, blobs []blob, z float64) []*blob {
	dst = dst[:0]
	for i := range blobs {
		if math.Abs(blobs[i].c[2]-z) <= blobs[i].reach {
			dst = append(dst, &blobs[i])
		}
	}
	return dst
}

// nearRow keeps the blobs whose bounding sphere reaches row (y, z), with their x range.
func nearRow(dst []candidate, blobs []*blob, y, z float64, nx int) []candidate {
	dst = dst[:0]
	for _, b := range blobs {
		dy, dz := b.c[1]-y, b.c[2]-z
		h2 := b.reach*b.reach - dy*dy - dz*dz
		if h2 < 0 {
			continue
		}
		h := math.Sqrt(h2)
		x0, x1 := max(0, int(math.Ceil(b.c[0]-h))), min(nx-1, int(math.Floor(b.c[0]+h)))
		if x0 <= x1 {
			dst = append(dst, candidate{b, x0, x1})
		}
	}
	return dst
}

// renderPlane writes plane z of the image and the truth. It depends on nothing but the scene
// and z, which is what makes the output independent of the number of workers.
func (sc *scene) renderPlane(z int, img []int16, truth []uint8, w *planeScratch) {
	pz := float64(z)
	w.planeFluids = nearPlane(w.planeFluids, sc.fluids, pz)
	w.planeLesions = nearPlane(w.planeLesions, sc.lesions, pz)
	for y := range sc.ny {
		py := float64(y)
		w.rowFluids = nearRow(w.rowFluids, w.planeFluids, py, pz, sc.nx)
		w.rowLesions = nearRow(w.rowLesions, w.planeLesions, py, pz, sc.nx)
		sc.bias.rowCoef(y, z, w.biasCoef)
		sc.texture.rowCoef(y, z, w.texCoef)
		row := (z*sc.ny + y) * sc.nx
		for x := range sc.nx {
			signal, label := sc.voxel(x, py, pz, w)
			img[row+x] = rician(signal, sc.sigma, voxelHash(sc.noiseKey, uint64(row+x)))
			truth[row+x] = label
		}
	}
}

// voxel returns the noise-free signal and the true class at (x, py, pz). Classes come from
// the geometry at the voxel centre; the signal mixes the classes by partial volume.
func (sc *scene) voxel(x int, py, pz float64, w *planeScratch) (float64, uint8) {
	px := float64(x)
	dh := sc.head.dist(px, py, pz, pvHalf, sc.headInner)
	if dh >= pvHalf {
		return 0, Background
	}
	label := Background
	if dh < 0 {
		label = Tissue
	}
	tex := sc.texture.at(x, w.texCoef)
	// A darker rim under the surface, like cortex over white matter: tissue, but not uniform.
	tissue := sc.base * (1 + tex) * (1 - sc.rimDrop*coverage(-dh-sc.rimDepth, rimHalf))
	v := tissue

	fluid := 0.0
	for _, c := range w.rowFluids {
		if x < c.x0 || x > c.x1 {
			continue
		}
		d := c.b.dist(px, py, pz, pvHalf, pvHalf)
		fluid = max(fluid, coverage(d, pvHalf))
		if d < 0 && label != Background {
			label = Fluid
		}
	}
	if fluid > 0 {
		v += (sc.fluidLevel*sc.base*(1+0.5*tex) - v) * fluid
	}

	// Lesions are brightest in their core and fade towards the edge, where they are barely
	// brighter than the tissue around them: their extent is a matter of context.
	lesion, lesionV := 0.0, 0.0
	for _, c := range w.rowLesions {
		if x < c.x0 || x > c.x1 {
			continue
		}
		d := c.b.dist(px, py, pz, pvHalf, pvHalf)
		if f := coverage(d, pvHalf); f > lesion {
			core := min(1, max(lesionEdge, lesionEdge+(1-lesionEdge)*-d/max(1, 0.5*c.b.amin)))
			lesion, lesionV = f, tissue*(1+(c.b.level-1)*core)
		}
		if d < 0 && label != Background {
			label = Lesion
		}
	}
	if lesion > 0 {
		v += (lesionV - v) * lesion
	}
	return coverage(dh, pvHalf) * v * expSmall(sc.bias.at(x, w.biasCoef)), label
}

// rician returns |signal + sigma*(n1 + i*n2)| rounded to int16, n1 and n2 standard normal,
// from the voxel's hash. With no signal the magnitude is Rayleigh, sigma*sqrt(-2 ln u) for a
// uniform u; otherwise n1 and n1^2+n2^2 come from Marsaglia's polar method (rehashing on
// rejection, about one voxel in five), which spares Box-Muller's cosine.
func rician(signal, sigma float64, h uint64) int16 {
	var m float64
	if signal == 0 {
		u := (float64(h>>11) + 0.5) * 0x1p-53
		m = sigma * math.Sqrt(-2*logUnit(u))
	} else {
		var v1, s float64
		for {
			v1 = float64(h>>32)*0x1p-31 - 1
			v2 := float64(uint32(h))*0x1p-31 - 1
			s = v1*v1 + v2*v2
			if s > 0 && s < 1 {
				break
			}
			h = mix64(h)
		}
		r2 := -2 * logUnit(s) // n1^2 + n2^2
		n1 := v1 * math.Sqrt(r2/s)
		m = math.Sqrt(signal*signal + 2*signal*sigma*n1 + sigma*sigma*r2)
	}
	return int16(min(m+0.5, math.MaxInt16)) // m >= 0: truncation rounds
}
