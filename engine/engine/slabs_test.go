package engine

import (
	"slices"
	"testing"
)

func TestSlabRamp(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		nz, first, largest int
		want               []int
	}{
		{1000, 64, 256, []int{64, 128, 206, 205, 205, 128, 64}},
		{1000, 32, 256, []int{32, 64, 128, 184, 184, 184, 128, 64, 32}},
		{23, 5, 256, []int{5, 13, 5}},
		{20, 5, 256, []int{5, 10, 5}},       // 5 and its mirror, a middle of 10
		{30, 5, 256, []int{5, 10, 10, 5}},   // the ramp and its mirror exactly, no middle
		{100, 64, 256, []int{64, 36}},       // too short for a ramp: uniform
		{100, 256, 256, []int{100}},         // one slab
		{100, 32, 32, []int{32, 32, 32, 4}}, // largest <= first: uniform
		{7, 1, 4, []int{1, 2, 1, 2, 1}},
		{0, 64, 256, nil},
	} {
		got := SlabRamp(tc.nz, tc.first, tc.largest)
		if !slices.Equal(got, tc.want) {
			t.Errorf("SlabRamp(%d, %d, %d) = %v, want %v", tc.nz, tc.first, tc.largest, got, tc.want)
		}
	}
}

// Every plan covers the volume exactly with slabs no larger than max(first, largest), starting
// and ending with at most first planes.
func TestSlabRampCovers(t *testing.T) {
	t.Parallel()
	for nz := 1; nz <= 300; nz++ {
		for _, first := range []int{1, 2, 3, 5, 8, 32, 64, 400} {
			for _, largest := range []int{1, 4, 16, 100, 256} {
				sizes := SlabRamp(nz, first, largest)
				sum := 0
				for _, s := range sizes {
					if s < 1 || s > max(first, largest) {
						t.Fatalf("SlabRamp(%d, %d, %d) = %v: slab of %d", nz, first, largest, sizes, s)
					}
					sum += s
				}
				if sum != nz {
					t.Fatalf("SlabRamp(%d, %d, %d) = %v: sums to %d", nz, first, largest, sizes, sum)
				}
				if sizes[0] > first || sizes[len(sizes)-1] > first {
					t.Fatalf("SlabRamp(%d, %d, %d) = %v: ends larger than first", nz, first, largest, sizes)
				}
			}
		}
	}
}
