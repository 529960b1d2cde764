package main

import (
	"slices"
	"testing"
)

// TestExportSegmentsHaveNoGap: a mask holding labels 1 and 3 gets segments 1, 2 and 3 (2
// with no voxels): a SEG numbers its segments without a gap (dciodvfy rejects 1, 3), and
// --labels naming 5 extends them to 5.
func TestExportSegmentsHaveNoGap(t *testing.T) {
	t.Parallel()
	mask := []byte{0, 1, 3, 3, 0, 1}
	numbers := func(names map[int]labelSpec) []int {
		var out []int
		for _, sg := range exportSegments(mask, names, "") {
			out = append(out, sg.Number)
		}
		return out
	}
	if got := numbers(nil); !slices.Equal(got, []int{1, 2, 3}) {
		t.Errorf("labels 1 and 3: segments %v, want [1 2 3]", got)
	}
	if got := numbers(map[int]labelSpec{5: {Name: "five"}}); !slices.Equal(got, []int{1, 2, 3, 4, 5}) {
		t.Errorf("--labels naming 5: segments %v, want 1 to 5", got)
	}
	if got := numbers(map[int]labelSpec{}); len(exportSegments([]byte{0, 0}, nil, "")) != 0 || len(got) != 3 {
		t.Errorf("an empty mask must have no segments; got %v for the mask", got)
	}
}
