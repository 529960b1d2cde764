package dicom

import (
	"bytes"
	"cmp"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"slices"

	"voxpipe/internal/regular"
)

// Group assembles files into series (files without pixels are left out) and works out each
// series' geometry; a series that does not make a regular volume has Err set (wrapping
// ErrGeometry or ErrUnsupported). Series come sorted by StudyInstanceUID, SeriesNumber,
// SeriesInstanceUID and part. Of files with one SOPInstanceUID, byte-identical copies are
// left out (Series.Duplicates) and different ones fail their series (ErrDuplicate).
func Group(files []*File) []*Series { return group(files, nil) }

// broken is a candidate file that is DICOM, or could not be read to tell, and cannot be read:
// file is what could be read of it (nil if nothing), err why not (naming it).
type broken struct {
	path string
	file *File
	err  error
}

// group is Group, failing the series of each broken file: the series of its
// SeriesInstanceUID (every part) when it could be read, else every series with a file in its
// folder. A broken file that fails no series becomes a failed series of its own: one per
// SeriesInstanceUID, or one per folder for files that name none. No broken file is dropped.
func group(files []*File, bad []broken) []*Series {
	files, dups, conflicts := dedup(files)
	out := assembleAll(files)
	for _, s := range out {
		for _, f := range s.Files {
			s.Duplicates = append(s.Duplicates, dups[f]...)
		}
	}
	for _, c := range conflicts {
		for _, s := range out {
			if slices.Contains(s.Files, c[0]) || slices.Contains(s.Files, c[1]) {
				s.Err = fmt.Errorf("%w: %s and %s carry one SOP Instance UID but differ", ErrDuplicate, c[0].Path, c[1].Path)
			}
		}
	}
	failBroken(&out, bad)
	slices.SortStableFunc(out, func(a, b *Series) int {
		return cmp.Or(cmp.Compare(a.StudyUID, b.StudyUID), cmp.Compare(a.Number, b.Number), cmp.Compare(a.UID, b.UID),
			cmp.Compare(a.EchoNumber, b.EchoNumber), cmp.Compare(firstInstance(a), firstInstance(b)), cmp.Compare(a.folder, b.folder))
	})
	parts := map[string]int{}
	for _, s := range out {
		if s.folder == "" {
			parts[s.UID]++
		}
	}
	for _, s := range out {
		if s.folder == "" && parts[s.UID] > 1 {
			parts[s.UID+"#"]++
			s.Part = parts[s.UID+"#"]
		}
	}
	return out
}

// dedup leaves out files whose SOPInstanceUID an earlier file has with the same bytes
// (dups: the kept file's copies), and reports pairs that share one and differ.
func dedup(files []*File) (kept []*File, dups map[*File][]string, conflicts [][2]*File) {
	dups = map[*File][]string{}
	bySOP := map[string][]*File{}
	for _, f := range files {
		uid := f.SOPInstanceUID
		if uid == "" {
			kept = append(kept, f)
			continue
		}
		dup := false
		for _, g := range bySOP[uid] {
			if same, err := sameBytes(g, f); err == nil && same {
				dups[g] = append(dups[g], f.Path)
				dup = true
				break
			}
		}
		if dup {
			continue
		}
		if len(bySOP[uid]) > 0 {
			conflicts = append(conflicts, [2]*File{bySOP[uid][0], f})
		}
		bySOP[uid] = append(bySOP[uid], f)
		kept = append(kept, f)
	}
	return kept, dups, conflicts
}

// sameBytes reports whether two files hold the same bytes.
func sameBytes(a, b *File) (bool, error) {
	if a.size != b.size {
		return false, nil
	}
	ra, closeA, err := a.reader()
	if err != nil {
		return false, err
	}
	defer closeA()
	rb, closeB, err := b.reader()
	if err != nil {
		return false, err
	}
	defer closeB()
	ba, bb := make([]byte, windowSize), make([]byte, windowSize)
	for off := int64(0); off < a.size; off += windowSize {
		n := int(min(windowSize, a.size-off))
		if err := readFull(ra, ba[:n], off); err != nil {
			return false, err
		}
		if err := readFull(rb, bb[:n], off); err != nil {
			return false, err
		}
		if !bytes.Equal(ba[:n], bb[:n]) {
			return false, nil
		}
	}
	return true, nil
}

// reader opens the file for reading (its own source when it has one).
func (f *File) reader() (io.ReaderAt, func(), error) {
	if f.src != nil {
		return f.src, func() {}, nil
	}
	fh, _, err := regular.Open(f.Path)
	if err != nil {
		return nil, nil, err
	}
	return fh, func() { fh.Close() }, nil
}

// assembleAll keys each frame by SeriesInstanceUID, size, orientation, echo and pixel type,
// and assembles each key's slices into a series.
func assembleAll(files []*File) []*Series {
	type key struct {
		uid        string
		rows, cols int
		orient     [6]float64
		echo       int
		echoTime   float64
		bits       int
		signed     int
	}
	var keys []key
	byKey := map[int][]Slice{}
	for _, f := range files {
		if !f.HasPixels() {
			continue
		}
		for i, fr := range f.Frames {
			k := key{f.SeriesInstanceUID, f.Rows, f.Columns, fr.Orientation, f.EchoNumber, fr.EchoTime, f.BitsAllocated, f.PixelRepresentation}
			found := -1
			for j, o := range keys {
				if o.uid == k.uid && o.rows == k.rows && o.cols == k.cols && o.echo == k.echo && o.bits == k.bits &&
					o.signed == k.signed && math.Abs(o.echoTime-k.echoTime) <= orientTolerance && sameOrientation(o.orient, k.orient) {
					found = j
					break
				}
			}
			if found < 0 {
				found = len(keys)
				keys = append(keys, k)
			}
			byKey[found] = append(byKey[found], Slice{File: f, Frame: i, Position: fr.Position})
		}
	}
	var out []*Series
	for i, k := range keys {
		sl := byKey[i]
		s := seriesOf(sl[0].File)
		s.Rows, s.Columns, s.orient = k.rows, k.cols, k.orient
		seen := map[*File]bool{}
		for _, x := range sl {
			if !seen[x.File] {
				seen[x.File] = true
				s.Files = append(s.Files, x.File)
			}
		}
		s.Err = s.assemble(sl)
		out = append(out, s)
	}
	return out
}

