package spans

import (
	"testing"
	"time"
)

// The summary's kernels_ms is the union of the kernels spans: the CUDA fp16 engine's kernels of
// consecutive slabs overlap.
func TestBusyAdded(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		spans [][2]float64 // start, duration, in order of start
		want  float64
	}{
		{"apart", [][2]float64{{0, 2}, {3, 2}, {10, 1}}, 5},
		{"touching", [][2]float64{{0, 2}, {2, 2}}, 4},
		{"overlapping", [][2]float64{{0, 4}, {3, 4}, {6, 4}}, 10},
		{"inside", [][2]float64{{0, 10}, {2, 3}, {9, 2}}, 11},
		{"one", [][2]float64{{5, 1.5}}, 1.5},
	} {
		end, total := 0.0, 0.0
		for _, s := range tc.spans {
			total += BusyAdded(&end, s[0], s[1])
		}
		if total != tc.want {
			t.Errorf("%s: union %v, want %v", tc.name, total, tc.want)
		}
	}
}

// The engine's statistics use it with time.Duration.
func TestBusyAddedDuration(t *testing.T) {
	t.Parallel()
	var end, total time.Duration
	for _, s := range [][2]time.Duration{{0, 4 * time.Millisecond}, {3 * time.Millisecond, 4 * time.Millisecond}} {
		total += BusyAdded(&end, s[0], s[1])
	}
	if total != 7*time.Millisecond || end != 7*time.Millisecond {
		t.Errorf("union %v, end %v, want 7ms and 7ms", total, end)
	}
}
