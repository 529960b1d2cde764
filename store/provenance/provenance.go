// Package provenance records in every mask how it was made, and decides on a rerun whether a
// mask can be trusted: voxpipe's version, the model's name and sha256, the engine and its
// precision, and a fingerprint of the input.
//
// The record is JSON in a NIfTI header extension of the mask (ecode 6, NIFTI_ECODE_COMMENT),
// so it travels with the file and any NIfTI tool shows it (nibabel: img.header.extensions). It
// holds nothing specific to a run (no run id, no time of day), so the same input and model give
// byte-identical mask files whichever run or process made them; the run that made a mask is in
// the records (summary.csv's output column).
//
// The input's fingerprint is, per file (a .nii or .nii.gz, or a .hdr/.img pair), its size and
// modification time (ns), plus a content hash of the files' bytes as stored, concatenated in
// order: XXH3-128 over 16 MiB pieces, hashed in parallel, then XXH3-128 of the pieces' digests
// (16 bytes each, big-endian, in order). With coreutils and the xxhash package it is
//
//	cat FILES | split -b 16M --filter 'xxh128sum | cut -c1-32' | xxd -r -p | xxh128sum
//
// On a rerun a mask is trusted when the sizes and mtimes still match (no input is read again:
// an unattended rerun over a large finished folder costs a stat per file); Options.VerifyHash
// also recomputes the hash. XXH3 rather than SHA-256: it runs at memory speed. Pieces hashed in
// parallel rather than one stream, which would sit on the read's critical path (docs/perf.md):
// the pieces take a few ms on all cores while the GPU segments.
package provenance

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/zeebo/xxh3"
	"golang.org/x/sync/errgroup"

	"voxpipe/internal/hostmem"
	"voxpipe/internal/regular"
	"voxpipe/io/nifti"
)

// Generator marks voxpipe's own records.
const Generator = "voxpipe"

// ErrNoRecord: the file holds no voxpipe provenance (not a voxpipe mask).
var ErrNoRecord = errors.New("provenance: no voxpipe provenance in the file")

// Record is a mask's provenance.
type Record struct {
	Generator string `json:"generator"` // Generator
	Version   string `json:"version"`   // voxpipe's version
	Model     Model  `json:"model"`
	Engine    string `json:"engine"`    // engine kind: cpu, cuda
	Precision string `json:"precision"` // fp32, fp16
	Input     Input  `json:"input"`
	// Grid is how the volume met the model: its orientation and voxel size, and the model's
	// when it was reoriented or resampled (summary.csv's grid column). Empty in masks of
	// versions that segmented every volume as stored.
	Grid string `json:"grid,omitempty"`
	// SEG is the file name of the DICOM SEG written beside the mask of a DICOM series
	// (records.SEGPath), empty when none was.
	SEG string `json:"seg,omitempty"`
}

// Model identifies the weights.
type Model struct {
	Name   string `json:"name"`
	SHA256 string `json:"sha256"` // of the weights file's bytes
}

// ModelOf identifies weights by name and content.
func ModelOf(name string, weights []byte) Model {
	sum := sha256.Sum256(weights)
	return Model{Name: name, SHA256: hex.EncodeToString(sum[:])}
}

// Input is the input volume's fingerprint.
type Input struct {
	// Path is the input's own location (absolute, links resolved): the .nii(.gz) or .hdr. Two
	// inputs with one mask path (a/x.nii and b/x.nii under one output folder) are told apart
	// by it. Empty for a DICOM series (identified by its UIDs) and in masks of older versions.
	Path  string `json:"path,omitempty"`
	Files []File `json:"files"`            // the .nii(.gz), or the .hdr then the .img of a pair
	XXH3  string `json:"xxh3_128_tree16m"` // Hash of the files' bytes as stored, concatenated in order
	// Volume is the volume of a 4D file that was segmented (--volume), nil for a 3D file.
	Volume *int `json:"volume,omitempty"`
	// DICOM identifies a DICOM series input (its Files are the series' files, in slice order).
	DICOM *DICOMSeries `json:"dicom,omitempty"`
}

// DICOMSeries identifies the DICOM series a mask was made from.
type DICOMSeries struct {
	StudyInstanceUID  string `json:"study_instance_uid"`
	SeriesInstanceUID string `json:"series_instance_uid"`
	Part              int    `json:"part,omitempty"` // of a UID split by orientation, size or echo
}

