package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"voxpipe/internal/regular"
	"voxpipe/io/dicom"
	"voxpipe/io/dicomseg"
	"voxpipe/jobs"
)

// printInfoOrSeries prints what info shows of path: a folder's NIfTI volumes and DICOM series
// (printFolder), a DICOM file's series (as run reads a DICOM file named on its own), or a NIfTI
// file's info.
func printInfoOrSeries(w io.Writer, path string, volume int) error {
	st, err := os.Stat(path)
	if err == nil && st.IsDir() {
		return printFolder(w, path, volume)
	}
	// dicom.Candidate leaves out NIfTI names, the .img of a pair included.
	if err == nil && st.Mode().IsRegular() && dicom.Candidate(filepath.Base(path)) && dicomseg.IsSEG(path) {
		return printSEG(w, path)
	}
	if err == nil && st.Mode().IsRegular() && dicom.Candidate(filepath.Base(path)) && isDICOMFile(path) {
		return printSeries(w, path)
	}
	return printInfo(w, path, volume)
}

// isDICOMFile reports whether the (regular) file at path is DICOM: it parses, or fails as a
// DICOM file does, not as something else.
func isDICOMFile(path string) bool {
	_, err := dicom.ParseFile(path)
	return err == nil || !errors.Is(err, dicom.ErrNotDICOM) && !errors.Is(err, regular.ErrNotRegular)
}

// printFolder prints the NIfTI volumes under dir (each as info prints a file, with its error
// if it has one) and then its DICOM series (printSeries). It fails when a volume or a series
// cannot be read, or when the folder holds neither.
func printFolder(w io.Writer, dir string, volume int) error {
	var volumes []string
	other := false // files that are DICOM candidates
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if path != dir && strings.HasPrefix(d.Name(), ".") {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		switch {
		case d.IsDir():
		case jobs.IsVolumeName(d.Name()):
			volumes = append(volumes, path)
		case dicom.Candidate(d.Name()):
			other = true
		}
		return nil
	})
	if err != nil {
		return err
	}
	if len(volumes) == 0 {
		return printSeries(w, dir) // a DICOM folder, or an empty one: printSeries says so
	}
	fmt.Fprintf(w, "%s\n  %d NIfTI volumes\n", dir, len(volumes))
	failed, misused := 0, 0
	for _, v := range volumes {
		if err := printInfo(w, v, volume); err != nil {
			fmt.Fprintf(w, "  %-11s %v\n", "error", err)
			var ue usageError
			if errors.As(err, &ue) {
				misused++
			} else {
				failed++
			}
		}
	}
	var seriesErr error
	if other {
		if seriesErr = printSeries(w, dir); errors.Is(seriesErr, errNoSeries) {
			seriesErr = nil // other files, no DICOM among them: the volumes are what the folder holds
		}
	}
	switch {
	case failed == 0 && misused == 0:
		return seriesErr
	case failed == 0 && seriesErr == nil:
		return usageError{fmt.Errorf("%s: %d of %d NIfTI volumes have no volume %d", dir, misused, len(volumes), volume)}
	}
	err = fmt.Errorf("%s: %d of %d NIfTI volumes cannot be read", dir, failed+misused, len(volumes))
	if seriesErr != nil {
		err = fmt.Errorf("%w; %w", err, seriesErr)
	}
	return err
}

// errNoSeries: a folder (or file) holds no DICOM image series.
var errNoSeries = errors.New("no NIfTI volumes or DICOM image series")

// printSeries lists the DICOM series under path (a folder, or one DICOM file) with their
// geometry, or why each cannot be read. Series are named by ID and number, never by patient
// data. It fails when a series cannot be read or none is found.
func printSeries(w io.Writer, path string) error {
	scan, err := dicom.ScanPaths([]string{path}, 0)
	if err != nil {
		fmt.Fprintf(w, "%s\n", path)
		return err
	}
	other := 0
	for _, sk := range scan.Skipped {
		if errors.Is(sk.Err, dicom.ErrNotDICOM) || errors.Is(sk.Err, dicom.ErrNoPixels) {
			other++
		}
	}
	fmt.Fprintf(w, "%s\n  %d DICOM series; %d files are not DICOM images\n", path, len(scan.Series), other)
	for _, sk := range scan.Skipped {
		if !errors.Is(sk.Err, dicom.ErrNotDICOM) && !errors.Is(sk.Err, dicom.ErrNoPixels) {
			fmt.Fprintf(w, "  skipped %v\n", sk.Err)
		}
	}
	failed := 0
	for _, s := range scan.Series {
		part := ""
		if s.Part > 0 {
			part = fmt.Sprintf(" part %d", s.Part)
		}
		fmt.Fprintf(w, "  series %s (number %d%s) %s %q: %d files, %v\n", s.ID(), s.Number, part, s.Modality, s.Description, len(s.Files), s.Syntax)
		if len(s.Duplicates) > 0 {
			fmt.Fprintf(w, "    duplicates  %d exact copies of its files left out: %s\n", len(s.Duplicates), strings.Join(s.Duplicates, ", "))
		}
		if s.Err != nil {
			failed++
			fmt.Fprintf(w, "    cannot be read: %v\n", s.Err)
			continue
		}
		d := s.Dims()
		fmt.Fprintf(w, "    dims        %d x %d x %d, %d-bit %s, stored %d bits\n", d[0], d[1], d[2], s.BitsAllocated, map[bool]string{true: "signed", false: "unsigned"}[s.Signed], s.BitsStored)
		fmt.Fprintf(w, "    voxel (mm)  %.6g x %.6g x %.6g\n", s.Spacing[0], s.Spacing[1], s.Spacing[2])
		if s.ScaleVaries {
			fmt.Fprintf(w, "    rescale     varies by slice (read as float32)\n")
		} else {
			fmt.Fprintf(w, "    rescale     slope %g, intercept %g\n", s.Slope, s.Intercept)
		}
		for r := range 3 {
			a := s.Affine[r]
			fmt.Fprintf(w, "    %-11s %10.4f %10.4f %10.4f %10.4f\n", map[int]string{0: "affine"}[r], a[0]+0, a[1]+0, a[2]+0, a[3]+0) // +0: no "-0.0000"
		}
	}
	if failed > 0 {
		return fmt.Errorf("%s: %d of %d series cannot be read", path, failed, len(scan.Series))
	}
	if len(scan.Series) == 0 {
		return fmt.Errorf("%s: %w", path, errNoSeries)
	}
	return nil
}
