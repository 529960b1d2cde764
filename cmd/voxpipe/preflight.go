package main

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"voxpipe/io/nifti"
	"voxpipe/jobs"
)

// defaultMaxMemory is --max-memory's default: half of the memory this process may use.
const defaultMaxMemory = "50%"

// parseMemory reads a --max-memory value: "0" (no bound), a percentage of the memory this
// process may use (the machine's RAM, or its cgroup's limit when lower: containers, Slurm), or
// a size in bytes with an optional binary unit (K, M, G, T; "KiB", "MB"... are read alike).
func parseMemory(s string) (int64, error) {
	s = strings.TrimSpace(s)
	if pct, ok := strings.CutSuffix(s, "%"); ok {
		p, err := strconv.ParseFloat(pct, 64)
		if err != nil || p <= 0 || p > 100 {
			return 0, fmt.Errorf("--max-memory %q: want a percentage in (0, 100]", s)
		}
		total, err := usableMemory()
		if err != nil {
			return 0, fmt.Errorf("--max-memory %q: %w", s, err)
		}
		return int64(float64(total) * p / 100), nil
	}
	num := strings.TrimRight(s, "bBiI")
	mult := int64(1)
	if n := len(num); n > 0 {
		switch num[n-1] {
		case 'k', 'K':
			mult = 1 << 10
		case 'm', 'M':
			mult = 1 << 20
		case 'g', 'G':
			mult = 1 << 30
		case 't', 'T':
			mult = 1 << 40
		}
		if mult > 1 {
			num = num[:n-1]
		}
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
	if err != nil || v < 0 || math.IsInf(v, 0) || v*float64(mult) > math.MaxInt64/2 {
		return 0, fmt.Errorf("--max-memory %q: want 0, a size such as 8G or 512M, or a percentage such as 50%%", s)
	}
	return int64(v * float64(mult)), nil
}

// usableMemory is the machine's RAM, or the cgroup v2 memory limit of this process when lower.
func usableMemory() (int64, error) {
	var si syscall.Sysinfo_t
	if err := syscall.Sysinfo(&si); err != nil {
		return 0, fmt.Errorf("read the machine's memory size: %w", err)
	}
	total := int64(si.Totalram) * int64(si.Unit)
	if b, err := os.ReadFile("/sys/fs/cgroup/memory.max"); err == nil {
		if limit, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil && limit > 0 && limit < total {
			total = limit
		}
	}
	return total, nil
}

// checkMaskName refuses mask names that would not make a NIfTI mask inside the output folder.
func checkMaskName(name string) error {
	if !strings.Contains(name, "{name}") {
		return fmt.Errorf("--mask-name %q must contain {name}", name)
	}
	lower := strings.ToLower(name)
	if !strings.HasSuffix(lower, ".nii") && !strings.HasSuffix(lower, ".nii.gz") {
		return fmt.Errorf("--mask-name %q must end in .nii or .nii.gz", name)
	}
	if !filepath.IsLocal(strings.ReplaceAll(name, "{name}", "x")) {
		return fmt.Errorf("--mask-name %q must stay inside the output folder", name)
	}
	return nil
}

// checkWritable makes dir (and its parents) and checks that a file can be created in it.
func checkWritable(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, ".voxpipe-probe-*")
	if err != nil {
		return fmt.Errorf("output folder %s is not writable: %w", dir, err)
	}
	f.Close()
	return os.Remove(f.Name())
}

// maskBytesEstimate is about what the masks of jobs take on disk: uncompressed, one byte a
// voxel; gzipped, a quarter of that (label masks compress far better; this errs high). Inputs
// whose header could not be read at discovery count for nothing: they will fail.
func maskBytesEstimate(batch []jobs.Job) int64 {
	var total int64
	for _, j := range batch {
		if j.Voxels == 0 {
			continue
		}
		n := j.Voxels + nifti.DataStart(1)
		if nifti.Gzipped(j.Output) {
			n /= 4
		}
		total += n
	}
	return total
}

// freeBytes is the space left to unprivileged users on dir's file system.
func freeBytes(dir string) (int64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return int64(st.Bavail) * int64(st.Bsize), nil
}
