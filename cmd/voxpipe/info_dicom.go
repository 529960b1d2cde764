package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"voxpipe/io/dicom"
)

// printInfoOrSeries prints a NIfTI file's info, or the DICOM series of a folder.
func printInfoOrSeries(w io.Writer, path string, volume int) error {
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return printSeries(w, path)
	}
	return printInfo(w, path, volume)
}

// printSeries lists the DICOM series under dir with their geometry, or why each cannot be
// read. Series are named by ID and number, never by patient data. It fails when a series
// cannot be read or none is found.
func printSeries(w io.Writer, dir string) error {
	scan, err := dicom.ScanPaths([]string{dir}, 0)
	if err != nil {
		return err
	}
	other := 0
	for _, sk := range scan.Skipped {
		if errors.Is(sk.Err, dicom.ErrNotDICOM) || errors.Is(sk.Err, dicom.ErrNoPixels) {
			other++
		}
	}
	fmt.Fprintf(w, "%s\n  %d DICOM series; %d files are not DICOM images\n", dir, len(scan.Series), other)
	for _, sk := range scan.Skipped {
		if !errors.Is(sk.Err, dicom.ErrNotDICOM) && !errors.Is(sk.Err, dicom.ErrNoPixels) {
			fmt.Fprintf(w, "  unreadable %v\n", sk.Err)
		}
	}
	failed := 0
	for _, s := range scan.Series {
		part := ""
		if s.Part > 0 {
			part = fmt.Sprintf(" part %d", s.Part)
		}
		fmt.Fprintf(w, "  series %s (number %d%s) %s %q: %d files, %v\n", s.ID(), s.Number, part, s.Modality, s.Description, len(s.Files), s.Syntax)
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
		return fmt.Errorf("%s: %d of %d series cannot be read", dir, failed, len(scan.Series))
	}
	if len(scan.Series) == 0 {
		return fmt.Errorf("%s: no DICOM image series", dir)
	}
	return nil
}
