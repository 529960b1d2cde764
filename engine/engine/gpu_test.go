package engine

import (
	"errors"
	"testing"
)

func TestCUDAOptionsPrecision(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in, want string
		err      bool
	}{
		{"", PrecisionFP16, false},
		{"fp16", PrecisionFP16, false},
		{"fp32", PrecisionFP32, false},
		{"FP16", "", true},
		{"bf16", "", true},
	} {
		got, err := CUDAOptions{Precision: tc.in}.Resolved()
		if tc.err {
			if !errors.Is(err, ErrBadPrecision) {
				t.Errorf("precision %q: error %v, want ErrBadPrecision", tc.in, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("precision %q: %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}
