package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"

	"github.com/urfave/cli/v2"

	"voxpipe/internal/regular"
	"voxpipe/io/dicomseg"
	"voxpipe/io/nifti"
)

func init() {
	commandMakers = append(commandMakers, func() *cli.Command {
		return &cli.Command{
			Name:      "export-seg",
			Usage:     "write a label mask as a DICOM Segmentation (SEG) over its reference series",
			ArgsUsage: "MASK.nii[.gz]",
			Description: "Converts an integer label mask (NIfTI, any datatype and orientation) that lies on the\n" +
				"grid of a DICOM series into a DICOM SEG object over that series, as dcmqi's\n" +
				"itkimage2segimage does: one segment per label (segment N is label N), one frame per\n" +
				"source slice and segment with foreground, each referencing its source instance, in\n" +
				"the source's study and frame of reference. Segments are named \"Segment N\" unless\n" +
				"--labels maps label numbers to names (a JSON object {\"1\": \"liver\", ...} or\n" +
				"{\"1\": {\"name\": \"lesion\", \"category\": {\"scheme\": \"SCT\", \"value\": \"49755003\",\n" +
				"\"meaning\": \"Morphologically Altered Structure\"}, \"type\": {...}}}). Without codes a\n" +
				"segment is SNOMED CT Tissue/Tissue. A mask on another grid (size, spacing, origin,\n" +
				"direction), labels that are not integers in 0..255, and a reference folder with no\n" +
				"series, several (pick one with --series), or one that cannot be read, fail with the\n" +
				"reason and write nothing. Exit status: 0 written, 1 bad input, 2 usage.",
			Flags: []cli.Flag{
				&cli.StringFlag{Name: "reference", Aliases: []string{"r"}, Usage: "the DICOM series folder the mask was made on (required)"},
				&cli.StringFlag{Name: "out", Aliases: []string{"o"}, Usage: "the SEG file to write (required; replaced atomically)"},
				&cli.StringFlag{Name: "series", Usage: "SeriesInstanceUID of the reference series, when the folder holds several"},
				&cli.StringFlag{Name: "labels", Usage: "JSON file naming (and coding) the labels"},
				&cli.StringFlag{Name: "algorithm", Usage: "the algorithm that made the mask (segments AUTOMATIC); without it MANUAL"},
				&cli.BoolFlag{Name: "empty-frames", Usage: "also write frames with no foreground"},
				&cli.BoolFlag{Name: "quiet", Aliases: []string{"q"}, Usage: "print nothing but errors"},
			},
			Before: requireFlags("reference", "out"),
			Action: exportSEGAction,
		}
	})
}

func exportSEGAction(c *cli.Context) error {
	if c.NArg() != 1 {
		return usageError{errors.New("export-seg: give one mask file")}
	}
	out := c.String("out")
	if st, err := os.Stat(out); err == nil && st.IsDir() {
		return usageError{fmt.Errorf("export-seg: --out %s is a folder; name the SEG file", out)}
	}
	if st, err := os.Stat(filepath.Dir(out)); err != nil || !st.IsDir() {
		return usageError{fmt.Errorf("export-seg: --out %s: its folder does not exist", out)}
	}
	names := map[int]labelSpec{}
	if p := c.String("labels"); p != "" {
		var err error
		if names, err = readLabelSpecs(p); err != nil {
			return fmt.Errorf("export-seg: --labels %s: %w", p, err)
		}
	}
	h, labels, err := nifti.ReadLabels(c.Args().First())
	if err != nil {
		return fmt.Errorf("export-seg: %w", err)
	}
	s, err := referenceSeries(c.String("reference"), c.String("series"), 0)
	if err != nil {
		return fmt.Errorf("export-seg: %w", err)
	}
	mask, err := dicomseg.Align(h, labels, s)
	if err != nil {
		return fmt.Errorf("export-seg: %s on series %s: %w", c.Args().First(), s.UID, err)
	}
	segs := exportSegments(mask, names, c.String("algorithm"))
	if len(segs) == 0 {
		return fmt.Errorf("export-seg: %s holds no labels (only 0) and --labels names none: a SEG needs a segment", c.Args().First())
	}
	sum, err := dicomseg.WriteFile(out, s, mask, dicomseg.Options{Segments: segs, EmptyFrames: c.Bool("empty-frames"), Software: "voxpipe " + versionString()})
	if err != nil {
		return fmt.Errorf("export-seg: %w", err)
	}
	if !c.Bool("quiet") {
		printSEGSummary(c.App.ErrWriter, out, segs, sum)
	}
	return nil
}

// labelSpec is one entry of --labels: a name, and codes where given.
type labelSpec struct {
	Name           string
	Category, Type dicomseg.Code
}

// UnmarshalJSON takes a bare name or an object with name, category and type.
func (l *labelSpec) UnmarshalJSON(b []byte) error {
	if err := json.Unmarshal(b, &l.Name); err == nil {
		return nil
	}
	type code struct{ Scheme, Value, Meaning string }
	var o struct {
		Name           string
		Category, Type *code
	}
	if err := json.Unmarshal(b, &o); err != nil {
		return errors.New(`a label is a name or {"name": ..., "category": {...}, "type": {...}}`)
	}
	l.Name = o.Name
	if o.Category != nil {
		l.Category = dicomseg.Code(*o.Category)
	}
	if o.Type != nil {
		l.Type = dicomseg.Code(*o.Type)
	}
	return nil
}

// readLabelSpecs reads --labels: label numbers 1..255 to specs.
func readLabelSpecs(path string) (map[int]labelSpec, error) {
	f, _, err := regular.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, 1<<20))
	if err != nil {
		return nil, err
	}
	var raw map[string]labelSpec
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, err
	}
	out := map[int]labelSpec{}
	for k, v := range raw {
		n, err := strconv.Atoi(k)
		if err != nil || n < 1 || n > dicomseg.MaxSegments {
			return nil, fmt.Errorf("label %q: keys are label numbers 1 to %d", k, dicomseg.MaxSegments)
		}
		out[n] = v
	}
	return out, nil
}

// exportSegments describes labels 1 to the highest one the mask holds or --labels names: a
// SEG numbers its segments 1, 2, ... without a gap (PS3.3 C.8.20.2.4), so a label between
// them that the mask lacks is a segment with no voxels.
func exportSegments(mask []byte, names map[int]labelSpec, algorithm string) []dicomseg.Segment {
	top := 0
	for n := range names {
		top = max(top, n)
	}
	var present [256]bool
	for _, v := range mask {
		present[v] = true
	}
	for n := 255; n > top; n-- {
		if present[n] {
			top = n
		}
	}
	var segs []dicomseg.Segment
	for n := 1; n <= top; n++ {
		spec := names[n]
		segs = append(segs, dicomseg.Segment{Number: n, Label: spec.Name, Category: spec.Category, Type: spec.Type, Algorithm: algorithm})
	}
	return segs
}

// printSEGSummary says what a SEG holds: its frames and each segment's.
func printSEGSummary(w io.Writer, path string, segs []dicomseg.Segment, sum *dicomseg.Summary) {
	fmt.Fprintf(w, "wrote %s: %d frames, %d segments, %d bytes\n", path, sum.Frames, len(segs), sum.Bytes)
	for _, sg := range segs {
		label := sg.Label
		if label == "" {
			label = "Segment " + strconv.Itoa(sg.Number)
		}
		fmt.Fprintf(w, "  segment %d %s: %d frames, %d voxels\n", sg.Number, label, sum.FramesOf[sg.Number], sum.VoxelsOf[sg.Number])
	}
}
