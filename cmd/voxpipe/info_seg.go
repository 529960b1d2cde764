package main

import (
	"fmt"
	"io"
	"strings"

	"voxpipe/io/dicomseg"
)

// printSEG prints what info shows of a DICOM Segmentation: its UIDs, size and frames, each
// segment (label, codes, algorithm, frames) and the series it refers to. Patient data is not
// printed. It fails when the SEG cannot be read (ErrNotSEG: damaged, FRACTIONAL...).
func printSEG(w io.Writer, path string) error {
	fmt.Fprintf(w, "%s\n", path)
	seg, err := dicomseg.ReadFile(path)
	if err != nil {
		return err
	}
	field := func(name, format string, args ...any) {
		fmt.Fprintf(w, "  %-11s %s\n", name, fmt.Sprintf(format, args...))
	}
	field("format", "DICOM Segmentation (%s), %v", seg.SegmentationType, seg.TransferSyntax)
	field("instance", "%s", seg.SOPInstanceUID)
	field("series", "%s (number %d) %q", seg.SeriesInstanceUID, seg.SeriesNumber, seg.SeriesDescription)
	field("study", "%s", seg.StudyInstanceUID)
	field("frame ref", "%s", seg.FrameOfReferenceUID)
	field("frames", "%d of %d x %d (rows x columns)", len(seg.Frames), seg.Rows, seg.Columns)
	if seg.HasOrientation {
		o := seg.Orientation
		field("orientation", "%.6g %.6g %.6g / %.6g %.6g %.6g (rows, columns)", o[0], o[1], o[2], o[3], o[4], o[5])
	}
	if seg.PixelSpacing != ([2]float64{}) {
		field("spacing", "%.6g x %.6g mm (rows, columns), slice thickness %.6g mm", seg.PixelSpacing[0], seg.PixelSpacing[1], seg.SliceThickness)
	}
	field("segments", "%d", len(seg.Segments))
	for i, sg := range seg.Segments {
		fmt.Fprintf(w, "  segment %d  %q: %d frames\n", sg.Number, sg.Label, seg.SegmentFrames(sg.Number))
		fmt.Fprintf(w, "    category  %s\n", codeText(sg.Category))
		fmt.Fprintf(w, "    type      %s\n", codeText(sg.Type))
		alg := seg.AlgorithmTypes[i]
		if alg == "" {
			alg = "(no algorithm type)"
		}
		if sg.Algorithm != "" {
			alg += fmt.Sprintf(" %q", sg.Algorithm)
		}
		if sg.AlgorithmVersion != "" {
			alg += " version " + sg.AlgorithmVersion
		}
		fmt.Fprintf(w, "    algorithm %s\n", alg)
	}
	if len(seg.ReferencedSeries) == 0 {
		field("references", "no referenced series")
	}
	for _, r := range seg.ReferencedSeries {
		field("references", "series %s: %d instances", r.UID, len(r.Instances))
	}
	return nil
}

// codeText is a code as "Meaning (SCHEME value)".
func codeText(c dicomseg.Code) string {
	if c == (dicomseg.Code{}) {
		return "none"
	}
	return strings.TrimSpace(fmt.Sprintf("%q (%s %s)", c.Meaning, c.Scheme, c.Value))
}
