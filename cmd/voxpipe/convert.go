package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/urfave/cli/v2"

	"voxpipe/internal/hostmem"
	"voxpipe/io/dicom"
	"voxpipe/io/nifti"
)

func init() {
	commands = append(commands, &cli.Command{
		Name:      "convert",
		Usage:     "convert DICOM series to NIfTI volumes with dcm2niix's geometry",
		ArgsUsage: "DICOMDIR...",
		Description: "Reads the DICOM files in the folders (and files) given, groups them into series\n" +
			"(SeriesInstanceUID, split where orientation, size or echo differ, as dcm2niix splits),\n" +
			"and writes each series as OUT/<name>.nii.gz: the stored pixel values (masked to BitsStored),\n" +
			"RescaleSlope/Intercept as scl_slope/scl_inter (float32 rescaled values when they vary\n" +
			"by slice), and the affine dcm2niix gives: rows bottom-up, slices ascending along the\n" +
			"normal, in sform and qform. Series with a missing slice, varying spacing, gantry tilt or\n" +
			"several volumes, and compressed syntaxes other than RLE, fail with the reason.\n" +
			"Lines on stderr name series by ID (a hash of the SeriesInstanceUID) and number, never\n" +
			"by patient data. Exit status: 0 every series converted, 1 one failed or none found,\n" +
			"2 usage.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "out", Aliases: []string{"o"}, Usage: "output folder (created); required unless --check"},
			&cli.StringFlag{Name: "dicom-name", Value: dicom.DefaultName, Usage: "file name template: %i PatientID, %t StudyDate, %s SeriesNumber, %d SeriesDescription, %p ProtocolName, %m Modality, %e echo, %j/%k series/study UID, %h series ID"},
			&cli.StringFlag{Name: "format", Value: "nii.gz", Usage: "nii or nii.gz"},
			&cli.IntFlag{Name: "workers", Usage: "threads parsing and reading files (0: all cores)"},
			&cli.BoolFlag{Name: "check", Usage: "read every series whole (all pixels) and write nothing: is the folder convertible?"},
			&cli.BoolFlag{Name: "quiet", Aliases: []string{"q"}, Usage: "print nothing but errors"},
		},
		Action: convertAction,
	})
}

func convertAction(c *cli.Context) error {
	if c.NArg() == 0 {
		return usageError{errors.New("convert: give at least one DICOM folder or file")}
	}
	template, format := c.String("dicom-name"), c.String("format")
	if c.String("out") == "" && !c.Bool("check") {
		return usageError{errors.New("convert: give the output folder (-o OUT), or --check")}
	}
	if err := dicom.CheckName(template); err != nil {
		return usageError{fmt.Errorf("convert: --dicom-name: %w", err)}
	}
	if format != "nii" && format != "nii.gz" {
		return usageError{fmt.Errorf("convert: --format %q: want nii or nii.gz", format)}
	}
	scan, err := dicom.ScanPaths(c.Args().Slice(), c.Int("workers"))
	if err != nil {
		return fmt.Errorf("convert: %w", err)
	}
	stderr := c.App.ErrWriter
	notImages := 0
	for _, sk := range scan.Skipped {
		switch {
		case errors.Is(sk.Err, dicom.ErrNotDICOM) || errors.Is(sk.Err, dicom.ErrNoPixels):
			notImages++
		case !c.Bool("quiet"):
			fmt.Fprintf(stderr, "skipped %v\n", sk.Err)
		}
	}
	if notImages > 0 && !c.Bool("quiet") {
		fmt.Fprintf(stderr, "skipped %d files that are not DICOM images (DICOMDIR, reports, other files)\n", notImages)
	}
	if len(scan.Series) == 0 {
		return fmt.Errorf("convert: no DICOM image series found in %d files", len(scan.Skipped))
	}
	out := c.String("out")
	if !c.Bool("check") {
		if err := os.MkdirAll(out, 0o755); err != nil {
			return fmt.Errorf("convert: %w", err)
		}
	}
	failed := 0
	for i, name := range dicom.Names(scan.Series, template) {
		s := scan.Series[i]
		path := filepath.Join(out, name+"."+format)
		if c.Bool("check") {
			path = ""
		}
		err := convertSeries(s, path, c.Int("workers"))
		if err != nil {
			failed++
			fmt.Fprintf(stderr, "series %s (number %d): %v\n", s.ID(), s.Number, err)
			continue
		}
		if !c.Bool("quiet") {
			d := s.Dims()
			fmt.Fprintf(stderr, "series %s (number %d): %dx%dx%d from %d files\n", s.ID(), s.Number, d[0], d[1], d[2], len(s.Files))
		}
	}
	if failed > 0 {
		return cli.Exit(fmt.Sprintf("convert: %d of %d series failed", failed, len(scan.Series)), exitFailed)
	}
	return nil
}

// convertSeries reads the series and writes it to path ("": read only). The volume lives
// outside the Go heap (anonymous mmap, huge pages where allowed): a 512x512x1000 series faults
// its 500 MB in a fraction of the time make() takes to zero it (docs/perf.md).
func convertSeries(s *dicom.Series, path string, workers int) error {
	if s.Err != nil {
		return s.Err
	}
	data, err := hostmem.Map(int(s.Voxels()) * s.StoredType().Size())
	if err != nil {
		return err
	}
	defer hostmem.Unmap(data)
	dt, err := s.ReadRaw(data, workers)
	if err != nil || path == "" {
		return err
	}
	return nifti.Write(path, s.Header(dt), data, nifti.WriteOptions{Level: nifti.DefaultLevel, Workers: workers})
}
