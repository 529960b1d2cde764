package jobs

import (
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
)

// ErrBadShard: a shard specification that cannot be used.
var ErrBadShard = errors.New("jobs: bad shard")

// Shard is one part of a batch split over Count processes (a Slurm array task, a pod of a
// Kubernetes Indexed Job). The zero Shard is the whole batch.
type Shard struct {
	Index, Count int
}

// Environment variables that ParseShard reads for "auto".
const (
	EnvShardCount = "VOXPIPE_SHARD_COUNT" // the count for JOB_COMPLETION_INDEX (Kubernetes)
)

// ParseShard reads a --shard value: "" (the whole batch), "i/n" (0 <= i < n), or "auto": a Slurm
// array task (SLURM_ARRAY_TASK_ID, _COUNT, _MIN and _STEP: the task's position in the array),
// else a Kubernetes Indexed Job pod (JOB_COMPLETION_INDEX, with the count from count or, when
// that is 0, VOXPIPE_SHARD_COUNT). getenv is os.Getenv in the CLI.
func ParseShard(spec string, count int, getenv func(string) string) (Shard, error) {
	switch spec {
	case "":
		return Shard{}, nil
	case "auto":
		return autoShard(count, getenv)
	}
	i, n, ok := strings.Cut(spec, "/")
	index, err1 := strconv.Atoi(i)
	total, err2 := strconv.Atoi(n)
	if !ok || err1 != nil || err2 != nil {
		return Shard{}, fmt.Errorf("%w: %q: want auto or i/n, such as 0/4", ErrBadShard, spec)
	}
	return newShard(index, total)
}

func newShard(index, count int) (Shard, error) {
	if count < 1 || index < 0 || index >= count {
		return Shard{}, fmt.Errorf("%w: shard %d of %d: want 0 <= i < n", ErrBadShard, index, count)
	}
	return Shard{Index: index, Count: count}, nil
}

func autoShard(count int, getenv func(string) string) (Shard, error) {
	num := func(name string) (int, bool, error) {
		s := getenv(name)
		if s == "" {
			return 0, false, nil
		}
		v, err := strconv.Atoi(s)
		if err != nil {
			return 0, true, fmt.Errorf("%w: %s=%q is not a number", ErrBadShard, name, s)
		}
		return v, true, nil
	}
	if id, ok, err := num("SLURM_ARRAY_TASK_ID"); ok || err != nil {
		if err != nil {
			return Shard{}, err
		}
		n, okN, err := num("SLURM_ARRAY_TASK_COUNT")
		if err != nil || !okN {
			return Shard{}, fmt.Errorf("%w: SLURM_ARRAY_TASK_ID is set but not SLURM_ARRAY_TASK_COUNT", ErrBadShard)
		}
		lo, _, err := num("SLURM_ARRAY_TASK_MIN")
		if err != nil {
			return Shard{}, err
		}
		step, okStep, err := num("SLURM_ARRAY_TASK_STEP")
		if err != nil {
			return Shard{}, err
		}
		if !okStep || step < 1 {
			step = 1
		}
		if (id-lo)%step != 0 {
			return Shard{}, fmt.Errorf("%w: array task %d is not on the array's step %d from %d (an irregular --array list: give --shard i/n)", ErrBadShard, id, step, lo)
		}
		return newShard((id-lo)/step, n)
	}
	if idx, ok, err := num("JOB_COMPLETION_INDEX"); ok || err != nil {
		if err != nil {
			return Shard{}, err
		}
		if count == 0 {
			c, okC, err := num(EnvShardCount)
			if err != nil || !okC {
				return Shard{}, fmt.Errorf("%w: JOB_COMPLETION_INDEX is set: give the pods' count with --shard-count or %s", ErrBadShard, EnvShardCount)
			}
			count = c
		}
		return newShard(idx, count)
	}
	return Shard{}, fmt.Errorf("%w: auto: neither SLURM_ARRAY_TASK_ID nor JOB_COMPLETION_INDEX is set", ErrBadShard)
}

// String is "i/n", or "" for the whole batch.
func (s Shard) String() string {
	if s.Count == 0 {
		return ""
	}
	return fmt.Sprintf("%d/%d", s.Index, s.Count)
}

// Owns reports whether the volume named name (Job.Name: its path relative to its input
// folder) belongs to this shard: by a stable hash (FNV-1a, 64 bits) of the name, so the same
// volumes map to the same shard on every rerun and every host, whatever else is in the folder.
func (s Shard) Owns(name string) bool {
	if s.Count <= 1 {
		return true
	}
	h := fnv.New64a()
	h.Write([]byte(name))
	return h.Sum64()%uint64(s.Count) == uint64(s.Index)
}

// Filter keeps the jobs this shard owns, renumbered.
func (s Shard) Filter(jobs []Job) []Job {
	var kept []Job
	for _, j := range jobs {
		if s.Owns(j.Name) {
			j.Index = len(kept)
			kept = append(kept, j)
		}
	}
	return kept
}
