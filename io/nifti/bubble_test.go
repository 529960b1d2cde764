package nifti

import (
	"bytes"
	"regexp"
	"runtime"
	"testing"
	"testing/synctest"
)

// stableGoroutines waits until the other goroutines of the test's synctest bubble have
// exited or are blocked for good, then checks that no more than n goroutines are left in the
// bubble. Only the bubble's goroutines count: the process's others (parallel tests pausing or
// ending) come and go meanwhile.
func stableGoroutines(t *testing.T, n int) {
	t.Helper()
	synctest.Wait()
	if got, stacks := bubbleGoroutines(); got > n {
		t.Fatalf("%d goroutines in the bubble, want <= %d:\n%s", got, n, stacks)
	}
}

// bubbleGoroutines counts the goroutines of the caller's synctest bubble, from the stacks of
// all goroutines (the caller's first; each header names its bubble).
func bubbleGoroutines() (int, []byte) {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	first, _, _ := bytes.Cut(buf, []byte("\n"))
	m := bubbleID.FindSubmatch(first)
	if m == nil {
		panic("bubbleGoroutines: not called in a synctest bubble")
	}
	count := 0
	for _, line := range bytes.Split(buf, []byte("\n")) {
		if bytes.HasPrefix(line, []byte("goroutine ")) {
			if id := bubbleID.FindSubmatch(line); id != nil && bytes.Equal(id[1], m[1]) {
				count++
			}
		}
	}
	return count, buf
}

var bubbleID = regexp.MustCompile(`synctest bubble (\d+)[\],]`)
