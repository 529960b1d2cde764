package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/urfave/cli/v2"

	"voxpipe/internal/hostmem"
	"voxpipe/io/dicom"
	"voxpipe/io/nifti"
)

func init() {
	commandMakers = append(commandMakers, func() *cli.Command {
		return &cli.Command{
			Name:      "convert",
			Usage:     "convert DICOM series to NIfTI volumes with dcm2niix's geometry",
			ArgsUsage: "DICOMDIR... | SEG.dcm --reference SERIES_DIR",
			Description: "Reads the DICOM files in the folders (and files) given, groups them into series\n" +
				"(SeriesInstanceUID, split where orientation, size or echo differ, as dcm2niix splits),\n" +
				"and writes each series as OUT/<name>.nii.gz: the stored pixel values (masked to BitsStored),\n" +
				"RescaleSlope/Intercept as scl_slope/scl_inter (float32 rescaled values when they vary\n" +
				"by slice), and the affine dcm2niix gives: rows bottom-up, slices ascending along the\n" +
				"normal, in sform and qform. Series with a missing slice, varying spacing, gantry tilt or\n" +
				"several volumes, a file that cannot be read (cut short, damaged, unreadable), two\n" +
				"different files with one SOP Instance UID, and compressed syntaxes other than RLE,\n" +
				"fail with the reason and the files; exact copies of a file are left out, with a note.\n" +
				"Lines on stderr name series by ID (a hash of the SeriesInstanceUID) and number, never\n" +
				"by patient data. Exit status: 0 every series converted, 1 one failed or none found,\n" +
				"2 usage (a bad flag; an input that does not exist; --out naming a file).\n" +
				"A DICOM SEG with --reference SERIES_DIR (and --series UID when the folder holds several\n" +
				"series): writes the SEG as one uint8 NIfTI label mask, -o OUT.nii.gz, on the grid of that\n" +
				"series (segment N is label N; where segments overlap, the highest, with a warning).",
			Flags: []cli.Flag{
				&cli.StringFlag{Name: "out", Aliases: []string{"o"}, Usage: "output folder (created); required unless --check"},
				&cli.StringFlag{Name: "dicom-name", Value: dicom.DefaultName, Usage: "file name template (the default holds no patient data): %i PatientID, %t StudyDate, %s SeriesNumber, %d SeriesDescription, %p ProtocolName, %m Modality, %e echo, %j/%k series/study UID, %h series ID"},
				&cli.StringFlag{Name: "format", Value: "nii.gz", Usage: "nii or nii.gz"},
				&cli.IntFlag{Name: "workers", Usage: "threads parsing and reading files (0: all cores; not negative)"},
				&cli.BoolFlag{Name: "check", Usage: "read every series whole (all pixels) and write nothing: is the folder convertible?"},
				&cli.BoolFlag{Name: "quiet", Aliases: []string{"q"}, Usage: "print nothing but errors"},
				&cli.StringFlag{Name: "reference", Usage: "of a DICOM SEG: the folder of the series it segments; -o then names the mask file"},
				&cli.StringFlag{Name: "series", Usage: "of a DICOM SEG: SeriesInstanceUID of the reference series, when the folder holds several"},
			},
			Action: convertAction,
		}
	})
}

func convertAction(c *cli.Context) error {
	if c.NArg() == 0 {
		return usageError{errors.New("convert: give at least one DICOM folder or file")}
	}
	if isSEGConvert(c) {
		return convertSEGAction(c)
	}
	template, format, out := c.String("dicom-name"), c.String("format"), c.String("out")
	if out == "" && !c.Bool("check") {
		return usageError{errors.New("convert: give the output folder (--out OUT, -o OUT), or --check")}
	}
	if out != "" && !c.Bool("check") {
		if err := checkOutFolder(out); err != nil {
			return usageError{fmt.Errorf("convert: --out %s: %w", out, err)}
		}
	}
	if err := dicom.CheckName(template); err != nil {
		return usageError{fmt.Errorf("convert: --dicom-name: %w", err)}
	}
	if format != "nii" && format != "nii.gz" {
		return usageError{fmt.Errorf("convert: --format %q: want nii or nii.gz", format)}
	}
	if n := c.Int("workers"); n < 0 {
		return usageError{fmt.Errorf("convert: --workers %d: give a count of threads, or 0 for all cores", n)}
	}
	for _, in := range c.Args().Slice() {
		if _, err := os.Stat(in); err != nil {
			return usageError{fmt.Errorf("convert: input %w", err)}
		}
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
		if len(s.Duplicates) > 0 && !c.Bool("quiet") {
			fmt.Fprintf(stderr, "series %s (number %d): left out %d exact copies of its files: %s\n", s.ID(), s.Number, len(s.Duplicates), strings.Join(s.Duplicates, ", "))
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

// checkOutFolder checks, writing nothing, that out is a folder or can be made one: it, or
// the nearest of its parents that exists, is a folder.
func checkOutFolder(out string) error {
	for p := filepath.Clean(out); ; p = filepath.Dir(p) {
		st, err := os.Stat(p)
		switch {
		case err == nil && st.IsDir():
			return nil
		case err == nil && p == filepath.Clean(out):
			return errors.New("not a folder: the output must be a folder (convert writes one NIfTI file per series into it)")
		case err == nil:
			return fmt.Errorf("%s is not a folder, so the output folder cannot be made", p)
		case !errors.Is(err, fs.ErrNotExist):
			return err
		case p == filepath.Dir(p):
			return nil
		}
	}
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