// seriesOf is a series with f's identity and pixel format.
func seriesOf(f *File) *Series {
	return &Series{UID: f.SeriesInstanceUID, StudyUID: f.StudyInstanceUID, Number: f.SeriesNumber, EchoNumber: f.EchoNumber,
		Description: f.SeriesDescription, ProtocolName: f.ProtocolName, PatientID: f.PatientID,
		StudyDate: f.StudyDate, Modality: f.Modality, Rows: f.Rows, Columns: f.Columns,
		BitsAllocated: f.BitsAllocated, BitsStored: f.BitsStored, Signed: f.PixelRepresentation == 1, Syntax: f.Syntax}
}

// failBroken fails the series of each broken file (see group), adding series for those that
// fail none.
func failBroken(out *[]*Series, bad []broken) {
	fl := failures{by: map[*Series][]member{}}
	unnamed := fl.named(out, bad)
	fl.unnamed(out, unnamed)
	for _, s := range fl.order {
		s.Err = brokenError(s, fl.by[s])
	}
}

// member is a broken file that fails a series.
type member struct {
	err     error
	unnamed bool // the file names no series: it fails those of its folder
}

// failures are the broken files that fail each series, and the series in the order first
// failed.
type failures struct {
	by    map[*Series][]member
	order []*Series
}

func (fl *failures) fail(s *Series, m member) {
	if fl.by[s] == nil {
		fl.order = append(fl.order, s)
	}
	fl.by[s] = append(fl.by[s], m)
}

// named fails, for each broken file that names its series, every part of that series, or a
// series of its own made for the UID's broken files; it returns the files that name none.
func (fl *failures) named(out *[]*Series, bad []broken) (unnamed []broken) {
	byUID := map[string]*Series{} // series whose files are all broken
	for _, b := range bad {
		if b.file == nil || b.file.SeriesInstanceUID == "" {
			unnamed = append(unnamed, b)
			continue
		}
		uid := b.file.SeriesInstanceUID
		if s := byUID[uid]; s != nil {
			s.Files = append(s.Files, b.file)
			fl.fail(s, member{err: b.err})
			continue
		}
		hit := false
		for _, s := range *out {
			if s.UID == uid && s.folder == "" {
				fl.fail(s, member{err: b.err})
				hit = true
			}
		}
		if !hit {
			s := seriesOf(b.file)
			s.Files = []*File{b.file}
			byUID[uid] = s
			*out = append(*out, s)
			fl.fail(s, member{err: b.err})
		}
	}
	return unnamed
}

// unnamed fails, for each broken file that names no series, every series with a file in its
// folder, or else the folder's own failed series.
func (fl *failures) unnamed(out *[]*Series, unnamed []broken) {
	byFolder := map[string]*Series{}
	for _, b := range unnamed {
		dir, hit := filepath.Dir(b.path), false
		for _, s := range *out {
			if s.folder == "" && slices.ContainsFunc(s.Files, func(f *File) bool { return filepath.Dir(f.Path) == dir }) {
				fl.fail(s, member{err: b.err, unnamed: true})
				hit = true
			}
		}
		if hit {
			continue
		}
		s := byFolder[dir]
		if s == nil {
			s = &Series{folder: dir}
			byFolder[dir] = s
			*out = append(*out, s)
		}
		s.Files = append(s.Files, &File{Path: b.path})
		fl.fail(s, member{err: b.err})
	}
}

// brokenError is the error of series s failed by the broken files ms, wrapping theirs (the
// first three).
func brokenError(s *Series, ms []member) error {
	switch {
	case len(ms) == 1 && s.folder != "":
		return fmt.Errorf("a DICOM file that names no series cannot be read: %w", ms[0].err)
	case len(ms) == 1 && ms[0].unnamed:
		return fmt.Errorf("a file in the series' folder that names no series cannot be read (it may be one of its slices): %w", ms[0].err)
	case len(ms) == 1:
		return fmt.Errorf("a file of the series cannot be read: %w", ms[0].err)
	}
	const shown = 3
	format := fmt.Sprintf("%d files of the series or its folder cannot be read: ", len(ms))
	var args []any
	for i, m := range ms {
		if i == shown {
			format += fmt.Sprintf("; and %d more", len(ms)-shown)
			break
		}
		if i > 0 {
			format += "; "
		}
		format += "%w"
		args = append(args, m.err)
	}
	return fmt.Errorf(format, args...)
}

func firstInstance(s *Series) int {
	if len(s.slicesInFileOrder) == 0 {
		return 0
	}
	return s.slicesInFileOrder[0].File.InstanceNumber
}

func sameOrientation(a, b [6]float64) bool {
	for i := range a {
		if math.Abs(a[i]-b[i]) > orientTolerance {
			return false
		}
	}
	return true
}
