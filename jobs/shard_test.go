package jobs

import (
	"errors"
	"fmt"
	"testing"
)

func TestParseShard(t *testing.T) {
	t.Parallel()
	env := func(kv ...string) func(string) string {
		m := map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(k string) string { return m[k] }
	}
	none := env()
	for _, tc := range []struct {
		spec  string
		count int
		env   func(string) string
		want  Shard
	}{
		{"", 0, none, Shard{}},
		{"0/4", 0, none, Shard{0, 4}},
		{"3/4", 0, none, Shard{3, 4}},
		{"auto", 0, env("SLURM_ARRAY_TASK_ID", "5", "SLURM_ARRAY_TASK_COUNT", "4", "SLURM_ARRAY_TASK_MIN", "3"), Shard{2, 4}},
		// --array=0-12:4: tasks 0, 4, 8, 12.
		{"auto", 0, env("SLURM_ARRAY_TASK_ID", "8", "SLURM_ARRAY_TASK_COUNT", "4", "SLURM_ARRAY_TASK_MIN", "0", "SLURM_ARRAY_TASK_STEP", "4"), Shard{2, 4}},
		{"auto", 3, env("JOB_COMPLETION_INDEX", "2"), Shard{2, 3}},
		{"auto", 0, env("JOB_COMPLETION_INDEX", "1", EnvShardCount, "5"), Shard{1, 5}},
	} {
		got, err := ParseShard(tc.spec, tc.count, tc.env)
		if err != nil || got != tc.want {
			t.Errorf("ParseShard(%q): %+v %v, want %+v", tc.spec, got, err, tc.want)
		}
	}
	for _, tc := range []struct {
		spec string
		env  func(string) string
	}{
		{"4/4", none}, {"-1/4", none}, {"1/0", none}, {"1", none}, {"a/b", none}, {"auto", none},
		{"auto", env("SLURM_ARRAY_TASK_ID", "3")},
		{"auto", env("SLURM_ARRAY_TASK_ID", "x", "SLURM_ARRAY_TASK_COUNT", "4")},
		{"auto", env("SLURM_ARRAY_TASK_ID", "9", "SLURM_ARRAY_TASK_COUNT", "4")}, // past the count
		{"auto", env("SLURM_ARRAY_TASK_ID", "5", "SLURM_ARRAY_TASK_COUNT", "4", "SLURM_ARRAY_TASK_STEP", "4")},
		{"auto", env("JOB_COMPLETION_INDEX", "1")}, // no count
	} {
		if _, err := ParseShard(tc.spec, 0, tc.env); !errors.Is(err, ErrBadShard) {
			t.Errorf("ParseShard(%q) with %v: %v, want ErrBadShard", tc.spec, tc.env("SLURM_ARRAY_TASK_ID"), err)
		}
	}
}

// Every volume is in exactly one shard, the shards are of similar sizes, and the split depends
// on the name alone (the same on every host and rerun).
func TestShardPartition(t *testing.T) {
	t.Parallel()
	var jobs []Job
	for i := range 400 {
		jobs = append(jobs, Job{Name: fmt.Sprintf("sub-%03d/anat/T1w", i)})
	}
	const n = 4
	seen := map[string]int{}
	for i := range n {
		part := Shard{i, n}.Filter(jobs)
		if len(part) < 60 || len(part) > 140 {
			t.Errorf("shard %d/%d has %d of 400 volumes", i, n, len(part))
		}
		for k, j := range part {
			seen[j.Name]++
			if j.Index != k {
				t.Errorf("shard %d: job %s has index %d, want %d", i, j.Name, j.Index, k)
			}
		}
	}
	for _, j := range jobs {
		if seen[j.Name] != 1 {
			t.Errorf("%s is in %d shards", j.Name, seen[j.Name])
		}
	}
	// The split of a name is fixed (FNV-1a 64 of the name, modulo n): reruns, and arrays
	// resubmitted after an upgrade, map the same volumes to the same shards.
	for _, tc := range []struct {
		name     string
		n, owner int
	}{{"sub-000/anat/T1w", 4, 0}, {"sub-000/anat/T1w", 7, 4}, {"phantom_000", 4, 1}, {"phantom_000", 7, 6}} {
		for i := range tc.n {
			if got := (Shard{i, tc.n}).Owns(tc.name); got != (i == tc.owner) {
				t.Errorf("%s: shard %d/%d owns it: %v", tc.name, i, tc.n, got)
			}
		}
	}
	if got := len(Shard{}.Filter(jobs)); got != 400 {
		t.Errorf("the whole batch kept %d", got)
	}
}
