package phantom

import (
	"fmt"
	"math"
	"slices"
	"testing"
)

// The fixture phantom's classes: sizes, intensities, noise, and that the truth needs context.

type classStats struct {
	count [MaxLabel + 1]int
	mean  [MaxLabel + 1]float64
}

func statsOf(ph *Phantom) classStats {
	var s classStats
	var sum [MaxLabel + 1]float64
	for i, l := range ph.Truth {
		s.count[l]++
		sum[l] += float64(ph.Image[i])
	}
	for c := range s.mean {
		s.mean[c] = sum[c] / float64(max(1, s.count[c]))
	}
	return s
}

// regions numbers the 6-connected regions of label in truth (-1 elsewhere).
func regions(truth []uint8, nx, ny, nz int, label uint8) []int32 {
	id := make([]int32, len(truth))
	for i := range id {
		id[i] = -1
	}
	var next int32
	var stack []int
	for start, l := range truth {
		if l != label || id[start] >= 0 {
			continue
		}
		id[start] = next
		stack = append(stack[:0], start)
		for len(stack) > 0 {
			i := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			x, y, z := i%nx, i/nx%ny, i/(nx*ny)
			for _, d := range [][4]int{{-1, 0, 0, -1}, {1, 0, 0, 1}, {0, -1, 0, -nx}, {0, 1, 0, nx}, {0, 0, -1, -nx * ny}, {0, 0, 1, nx * ny}} {
				xx, yy, zz := x+d[0], y+d[1], z+d[2]
				if xx < 0 || yy < 0 || zz < 0 || xx >= nx || yy >= ny || zz >= nz {
					continue
				}
				if j := i + d[3]; truth[j] == label && id[j] < 0 {
					id[j] = next
					stack = append(stack, j)
				}
			}
		}
		next++
	}
	return id
}

// components counts the 6-connected regions of label and the size of the largest.
func components(truth []uint8, nx, ny, nz int, label uint8) (n, largest int) {
	var sizes []int
	for _, r := range regions(truth, nx, ny, nz, label) {
		if r < 0 {
			continue
		}
		for int(r) >= len(sizes) {
			sizes = append(sizes, 0)
		}
		sizes[r]++
	}
	if len(sizes) == 0 {
		return 0, 0
	}
	return len(sizes), slices.Max(sizes)
}

func TestFixtureSizeClasses(t *testing.T) {
	t.Parallel()
	for _, seed := range []uint64{1, 2, 3, 4, SeedFor(1, 0), SeedFor(1, 1)} {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			ph := fixturePhantom(t, seed)
			s := statsOf(ph)
			n := float64(len(ph.Truth))
			head := float64(s.count[Tissue] + s.count[Fluid] + s.count[Lesion])
			checks := []struct {
				what     string
				got      float64
				min, max float64
			}{
				{"background share of volume", float64(s.count[Background]) / n, 0.6, 0.85},
				{"fluid share of head", float64(s.count[Fluid]) / head, 0.01, 0.08},
				{"lesion share of head", float64(s.count[Lesion]) / head, 0.003, 0.04},
			}
			for _, c := range checks {
				if c.got < c.min || c.got > c.max {
					t.Errorf("%s = %.4f, want in [%g, %g]", c.what, c.got, c.min, c.max)
				}
			}
			lesions, _ := components(ph.Truth, fixture.NX, fixture.NY, fixture.NZ, Lesion)
			if lesions < 3 {
				t.Errorf("%d lesions, want several", lesions)
			}
			_, ventricle := components(ph.Truth, fixture.NX, fixture.NY, fixture.NZ, Fluid)
			if ventricle < 300 {
				t.Errorf("largest fluid region has %d voxels, want visible ventricles (>= 300)", ventricle)
			}
			t.Logf("background %.1f%%, fluid %.2f%% and lesion %.2f%% of head, %d lesions, largest ventricle %d voxels",
				100*float64(s.count[0])/n, 100*float64(s.count[Fluid])/head,
				100*float64(s.count[Lesion])/head, lesions, ventricle)
		})
	}
}

func TestClassIntensityOrder(t *testing.T) {
	t.Parallel()
	for _, seed := range []uint64{1, 2, 3, 4} {
		s := statsOf(fixturePhantom(t, seed))
		m := s.mean
		t.Logf("seed %d: mean background %.0f, fluid %.0f, tissue %.0f, lesion %.0f", seed, m[0], m[2], m[1], m[3])
		if !(m[Background] < m[Fluid] && m[Fluid] < m[Tissue] && m[Tissue] < m[Lesion]) {
			t.Errorf("seed %d: class means background %.0f, fluid %.0f, tissue %.0f, lesion %.0f not in increasing order",
				seed, m[0], m[2], m[1], m[3])
		}
		// Distinguishable, not merely ordered.
		if m[Tissue] < 2*m[Fluid] || m[Lesion] < 1.15*m[Tissue] || m[Fluid] < 2*m[Background] {
			t.Errorf("seed %d: classes too close: means %v", seed, m)
		}
	}
}

