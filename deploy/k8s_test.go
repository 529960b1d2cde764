package deploy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

const jobManifest = "k8s/indexed-job.yaml"

// object is what the checks read of a manifest's documents: a Job's or a
// PersistentVolumeClaim's fields (yaml ignores the others).
type object struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	Metadata   struct {
		Name string `yaml:"name"`
	} `yaml:"metadata"`
	Spec struct {
		// batch/v1 Job
		CompletionMode       string `yaml:"completionMode"`
		Completions          *int   `yaml:"completions"`
		Parallelism          *int   `yaml:"parallelism"`
		BackoffLimit         *int   `yaml:"backoffLimit"`
		BackoffLimitPerIndex *int   `yaml:"backoffLimitPerIndex"`
		Template             struct {
			Spec podSpec `yaml:"spec"`
		} `yaml:"template"`
		// v1 PersistentVolumeClaim
		AccessModes []string `yaml:"accessModes"`
	} `yaml:"spec"`
}

type podSpec struct {
	RestartPolicy string      `yaml:"restartPolicy"`
	Containers    []container `yaml:"containers"`
	Volumes       []struct {
		Name                  string `yaml:"name"`
		PersistentVolumeClaim *struct {
			ClaimName string `yaml:"claimName"`
		} `yaml:"persistentVolumeClaim"`
	} `yaml:"volumes"`
}

type container struct {
	Name    string   `yaml:"name"`
	Command []string `yaml:"command"`
	Args    []string `yaml:"args"`
	Env     []struct {
		Name      string     `yaml:"name"`
		Value     *string    `yaml:"value"`
		ValueFrom *yaml.Node `yaml:"valueFrom"`
	} `yaml:"env"`
	VolumeMounts []struct {
		Name      string `yaml:"name"`
		MountPath string `yaml:"mountPath"`
	} `yaml:"volumeMounts"`
}

// checkIndexedJob reports what is wrong with a manifest meant to run voxpipe as an Indexed
// Job: one error per broken rule (nil when there is none).
func checkIndexedJob(manifest []byte) error {
	job, pvcs, err := parseManifest(manifest)
	if err != nil {
		return err
	}
	var p problems
	completions := checkJobSpec(&p, job)
	pod := job.Spec.Template.Spec
	run, argv := voxpipeRun(pod)
	if run == nil {
		p.add("no container runs `voxpipe run` (command + args)")
		return p.err()
	}
	if v, ok := argFlag(argv, "--shard"); !ok || v != "auto" {
		p.add("args lack --shard auto (got %q)", v)
	}
	checkShardsAndEnv(&p, run, argv, completions)
	checkOnClaims(&p, pod, run, argv, pvcs)
	return p.err()
}

// problems collects the broken rules.
type problems []error

func (p *problems) add(format string, args ...any) { *p = append(*p, fmt.Errorf(format, args...)) }

func (p problems) err() error { return errors.Join(p...) }

// parseManifest returns the manifest's one Job and its PersistentVolumeClaims by name.
func parseManifest(manifest []byte) (object, map[string]object, error) {
	var objs []object
	dec := yaml.NewDecoder(bytes.NewReader(manifest))
	for {
		var o object
		err := dec.Decode(&o)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return object{}, nil, fmt.Errorf("parse: %w", err)
		}
		objs = append(objs, o)
	}
	var jobs []object
	pvcs := map[string]object{}
	for _, o := range objs {
		switch o.Kind {
		case "Job":
			jobs = append(jobs, o)
		case "PersistentVolumeClaim":
			pvcs[o.Metadata.Name] = o
		}
	}
	if len(jobs) != 1 {
		return object{}, nil, fmt.Errorf("want one kind: Job document, found %d", len(jobs))
	}
	return jobs[0], pvcs, nil
}

// checkJobSpec checks the Job's own fields (Indexed, completions, parallelism, backoff) and
// returns its completions (0 when unset).
func checkJobSpec(p *problems, job object) int {
	if job.APIVersion != "batch/v1" {
		p.add("apiVersion %q, want batch/v1", job.APIVersion)
	}
	spec := job.Spec
	if spec.CompletionMode != "Indexed" {
		p.add("completionMode %q, want Indexed (JOB_COMPLETION_INDEX is only set for Indexed Jobs)", spec.CompletionMode)
	}
	completions := 0
	if spec.Completions == nil || *spec.Completions < 1 {
		p.add("completions must be set and positive")
	} else {
		completions = *spec.Completions
	}
	if spec.Parallelism != nil && completions > 0 && *spec.Parallelism > completions {
		p.add("parallelism %d > completions %d", *spec.Parallelism, completions)
	}
	if spec.BackoffLimitPerIndex == nil && spec.BackoffLimit == nil {
		p.add("neither backoffLimitPerIndex nor backoffLimit is set")
	}
	if pod := spec.Template.Spec; spec.BackoffLimitPerIndex != nil && pod.RestartPolicy != "Never" {
		p.add("backoffLimitPerIndex needs restartPolicy Never, not %q", pod.RestartPolicy)
	}
	return completions
}

// voxpipeRun is the container that runs voxpipe run and its command line (command + args);
// nil when there is none.
func voxpipeRun(pod podSpec) (*container, []string) {
	for i := range pod.Containers {
		c := &pod.Containers[i]
		a := append(slices.Clone(c.Command), c.Args...)
		if len(a) >= 2 && (a[0] == "voxpipe" || strings.HasSuffix(a[0], "/voxpipe")) && a[1] == "run" {
			return c, a
		}
	}
	return nil, nil
}

// argFlag is the value of flag name in argv ("name value" or "name=value").
func argFlag(argv []string, name string) (string, bool) {
	for i, a := range argv {
		if a == name && i+1 < len(argv) {
			return argv[i+1], true
		}
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			return v, true
		}
	}
	return "", false
}

