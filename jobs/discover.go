// Package jobs finds the volumes a run is given and says where their masks go: discovery of
// NIfTI files and DICOM series in files and folders (Discover), one Job per volume with its mask
// path (--mask-name, --dicom-name), the input-safety checks (CheckOutputs, CheckRegular),
// the files left out, and sharding (Shard). It reads headers, never voxels.
package jobs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"voxpipe/internal/regular"
	"voxpipe/io/dicom"
	"voxpipe/io/nifti"
	"voxpipe/store/provenance"
)

// ErrNoInputs is returned when the inputs name no volume at all.
var ErrNoInputs = errors.New("jobs: no NIfTI volumes or DICOM series found in the inputs")

// ErrNotRegular fails an input that is not a regular file (a FIFO, device or socket): it is
// refused without being opened, since opening or reading one can block forever.
var ErrNotRegular = errors.New("jobs: not a regular file")

// ErrMaskIsInput: a mask path is one of the inputs (same path, a symbolic link to it, or a hard
// link of it). voxpipe never writes or renames over an input.
var ErrMaskIsInput = errors.New("jobs: a mask would replace an input")

// Job is one volume to segment.
type Job struct {
	Index  int    // position in the batch, in discovery order
	Name   string // relative name without extension, "sub/case_01"; unique in a batch
	Input  string // path of the .nii, .nii.gz or .hdr
	Output string // path of the mask
	// Err, when set, fails the volume without opening it (ErrNotRegular).
	Err error
	// Voxels is what the input's header declared at discovery (0 if it could not be read).
	Voxels int64
	// Series, when set, is the DICOM series the job reads (Input is the folder of its first
	// file); see dicom.go.
	Series *dicom.Series
	// Arrived, when set (voxpipe watch), is when the file was found complete: its wall time
	// and queue time start there.
	Arrived time.Time
}

