//go:build unix

package inflate

import (
	"syscall"
	"time"
)

// processCPU is the user+system CPU time of this process: time limits of tests count it, not
// the wall clock, which on a shared machine mostly measures the neighbours.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