// File is one input file as it was when read.
type File struct {
	Name  string `json:"name"` // base name
	Size  int64  `json:"size"`
	MTime string `json:"mtime"` // RFC 3339 with nanoseconds, UTC
}

// Stat fingerprints the volume at path by its files' names, sizes and modification times,
// without reading them (XXH3 is left empty: Hash fills it). Files that are not regular are
// refused.
func Stat(path string) (Input, []string, error) {
	paths, err := nifti.Files(path)
	if err != nil {
		return Input{}, nil, err
	}
	in, files, err := StatFiles(paths)
	if err != nil {
		return in, files, err
	}
	if in.Path, err = filepath.Abs(path); err != nil {
		return Input{}, nil, fmt.Errorf("provenance: %w", err)
	}
	if resolved, err := filepath.EvalSymlinks(in.Path); err == nil {
		in.Path = resolved
	}
	return in, files, nil
}

// source names what the input is, for telling two inputs apart: its path, or its DICOM
// series' UIDs; empty when the record predates both.
func (in Input) source() string {
	if in.DICOM != nil {
		return fmt.Sprintf("DICOM series %s (part %d)", in.DICOM.SeriesInstanceUID, in.DICOM.Part)
	}
	return in.Path
}

// StatFiles fingerprints the files at paths, in order, as Stat does (a DICOM series' files).
func StatFiles(paths []string) (Input, []string, error) {
	var in Input
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return Input{}, nil, fmt.Errorf("provenance: %w", err)
		}
		if !st.Mode().IsRegular() {
			return Input{}, nil, fmt.Errorf("provenance: %s is not a regular file (%s)", p, st.Mode().Type())
		}
		in.Files = append(in.Files, File{Name: filepath.Base(p), Size: st.Size(), MTime: st.ModTime().UTC().Format(time.RFC3339Nano)})
	}
	return in, paths, nil
}

// SameFiles reports whether two fingerprints name the same files with the same sizes and
// modification times (the hash is not compared).
func (in Input) SameFiles(o Input) bool {
	if len(in.Files) != len(o.Files) {
		return false
	}
	for i := range in.Files {
		if in.Files[i] != o.Files[i] {
			return false
		}
	}
	return true
}

// hashPiece is the piece size of Hash's tree. A variable for tests.
var hashPiece = 16 << 20

// Hash returns the content hash of the files' bytes, concatenated in order, as 32 hex digits
// (see the package doc): XXH3-128 of the XXH3-128 digests of its 16 MiB pieces, the pieces
// hashed on up to GOMAXPROCS goroutines. It reads the files through read-only mappings (no
// copy); a file cut short meanwhile is an error, not a crash. ctx stops it between pieces.
func Hash(ctx context.Context, paths []string) (string, error) {
	var maps [][]byte
	defer func() {
		for _, b := range maps {
			hostmem.Unmap(b)
		}
	}()
	var total int
	for _, p := range paths {
		b, err := mapFile(p)
		if err != nil {
			return "", err
		}
		if b != nil {
			maps = append(maps, b)
			total += len(b)
		}
	}
	n := max(1, (total+hashPiece-1)/hashPiece)
	digests := make([]byte, 16*n)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(runtime.GOMAXPROCS(0))
	for i := range n {
		g.Go(func() error {
			if err := gctx.Err(); err != nil {
				return context.Cause(gctx)
			}
			sum, err := hashRange(maps, i*hashPiece, min((i+1)*hashPiece, total))
			if err != nil {
				return err
			}
			b := sum.Bytes()
			copy(digests[16*i:], b[:])
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return "", err
	}
	sum := xxh3.Hash128(digests).Bytes()
	return hex.EncodeToString(sum[:]), nil
}

// hashRange hashes bytes [lo, hi) of the concatenation of bufs. A fault reading a mapping (the
// file was cut short by another process) is returned as an error.
func hashRange(bufs [][]byte, lo, hi int) (sum xxh3.Uint128, err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			if _, ok := r.(interface{ Addr() uintptr }); !ok {
				panic(r)
			}
			err = errors.New("provenance: an input file changed while it was hashed")
		}
	}()
	h := xxh3.New128()
	off := 0
	for _, b := range bufs {
		if a, z := max(lo, off), min(hi, off+len(b)); a < z {
			h.Write(b[a-off : z-off])
		}
		off += len(b)
	}
	return h.Sum128(), nil
}