// Discovery is what Discover found, and what it left out.
type Discovery struct {
	Jobs []Job
	// OwnOutputs are files among the inputs that are voxpipe masks (by their provenance, or
	// for masks of older versions, a uint8 volume whose descrip starts with "voxpipe"): never
	// segmented again.
	OwnOutputs []string
	// SkippedFolders are folders not searched because they are the output folder.
	SkippedFolders []string
	// NotSearched are the sub-folders of input folders left unsearched without -r.
	NotSearched []string
	// Skipped are the folders' other files (DICOM candidates) left out as not DICOM images,
	// with why (dicom.Skipped). DICOM files that cannot be read are not here: they fail their
	// series (a job with Err).
	Skipped []dicom.Skipped
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

// IsVolumeName reports whether a file name makes a volume input: a NIfTI name, not hidden (no
// temporary of voxpipe's or anyone's).
func IsVolumeName(name string) bool {
	_, ok := VolumeBase(name)
	return ok && !isTemporary(name)
}

// isTemporary reports files voxpipe itself leaves while writing (".name.tmp-XXXX") and other
// hidden files, which are never inputs.
func isTemporary(name string) bool { return strings.HasPrefix(name, ".") }

// Discover lists the volumes named by inputs: files are taken as they are (a file that is not
// NIfTI then fails on its own), folders are searched for NIfTI names, recursively when asked,
// leaving out the output folder and voxpipe's own masks. Files that are not regular are listed
// with Job.Err set, without being opened. Masks go to outDir under the same relative folders,
// named by maskName ("{name}" is replaced by the volume's name). Two volumes whose masks would
// collide are an error, not a silent overwrite. Folders' other files are read as DICOM: one
// job per series, named by dicom.DefaultName (DiscoverDICOM names them otherwise).
func Discover(inputs []string, recursive bool, outDir, maskName string) (*Discovery, error) {
	return DiscoverDICOM(inputs, recursive, outDir, maskName, dicom.DefaultName)
}

// DiscoverDICOM is Discover with the DICOM series' names from the template dicomName
// (--dicom-name, see dicom.Series.Name).
func DiscoverDICOM(inputs []string, recursive bool, outDir, maskName, dicomName string) (*Discovery, error) {
	if !strings.Contains(maskName, "{name}") {
		return nil, fmt.Errorf("jobs: mask name %q must contain {name}", maskName)
	}
	s := &search{d: &Discovery{}, recursive: recursive, outDir: outDir, maskName: maskName}
	s.outInfo, _ = os.Stat(outDir) // the output folder may not exist yet: then it is in no input
	for _, in := range inputs {
		if err := s.input(in); err != nil {
			return nil, err
		}
	}
	d := s.d
	jobs, err := dicomJobs(d, s.dicomFiles, outDir, maskName, dicomName)
	if err != nil {
		return nil, err
	}
	d.Jobs = append(d.Jobs, jobs...)
	if len(d.Jobs) == 0 {
		return d, ErrNoInputs
	}
	byOutput := map[string]string{}
	for i := range d.Jobs {
		d.Jobs[i].Index = i
		if prev, dup := byOutput[d.Jobs[i].Output]; dup {
			return nil, fmt.Errorf("jobs: %s and %s would both write %s; rename one or use separate runs", prev, d.Jobs[i].Input, d.Jobs[i].Output)
		}
		byOutput[d.Jobs[i].Output] = d.Jobs[i].Input
	}
	return d, nil
}

// search is DiscoverDICOM's state while it goes through the inputs.
type search struct {
	d                *Discovery
	recursive        bool
	outDir, maskName string
	outInfo          os.FileInfo // nil when the output folder does not exist yet
	dicomFiles       []string    // other files in the folders: DICOM candidates
}

// add makes the job of the volume at path (rel to its input), unless it is one of the run's
// own outputs.
func (s *search) add(path, rel string) {
	job, own := JobFor(path, rel, s.outDir, s.maskName)
	if own {
		s.d.OwnOutputs = append(s.d.OwnOutputs, path)
		return
	}
	s.d.Jobs = append(s.d.Jobs, job)
}

// input adds the input in: a file, or the volumes in a folder (in name order) and its DICOM
// candidates.
func (s *search) input(in string) error {
	st, err := os.Stat(in) // follows links; never opens
	if err != nil {
		return fmt.Errorf("jobs: input %w", err)
	}
	if !st.IsDir() {
		if _, ok := VolumeBase(in); !ok && isDICOM(in) {
			s.dicomFiles = append(s.dicomFiles, in)
			return nil
		}
		s.add(in, filepath.Base(in))
		return nil
	}
	var found []string
	err = filepath.WalkDir(in, func(path string, de fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if de.IsDir() {
			return s.folder(in, path, de)
		}
		if _, ok := VolumeBase(de.Name()); !ok || isTemporary(de.Name()) {
			// Links are followed and FIFOs refused, unopened, by the scan (listed in Skipped).
			if dicom.Candidate(de.Name()) {
				s.dicomFiles = append(s.dicomFiles, path)
			}
			return nil
		}
		info, err := os.Stat(path) // a link's target: a link to a FIFO is a FIFO
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		if info.IsDir() {
			return nil
		}
		found = append(found, path)
		return nil
	})
	if err != nil {
		return fmt.Errorf("jobs: search %s: %w", in, err)
	}
	slices.Sort(found)
	for _, path := range found {
		rel, err := filepath.Rel(in, path)
		if err != nil {
			return fmt.Errorf("jobs: %w", err)
		}
		s.add(path, rel)
	}
	return nil
}

// folder decides whether the walk of input in enters the folder at path: not temporary
// folders, subfolders only when recursive, never the output folder.
func (s *search) folder(in, path string, de fs.DirEntry) error {
	if path == in {
		return nil
	}
	if isTemporary(de.Name()) {
		return filepath.SkipDir
	}
	if !s.recursive {
		s.d.NotSearched = append(s.d.NotSearched, path)
		return filepath.SkipDir
	}
	if info, err := de.Info(); err == nil && s.outInfo != nil && os.SameFile(info, s.outInfo) {
		s.d.SkippedFolders = append(s.d.SkippedFolders, path)
		return filepath.SkipDir
	}
	return nil
}

// JobFor makes the job of the volume file at path (rel: its path relative to its input folder),
// its mask under outDir named by maskName, or reports that the file is a voxpipe mask (own). A
// volume with a file that is not regular (the .img of a .hdr too) gets Job.Err without being
// opened; otherwise its header is read for Job.Voxels (and to recognise masks).
func JobFor(path, rel, outDir, maskName string) (job Job, own bool) {
	var jobErr error
	var voxels int64
	if err := CheckRegular(path); err != nil {
		jobErr = fmt.Errorf("input %s: %w: %w", path, ErrNotRegular, err)
	} else {
		h, own := readDiscovered(path)
		if own {
			return Job{}, true
		}
		if h != nil {
			voxels = int64(h.NX()) * int64(h.NY()) * int64(h.NZ())
		}
	}
	name, _ := VolumeBase(rel)
	if dir := filepath.Dir(rel); dir != "." {
		name = filepath.ToSlash(filepath.Join(dir, name))
	}
	out := filepath.Join(outDir, filepath.FromSlash(strings.ReplaceAll(maskName, "{name}", name)))
	return Job{Name: name, Input: path, Output: out, Err: jobErr, Voxels: voxels}, false
}

// CheckRegular checks, without opening them, that the file at path and the other files of its
// volume (the .img of a .hdr) are regular files: an error wrapping regular.ErrNotRegular names
// the first that is not.
func CheckRegular(path string) error {
	files, err := nifti.Files(path)
	if err != nil {
		files = nil // a missing partner fails when the volume is read, with its own error
	}
	for _, f := range append([]string{path}, files...) {
		if _, err := regular.Check(f); err != nil && errors.Is(err, regular.ErrNotRegular) {
			return err
		}
	}
	return nil
}

// readDiscovered reads the header of the file at path (nil if it cannot) and whether the file
// is a mask voxpipe wrote: it carries voxpipe provenance, or (masks of versions before
// provenance) it is uint8 with a descrip starting with "voxpipe".
func readDiscovered(path string) (*nifti.Header, bool) {
	h, _, err := provenance.Read(path)
	if err == nil {
		return h, true
	}
	return h, h != nil && h.Datatype == nifti.Uint8 && strings.HasPrefix(h.Descrip, "voxpipe")
}

// CheckOutputs fails with ErrMaskIsInput when a job's mask path is one of the inputs' files
// (a .hdr/.img pair's both halves included): the same path once links are resolved, or the
// same file (a hard link). It only looks files up.
func CheckOutputs(jobs []Job) error {
	type input struct {
		job  int
		path string
		info fs.FileInfo
	}
	var inputs []input
	byPath := map[string]int{}
	for i, j := range jobs {
		files, err := nifti.Files(j.Input)
		if err != nil {
			files = []string{j.Input}
		}
		for _, f := range files {
			info, err := os.Stat(f)
			if err != nil {
				continue
			}
			inputs = append(inputs, input{i, f, info})
			if p, err := resolve(f); err == nil {
				byPath[p] = len(inputs) - 1
			}
		}
	}
	for _, j := range jobs {
		if p, err := resolve(j.Output); err == nil {
			if k, ok := byPath[p]; ok {
				return fmt.Errorf("%w: the mask of %s would be %s, which is the input %s", ErrMaskIsInput, j.Input, j.Output, inputs[k].path)
			}
		}
		info, err := os.Stat(j.Output)
		if err != nil {
			continue
		}
		for _, in := range inputs {
			if os.SameFile(info, in.info) {
				return fmt.Errorf("%w: the mask of %s would be %s, which is the same file as the input %s", ErrMaskIsInput, j.Input, j.Output, in.path)
			}
		}
	}
	return nil
}

// resolve returns the absolute path of p with the links of its folder resolved, and of p
// itself when it exists. A folder that does not exist yet resolves as far as it exists.
func resolve(p string) (string, error) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", err
	}
	if r, err := filepath.EvalSymlinks(abs); err == nil {
		return r, nil
	}
	dir, base := filepath.Split(abs)
	dir = filepath.Clean(dir)
	if dir == abs {
		return abs, nil
	}
	rdir, err := resolve(dir)
	if err != nil {
		return "", err
	}
	return filepath.Join(rdir, base), nil
}

// LeftOut is an input file discovery passed over, and why.
type LeftOut struct {
	Path, Reason string
}

// LeftOut lists the input files passed over: files of the folders that are neither NIfTI
// volumes nor DICOM images (not DICOM, DICOM without an image, not a regular file), and exact
// duplicates of a DICOM series' files. Hidden files are not listed.
func (d *Discovery) LeftOut() []LeftOut {
	var out []LeftOut
	for _, s := range d.Skipped {
		reason := s.Err.Error()
		switch {
		case errors.Is(s.Err, dicom.ErrNotDICOM):
			reason = "not a NIfTI volume or a DICOM file"
		case errors.Is(s.Err, dicom.ErrNoPixels):
			reason = "DICOM without an image (a DICOMDIR, a report...)"
		case errors.Is(s.Err, regular.ErrNotRegular):
			reason = "not a regular file"
		}
		out = append(out, LeftOut{s.Path, reason})
	}
	for _, j := range d.Jobs {
		if j.Series == nil {
			continue
		}
		for _, f := range j.Series.Duplicates {
			out = append(out, LeftOut{f, "exact duplicate of a file of DICOM series " + j.Series.ID() + " (same SOP Instance UID, same bytes)"})
		}
	}
	return out
}