// TestBackgroundIsRician checks the noise model where the signal is zero: a Rayleigh
// magnitude has mean^2/E[m^2] = pi/4 whatever sigma is.
func TestBackgroundIsRician(t *testing.T) {
	t.Parallel()
	ph := fixturePhantom(t, 1)
	var sum, sq, n float64
	// The corners are far from the head: pure noise.
	for z := range fixture.NZ {
		for y := range 8 {
			for x := range 8 {
				v := float64(ph.Image[x+fixture.NX*(y+fixture.NY*z)])
				sum += v
				sq += v * v
				n++
			}
		}
	}
	mean := sum / n
	ratio := mean * mean / (sq / n)
	if math.Abs(ratio-math.Pi/4) > 0.01 {
		t.Errorf("background mean^2/E[m^2] = %.4f, want pi/4 = %.4f (Rayleigh)", ratio, math.Pi/4)
	}
	if mean < 20 || mean > 120 {
		t.Errorf("background mean %.1f, want noise of a few percent of tissue", mean)
	}
}

// TestNeedsContext checks that the truth is learnable from intensities and local context,
// not from intensities alone: the best global thresholds on single voxels get a good share
// wrong (bias field, noise, partial volume, faint lesion edges), while every lesion is
// brighter, and the ventricles darker, than the tissue right around them.
func TestNeedsContext(t *testing.T) {
	t.Parallel()
	for _, seed := range []uint64{1, 2, 3, 4} {
		ph := fixturePhantom(t, seed)
		raw := make([]float64, len(ph.Image))
		for i, v := range ph.Image {
			raw[i] = float64(v)
		}
		acc := thresholdAccuracy(raw, ph.Truth)
		if acc > 0.95 {
			t.Errorf("seed %d: global thresholds on single voxels get %.3f right: too easy", seed, acc)
		}
		lesions := localContrast(ph, Lesion)
		for i, r := range lesions {
			if r < 1.08 {
				t.Errorf("seed %d: lesion %d is %.3f times the tissue around it: not visible", seed, i, r)
			}
		}
		fluids := localContrast(ph, Fluid)
		for i, r := range fluids {
			if r > 0.8 {
				t.Errorf("seed %d: fluid region %d is %.3f times the tissue around it: not visible", seed, i, r)
			}
		}
		t.Logf("seed %d: balanced accuracy of global thresholds %.3f; contrast to surrounding tissue: lesions %.2f, fluid %.2f",
			seed, acc, lesions, fluids)
	}
}

// localContrast returns, for each 6-connected region of label, its mean intensity over the
// mean of the tissue voxels within 2 voxels of it.
func localContrast(ph *Phantom, label uint8) []float64 {
	nx, ny, nz := fixture.NX, fixture.NY, fixture.NZ
	region := regions(ph.Truth, nx, ny, nz, label)
	var inSum, inN, outSum, outN []float64
	shellOf := make([]int32, len(ph.Truth)) // region+1 whose shell already counts the voxel
	for i, r := range region {
		if r < 0 {
			continue
		}
		for int(r) >= len(inSum) {
			inSum, inN, outSum, outN = append(inSum, 0), append(inN, 0), append(outSum, 0), append(outN, 0)
		}
		inSum[r] += float64(ph.Image[i])
		inN[r]++
		x, y, z := i%nx, i/nx%ny, i/(nx*ny)
		for zz := max(0, z-2); zz <= min(nz-1, z+2); zz++ {
			for yy := max(0, y-2); yy <= min(ny-1, y+2); yy++ {
				for xx := max(0, x-2); xx <= min(nx-1, x+2); xx++ {
					j := xx + nx*(yy+ny*zz)
					if ph.Truth[j] == Tissue && shellOf[j] != r+1 {
						shellOf[j] = r + 1
						outSum[r] += float64(ph.Image[j])
						outN[r]++
					}
				}
			}
		}
	}
	ratios := make([]float64, len(inSum))
	for r := range ratios {
		ratios[r] = (inSum[r] / inN[r]) / (outSum[r] / outN[r])
	}
	return ratios
}

// thresholdAccuracy classifies the head's voxels (truth != 0) as fluid < t1 <= tissue < t2
// <= lesion with the best t1, t2 (chosen on the truth itself: an upper bound for any
// intensity-only rule of that form) and returns the balanced accuracy over the three classes.
func thresholdAccuracy(v []float64, truth []uint8) float64 {
	type sample struct {
		v float64
		c uint8
	}
	var ss []sample
	var total [MaxLabel + 1]float64
	for i, c := range truth {
		if c != Background {
			ss = append(ss, sample{v[i], c})
			total[c]++
		}
	}
	slices.SortFunc(ss, func(a, b sample) int { return cmpFloat(a.v, b.v) })
	// below[c][i]: voxels of class c among the i lowest.
	below := [MaxLabel + 1][]float64{}
	for c := range below {
		below[c] = make([]float64, len(ss)+1)
		for i, s := range ss {
			below[c][i+1] = below[c][i]
			if s.c == uint8(c) {
				below[c][i+1]++
			}
		}
	}
	best := 0.0
	n := len(ss)
	step := max(1, n/400)
	for i := 0; i <= n; i += step {
		for j := i; j <= n; j += step {
			fluid := below[Fluid][i] / total[Fluid]
			tissue := (below[Tissue][j] - below[Tissue][i]) / total[Tissue]
			lesion := (total[Lesion] - below[Lesion][j]) / total[Lesion]
			best = max(best, (fluid+tissue+lesion)/3)
		}
	}
	return best
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
