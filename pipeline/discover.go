package pipeline

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// ErrNoInputs is returned when the inputs name no volume at all.
var ErrNoInputs = errors.New("pipeline: no NIfTI volumes found in the inputs")

// Job is one volume to segment.
type Job struct {
	Index  int    // position in the batch, in discovery order
	Name   string // relative name without extension, "sub/case_01"; unique in a batch
	Input  string // path of the .nii, .nii.gz or .hdr
	Output string // path of the mask
}

// volumeExtensions are the file names that make a volume; .img files come with their .hdr.
var volumeExtensions = []string{".nii.gz", ".nii", ".hdr.gz", ".hdr"}

// VolumeBase returns the file name without its NIfTI extension and whether it had one.
func VolumeBase(path string) (string, bool) {
	base := filepath.Base(path)
	lower := strings.ToLower(base)
	for _, ext := range volumeExtensions {
		if strings.HasSuffix(lower, ext) && len(base) > len(ext) {
			return base[:len(base)-len(ext)], true
		}
	}
	return base, false
}

// isTemporary reports files voxpipe itself leaves while writing (".name.tmp-XXXX") and other
// hidden files, which are never inputs.
func isTemporary(name string) bool { return strings.HasPrefix(name, ".") }

// Discover lists the volumes named by inputs: files are taken as they are (a file that is not
// NIfTI then fails on its own), folders are searched for NIfTI names, recursively when asked.
// Masks go to outDir under the same relative folders, named by maskName ("{name}" is replaced by
// the volume's name). Two volumes whose masks would collide are an error, not a silent overwrite.
func Discover(inputs []string, recursive bool, outDir, maskName string) ([]Job, error) {
	if !strings.Contains(maskName, "{name}") {
		return nil, fmt.Errorf("pipeline: mask name %q must contain {name}", maskName)
	}
	var jobs []Job
	add := func(path, rel string) {
		name, _ := VolumeBase(rel)
		if dir := filepath.Dir(rel); dir != "." {
			name = filepath.ToSlash(filepath.Join(dir, name))
		}
		out := filepath.Join(outDir, filepath.FromSlash(strings.ReplaceAll(maskName, "{name}", name)))
		jobs = append(jobs, Job{Name: name, Input: path, Output: out})
	}
	for _, in := range inputs {
		st, err := os.Stat(in)
		if err != nil {
			return nil, fmt.Errorf("pipeline: input %w", err)
		}
		if !st.IsDir() {
			add(in, filepath.Base(in))
			continue
		}
		var found []string
		err = filepath.WalkDir(in, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if path != in && (!recursive || isTemporary(d.Name())) {
					return filepath.SkipDir
				}
				return nil
			}
			if _, ok := VolumeBase(d.Name()); ok && !isTemporary(d.Name()) {
				found = append(found, path)
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("pipeline: search %s: %w", in, err)
		}
		sort.Strings(found)
		for _, path := range found {
			rel, err := filepath.Rel(in, path)
			if err != nil {
				return nil, fmt.Errorf("pipeline: %w", err)
			}
			add(path, rel)
		}
	}
	if len(jobs) == 0 {
		return nil, ErrNoInputs
	}
	byOutput := map[string]string{}
	for i := range jobs {
		jobs[i].Index = i
		if prev, dup := byOutput[jobs[i].Output]; dup {
			return nil, fmt.Errorf("pipeline: %s and %s would both write %s; rename one or use separate runs", prev, jobs[i].Input, jobs[i].Output)
		}
		byOutput[jobs[i].Output] = jobs[i].Input
	}
	return jobs, nil
}
