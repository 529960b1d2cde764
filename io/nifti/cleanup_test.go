package nifti

import (
	"runtime"
	"testing"
	"testing/synctest"
)

// A Reader closed inside a synctest bubble leaves nothing that runs outside it: Close cancels
// the cleanup that stops a dropped Reader's read-ahead (its channels belong to the bubble, and
// a cleanup touching them from the runtime's cleanup goroutine crashes the process). Callers
// that run the pipeline in a bubble depend on it.
func TestCloseCancelsTheCleanup(t *testing.T) {
	path := writeFormula(t, "a.nii.gz", Int16, 16, 16, 8, WriteOptions{})
	for range 20 {
		synctest.Test(t, func(t *testing.T) {
			r, err := Open(path)
			if err != nil {
				t.Fatal(err)
			}
			if r.ahead == nil {
				t.Fatal("a gzipped file opened without WithInflateThreads should stream with read-ahead")
			}
			dst := make([]int16, 16*16*8)
			if _, err := r.ReadSlicesInt16(dst, 8); err != nil {
				t.Fatal(err)
			}
			if err := r.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
	// The Readers are garbage now: collect them and give any cleanup the time to run.
	for range 10 {
		runtime.GC()
		runtime.Gosched()
	}
}
