package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/urfave/cli/v2"

	"voxpipe/io/dicomseg"
	"voxpipe/io/nifti"
)

// isSEGConvert reports whether convert was asked to turn a DICOM SEG back into a label mask:
// --reference or --series given, or a single argument that is a SEG file.
func isSEGConvert(c *cli.Context) bool {
	return c.IsSet("reference") || c.IsSet("series") || c.NArg() == 1 && dicomseg.IsSEG(c.Args().First())
}

// convertSEGAction writes the SEG given as a uint8 NIfTI label mask on the grid of its
// reference series (segment N becomes label N; where segments overlap, the highest number).
// Nothing is written when the SEG, the reference or the output cannot be used.
func convertSEGAction(c *cli.Context) error {
	if c.NArg() != 1 {
		return usageError{errors.New("convert --reference: give one DICOM SEG file")}
	}
	segPath, ref, out := c.Args().First(), c.String("reference"), c.String("out")
	if ref == "" {
		return usageError{fmt.Errorf("convert: %s is a DICOM Segmentation: give the series it segments with --reference SERIES_DIR", segPath)}
	}
	for _, f := range []string{"dicom-name", "format"} {
		if c.IsSet(f) {
			return usageError{fmt.Errorf("convert: --%s does not apply to a SEG (its mask goes to -o FILE.nii[.gz])", f)}
		}
	}
	if n := c.Int("workers"); n < 0 {
		return usageError{fmt.Errorf("convert: --workers %d: give a count of threads, or 0 for all cores", n)}
	}
	if out == "" && !c.Bool("check") {
		return usageError{errors.New("convert: give the mask file to write (-o OUT.nii.gz), or --check")}
	}
	if out != "" && !c.Bool("check") {
		if err := checkMaskOut(out); err != nil {
			return usageError{fmt.Errorf("convert: -o %s: %w", out, err)}
		}
	}
	seg, err := dicomseg.ReadFile(segPath)
	if err != nil {
		return fmt.Errorf("convert: %w", err)
	}
	s, err := referenceSeries(ref, c.String("series"), c.Int("workers"))
	if err != nil {
		return fmt.Errorf("convert: %w", err)
	}
	mask, info, err := seg.Mask(s)
	if err != nil {
		return fmt.Errorf("convert: %s on series %s: %w", segPath, s.UID, err)
	}
	stderr, quiet := c.App.ErrWriter, c.Bool("quiet")
	if info.Overlapping > 0 {
		fmt.Fprintf(stderr, "warning: %d voxels belong to more than one segment; the mask holds the highest segment number there\n", info.Overlapping)
	}
	if info.ByPosition > 0 && !quiet {
		fmt.Fprintf(stderr, "note: %d frames have no source image reference and were placed by their position\n", info.ByPosition)
	}
	maxLabel := uint8(0)
	for _, sg := range seg.Segments {
		maxLabel = max(maxLabel, uint8(sg.Number)) // Mask refused numbers above 255
	}
	if !c.Bool("check") {
		h := nifti.MaskHeader(s.Header(nifti.Uint8), maxLabel, "from DICOM SEG")
		if err := nifti.Write(out, h, mask, nifti.WriteOptions{Level: nifti.DefaultLevel, Workers: c.Int("workers")}); err != nil {
			return fmt.Errorf("convert: %w", err)
		}
	}
	if !quiet {
		d := s.Dims()
		fmt.Fprintf(stderr, "SEG %s: %d segments, %d frames on series %s (%dx%dx%d)", segPath, len(seg.Segments), len(seg.Frames), s.ID(), d[0], d[1], d[2])
		if !c.Bool("check") {
			fmt.Fprintf(stderr, " -> %s", out)
		}
		fmt.Fprintln(stderr)
	}
	return nil
}

// checkMaskOut checks, writing nothing, that out can be a NIfTI mask file: a .nii or .nii.gz
// name, not a folder, in a folder that exists.
func checkMaskOut(out string) error {
	lower := strings.ToLower(out)
	if !strings.HasSuffix(lower, ".nii") && !strings.HasSuffix(lower, ".nii.gz") {
		return errors.New("the mask of a SEG is one NIfTI file: name it .nii or .nii.gz")
	}
	if st, err := os.Stat(out); err == nil && st.IsDir() {
		return errors.New("is a folder; name the mask file")
	}
	if st, err := os.Stat(filepath.Dir(out)); err != nil || !st.IsDir() {
		return errors.New("its folder does not exist")
	}
	return nil
}
