//go:build unix

package nifti

import (
	"syscall"
	"time"
)

// processCPU is the user+system CPU time of this process. Benchmarks report throughput per
// CPU-second besides wall-clock MB/s: on a shared 2-core machine the wall clock mostly
// measures the neighbours.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
