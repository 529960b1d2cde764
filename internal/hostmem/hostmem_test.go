package hostmem

import "testing"

// Map gives zeroed, writable memory of the asked length (a page for n = 0), which Unmap frees,
// also from a shorter reslice; negative lengths are refused.
func TestMapUnmap(t *testing.T) {
	for _, n := range []int{0, 1, 4096, 5 << 20} {
		b, err := Map(n)
		if err != nil {
			t.Fatalf("Map(%d): %v", n, err)
		}
		if len(b) != n {
			t.Fatalf("Map(%d): %d bytes", n, len(b))
		}
		for i := 0; i < n; i += 4093 {
			if b[i] != 0 {
				t.Fatalf("Map(%d): byte %d is %d, not zero", n, i, b[i])
			}
			b[i] = byte(i)
		}
		if err := Unmap(b[:n/2]); err != nil {
			t.Fatalf("Unmap of Map(%d): %v", n, err)
		}
	}
	if _, err := Map(-1); err == nil {
		t.Error("Map(-1) succeeded")
	}
}
