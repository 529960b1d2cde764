package main

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"voxpipe/io/dicom"
)

// Errors of picking a reference series (export-seg, convert of a SEG).
var (
	errNoReference    = errors.New("no DICOM image series")
	errSeveralSeries  = errors.New("several DICOM series: pick one with --series UID")
	errSeriesNotFound = errors.New("no series with that SeriesInstanceUID")
)

// referenceSeries scans dir (a folder or file) for DICOM image series and returns the one a
// SEG refers to: the only one, or the one whose SeriesInstanceUID is uid. A series that
// cannot be read is an error with its reason; several series without uid list their UIDs.
func referenceSeries(dir, uid string, workers int) (*dicom.Series, error) {
	if _, err := os.Stat(dir); err != nil {
		return nil, fmt.Errorf("reference %w", err)
	}
	scan, err := dicom.ScanPaths([]string{dir}, workers)
	if err != nil {
		return nil, fmt.Errorf("reference %s: %w", dir, err)
	}
	var found []*dicom.Series
	for _, s := range scan.Series {
		if uid == "" || s.UID == uid {
			found = append(found, s)
		}
	}
	switch {
	case len(scan.Series) == 0:
		return nil, fmt.Errorf("reference %s: %w (%d files skipped)", dir, errNoReference, len(scan.Skipped))
	case len(found) == 0:
		return nil, fmt.Errorf("reference %s: --series %s: %w; it holds %s", dir, uid, errSeriesNotFound, seriesUIDs(scan.Series))
	case len(found) > 1 && uid == "":
		return nil, fmt.Errorf("reference %s: %w; it holds %s", dir, errSeveralSeries, seriesUIDs(scan.Series))
	case len(found) > 1:
		return nil, fmt.Errorf("reference %s: series %s has %d parts (split by orientation, size or echo); a SEG refers to one volume", dir, uid, len(found))
	}
	s := found[0]
	if s.Err != nil {
		return nil, fmt.Errorf("reference %s: series %s cannot be read: %w", dir, s.UID, s.Err)
	}
	return s, nil
}

// seriesUIDs lists series as "UID (number N, M files)".
func seriesUIDs(ss []*dicom.Series) string {
	var out []string
	for _, s := range ss {
		out = append(out, fmt.Sprintf("%s (number %d, %d files)", s.UID, s.Number, len(s.Files)))
	}
	return strings.Join(out, ", ")
}