// mapFile maps the file at path read-only; nil for an empty file.
func mapFile(path string) ([]byte, error) {
	f, st, err := regular.Open(path)
	if err != nil {
		return nil, fmt.Errorf("provenance: %w", err)
	}
	defer f.Close()
	n := st.Size()
	if n == 0 {
		return nil, nil
	}
	if int64(int(n)) != n {
		return nil, fmt.Errorf("provenance: %s: too large to map", path)
	}
	b, err := hostmem.MapFile(f, int(n))
	if err != nil {
		return nil, fmt.Errorf("provenance: %w", err)
	}
	return b, nil
}

// Extension encodes the record as a NIfTI header extension.
func (r Record) Extension() nifti.Extension {
	b, err := json.Marshal(r)
	if err != nil {
		panic(err) // plain strings and numbers
	}
	return nifti.Extension{Code: nifti.ExtCodeComment, Data: b}
}

// FromHeader returns the voxpipe record among a header's extensions.
func FromHeader(h *nifti.Header) (Record, error) {
	for _, e := range h.Extensions {
		if e.Code != nifti.ExtCodeComment {
			continue
		}
		text := e.Text()
		if !strings.HasPrefix(text, "{") {
			continue
		}
		var r Record
		if json.Unmarshal([]byte(text), &r) == nil && r.Generator == Generator {
			return r, nil
		}
	}
	return Record{}, ErrNoRecord
}

// Read returns the provenance of the mask at path: its header parsed, and its record.
// ErrNoRecord when the file is NIfTI without a voxpipe record.
func Read(path string) (*nifti.Header, Record, error) {
	h, err := nifti.ReadHeader(path)
	if err != nil {
		return nil, Record{}, err
	}
	r, err := FromHeader(h)
	return h, r, err
}

// IsVoxpipeOutput reports whether the file at path is a mask voxpipe wrote (by its
// provenance). It reads the header only.
func IsVoxpipeOutput(path string) bool {
	_, _, err := Read(path)
	return err == nil
}

// Verdict is what a rerun should do with a volume whose mask path is occupied, or not.
type Verdict int

const (
	// Redo: no mask, or a voxpipe mask that is stale or damaged.
	Redo Verdict = iota
	// UpToDate: the mask parses, has the input's dims, and was made from this input with
	// this model.
	UpToDate
	// Conflict: something voxpipe did not write is at the mask's path.
	Conflict
)

// Options tunes Check.
type Options struct {
	VerifyHash bool // also recompute the input's hash (reads the whole input)
	// Grid, when set, is how the volume would meet the model now (Record.Grid); a mask made
	// another way is redone. AsStored says that way is the volume as stored, which is how masks
	// without a grid were made.
	Grid     string
	AsStored bool
}