// checkShardsAndEnv checks that the shard count is the completions and that every $(NAME)
// in the args is in the container's env.
func checkShardsAndEnv(p *problems, run *container, argv []string, completions int) {
	env := map[string]*string{}
	for _, e := range run.Env {
		if e.ValueFrom != nil {
			env[e.Name] = nil
		} else {
			v := ""
			if e.Value != nil {
				v = *e.Value
			}
			env[e.Name] = &v
		}
	}
	shards := ""
	if v, ok := argFlag(argv, "--shard-count"); ok {
		shards = v
	} else if v, ok := env["VOXPIPE_SHARD_COUNT"]; ok && v != nil {
		shards = *v
	}
	if n, err := strconv.Atoi(shards); err != nil || n != completions {
		p.add("the shard count (VOXPIPE_SHARD_COUNT or --shard-count) is %q, want completions (%d)", shards, completions)
	}
	// Kubernetes leaves $(NAME) as it is when NAME is not in the container's env.
	for _, m := range regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`).FindAllStringSubmatch(strings.Join(argv, " "), -1) {
		if _, ok := env[m[1]]; !ok {
			p.add("args use $(%s), which the container's env does not define", m[1])
		}
	}
}

// checkOnClaims checks that the input and the output folder are on a ReadWriteMany
// PersistentVolumeClaim of the manifest.
func checkOnClaims(p *problems, pod podSpec, run *container, argv []string, pvcs map[string]object) {
	out, _ := argFlag(argv, "-o")
	if out == "" {
		out, _ = argFlag(argv, "--output")
	}
	var in string
	for i := 2; i < len(argv); i++ {
		if strings.HasPrefix(argv[i], "-") {
			if !strings.Contains(argv[i], "=") && argv[i] != "-r" && argv[i] != "--recursive" {
				i++ // the flag's value
			}
			continue
		}
		in = argv[i]
		break
	}
	for what, path := range map[string]string{"input": in, "output (-o)": out} {
		if path == "" {
			p.add("voxpipe run has no %s", what)
			continue
		}
		claim := ""
		for _, m := range run.VolumeMounts {
			if path == m.MountPath || strings.HasPrefix(path, strings.TrimSuffix(m.MountPath, "/")+"/") {
				for _, v := range pod.Volumes {
					if v.Name == m.Name && v.PersistentVolumeClaim != nil {
						claim = v.PersistentVolumeClaim.ClaimName
					}
				}
			}
		}
		if claim == "" {
			p.add("the %s %s is not on a mounted PersistentVolumeClaim", what, path)
			continue
		}
		pvc, ok := pvcs[claim]
		if !ok {
			p.add("PersistentVolumeClaim %q (%s) is not in the manifest", claim, what)
		} else if !slices.Contains(pvc.Spec.AccessModes, "ReadWriteMany") {
			p.add("PersistentVolumeClaim %q has access modes %v: the pods share it from several nodes, want ReadWriteMany", claim, pvc.Spec.AccessModes)
		}
	}
}

func TestIndexedJobManifest(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(jobManifest)
	if err != nil {
		t.Fatal(err)
	}
	if err := checkIndexedJob(b); err != nil {
		t.Errorf("%s:\n%v", jobManifest, err)
	}
}

// TestIndexedJobChecksFail breaks the manifest one rule at a time: each must be reported.
func TestIndexedJobChecksFail(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(jobManifest)
	if err != nil {
		t.Fatal(err)
	}
	good := string(b)
	for _, tc := range []struct{ name, old, new, want string }{
		{"kind", "kind: Job\n", "kind: CronJob\n", "one kind: Job"},
		{"apiVersion", "apiVersion: batch/v1\n", "apiVersion: batch/v2\n", "apiVersion"},
		{"completionMode", "completionMode: Indexed", "completionMode: NonIndexed", "completionMode"},
		{"no completionMode", "  completionMode: Indexed\n", "", "completionMode"},
		{"completions", "completions: 4", "completions: 5", "shard count"},
		{"shard count", `value: "4"`, `value: "3"`, "shard count"},
		{"no shard count", "- name: VOXPIPE_SHARD_COUNT", "- name: VOXPIPE_SHARDS", "shard count"},
		{"parallelism", "parallelism: 4", "parallelism: 8", "parallelism"},
		{"shard", "- --shard\n            - auto\n", "", "--shard auto"},
		{"shard value", "- --shard\n            - auto\n", "- --shard\n            - 0/4\n", "--shard auto"},
		{"run", "- run\n", "- watch\n", "voxpipe run"},
		{"backoff", "backoffLimitPerIndex: 2", "completionsToo: 2", "backoff"},
		{"restartPolicy", "restartPolicy: Never", "restartPolicy: OnFailure", "restartPolicy"},
		{"access mode", `["ReadWriteMany"]`, `["ReadWriteOnce"]`, "ReadWriteMany"},
		{"claim", "claimName: voxpipe-data", "claimName: other", "not in the manifest"},
		{"env reference", "$(VOXPIPE_WORKERS)", "$(VOXPIPE_CPUS)", "$(VOXPIPE_CPUS)"},
		{"yaml", "completionMode: Indexed", "completionMode: [Indexed", "parse"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if strings.Count(good, tc.old) != 1 {
				t.Fatalf("%q is not in %s exactly once: update this case", tc.old, jobManifest)
			}
			err := checkIndexedJob([]byte(strings.Replace(good, tc.old, tc.new, 1)))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("replacing %q by %q: got %v, want an error about %q", tc.old, tc.new, err, tc.want)
			}
		})
	}
}
