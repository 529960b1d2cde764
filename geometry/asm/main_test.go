package main

import (
	"bytes"
	"os"
	"testing"
)

// TestGeneratedIsCurrent fails when the committed kernels differ from the generator's output:
// run `go generate ./geometry` after changing it.
func TestGeneratedIsCurrent(t *testing.T) {
	t.Parallel()
	asm, stubs, err := Generate()
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string][]byte{"../combine_amd64.s": asm, "../combine_amd64.go": stubs} {
		got, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from the generator's output: run go generate ./geometry", name)
		}
	}
}
