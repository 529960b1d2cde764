//go:build unix

package cpu

import "syscall"

// processCPUSeconds is the user+system CPU time of this process, so benchmarks can report
// throughput per CPU-second, which stays meaningful when other jobs share the machine.
func processCPUSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}