// Check decides on the mask at mask for the input at input (fingerprinted as cur, with the
// files paths) and model, and says why.
func Check(ctx context.Context, mask string, inputDims [3]int, cur Input, paths []string, model Model, opt Options) (Verdict, string) {
	st, err := os.Lstat(mask)
	switch {
	case errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR):
		return Redo, "new"
	case err != nil:
		return Conflict, fmt.Sprintf("cannot inspect the file at the mask's path: %v", err)
	case !st.Mode().IsRegular():
		return Conflict, fmt.Sprintf("a %s, not a mask, is at the mask's path", describeMode(st.Mode()))
	}
	h, rec, err := Read(mask)
	if err != nil {
		return Conflict, fmt.Sprintf("the file at the mask's path has no voxpipe provenance (%v)", err)
	}
	if was, now := rec.Input.source(), cur.source(); was != "" && now != "" && was != now {
		return Conflict, fmt.Sprintf("the mask was made from another input: %s, not %s (two inputs map to this mask path: rename one, or give them separate output folders)", was, now)
	}
	if got := [3]int{h.NX(), h.NY(), h.NZ()}; got != inputDims {
		why := fmt.Sprintf("mask dims %dx%dx%d differ from the input's %dx%dx%d", got[0], got[1], got[2], inputDims[0], inputDims[1], inputDims[2])
		if !rec.Input.SameFiles(cur) { // a DICOM series that gained or lost slices: say which
			why = "input changed since the mask was made (" + describeChange(rec.Input, cur) + "); " + why
		}
		return Redo, why
	}
	if err := nifti.CheckComplete(mask, h); err != nil {
		return Redo, fmt.Sprintf("mask damaged: %v", err)
	}
	if rec.Model.SHA256 != model.SHA256 {
		return Redo, fmt.Sprintf("model changed (mask made with %s sha256 %.12s, now %s sha256 %.12s)", rec.Model.Name, rec.Model.SHA256, model.Name, model.SHA256)
	}
	if !sameVolume(rec.Input.Volume, cur.Volume) {
		return Redo, fmt.Sprintf("mask made from volume %s of the input, now volume %s", volumeName(rec.Input.Volume), volumeName(cur.Volume))
	}
	if !rec.Input.SameFiles(cur) {
		return Redo, "input changed since the mask was made (" + describeChange(rec.Input, cur) + ")"
	}
	if opt.Grid != "" && rec.Grid != opt.Grid && !(rec.Grid == "" && opt.AsStored) {
		return Redo, fmt.Sprintf("the model would see the volume otherwise (mask made with grid %q, now %q)", rec.Grid, opt.Grid)
	}
	if opt.VerifyHash {
		sum, err := Hash(ctx, paths)
		if err != nil {
			return Redo, fmt.Sprintf("input could not be hashed: %v", err)
		}
		if sum != rec.Input.XXH3 {
			return Redo, "input content changed since the mask was made (its hash differs)"
		}
	}
	return UpToDate, "mask up to date"
}

func describeMode(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "folder"
	case m&fs.ModeSymlink != 0:
		return "symbolic link"
	case m&fs.ModeNamedPipe != 0:
		return "named pipe"
	case m&fs.ModeSocket != 0:
		return "socket"
	case m&fs.ModeDevice != 0:
		return "device"
	}
	return "special file"
}

func describeChange(was, now Input) string {
	if len(was.Files) != len(now.Files) {
		return describeCount(was, now)
	}
	var parts []string
	for i := range was.Files {
		w, n := was.Files[i], now.Files[i]
		switch {
		case w.Name != n.Name:
			parts = append(parts, fmt.Sprintf("file %s, now %s", w.Name, n.Name))
		case w.Size != n.Size:
			parts = append(parts, fmt.Sprintf("%s: size %d, now %d", n.Name, w.Size, n.Size))
		case w.MTime != n.MTime:
			parts = append(parts, fmt.Sprintf("%s: modified %s, now %s", n.Name, w.MTime, n.MTime))
		}
	}
	return strings.Join(parts, "; ")
}

// describeCount describes a change in the number of files: a DICOM series that grew (or
// shrank), and the files new or gone, by name.
func describeCount(was, now Input) string {
	in := func(f File, files []File) bool {
		for _, o := range files {
			if o.Name == f.Name {
				return true
			}
		}
		return false
	}
	var added, gone []string
	for _, f := range now.Files {
		if !in(f, was.Files) {
			added = append(added, f.Name)
		}
	}
	for _, f := range was.Files {
		if !in(f, now.Files) {
			gone = append(gone, f.Name)
		}
	}
	s := fmt.Sprintf("%d files, now %d", len(was.Files), len(now.Files))
	if now.DICOM != nil {
		verb := "grew"
		if len(now.Files) < len(was.Files) {
			verb = "shrank"
		}
		s = fmt.Sprintf("the DICOM series %s from %d to %d files", verb, len(was.Files), len(now.Files))
	}
	if len(added) > 0 {
		s += "; new: " + nameList(added)
	}
	if len(gone) > 0 {
		s += "; gone: " + nameList(gone)
	}
	return s
}

// nameList joins file names for a reason, the first few of them.
func nameList(names []string) string {
	const most = 5
	if len(names) > most {
		return fmt.Sprintf("%s and %d more", strings.Join(names[:most], ", "), len(names)-most)
	}
	return strings.Join(names, ", ")
}

func sameVolume(a, b *int) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }

func volumeName(v *int) string {
	if v == nil {
		return "none (a 3D file)"
	}
	return fmt.Sprint(*v)
}
