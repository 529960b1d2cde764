package main

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"
	"voxpipe/analysis/eval"

	"github.com/gocarina/gocsv"
	"github.com/urfave/cli/v2"

	"voxpipe/io/nifti"
	"voxpipe/jobs"
)

func init() {
	commandMakers = append(commandMakers, func() *cli.Command {
		return &cli.Command{
			Name:      "eval",
			Usage:     "Dice, precision and recall per class of predicted masks against truth masks",
			ArgsUsage: "PRED TRUTH",
			Description: "PRED and TRUTH are mask files, or folders matched by name: truth <name>.nii.gz pairs with\n" +
				"a prediction named <name>.nii.gz or <name>_mask.nii.gz (.nii too). Label files may be of any\n" +
				"integer or float type holding integer labels 0..255. A prediction and its truth must have the\n" +
				"same dims and affine (--allow-affine-mismatch makes a different affine a warning). Classes are\n" +
				"named from --model's card. Prints a table per class and writes the same rows as CSV (default\n" +
				"PRED/eval.csv, or beside a PRED file).",
			Flags: []cli.Flag{
				&cli.IntFlag{Name: "classes", DefaultText: "the model's", Usage: "number of classes (labels 0..classes-1)"},
				&cli.StringFlag{Name: "model", DefaultText: "embedded", Usage: "weights file whose card names the classes"},
				&cli.StringFlag{Name: "csv", Usage: "CSV output path"},
				&cli.Float64Flag{Name: "min-mean-dice", Usage: "exit 1 when the mean Dice of classes 1.. over all volumes is below this"},
				&cli.IntFlag{Name: "volume", DefaultText: "none", Usage: "of 4D label files, compare volume `N` (0-based); 3D files are taken whole"},
				&cli.BoolFlag{Name: "allow-affine-mismatch", Usage: "warn, instead of failing, when a prediction's affine differs from its truth's"},
			},
			Action: evalAction,
		}
	})
}

// evalRow is one line of the eval CSV: one class of one volume, or of all volumes together
// (volume "ALL", counts summed).
type evalRow struct {
	Volume       string  `csv:"volume"`
	Class        int     `csv:"class"`
	Name         string  `csv:"name"`
	Dice         float64 `csv:"dice"`
	Precision    float64 `csv:"precision"`
	Recall       float64 `csv:"recall"`
	Pred         int64   `csv:"pred_voxels"`
	Truth        int64   `csv:"truth_voxels"`
	Intersection int64   `csv:"intersection"`
	Accuracy     float64 `csv:"overall_accuracy"`
}

type evalPair struct{ name, pred, truth string }

// affineTolerance is how far, in mm, a prediction's affine may differ from its truth's: float32
// storage of the same geometry differs by far less.
const affineTolerance = 1e-3

func evalAction(c *cli.Context) error {
	if c.NArg() != 2 {
		return usageError{errors.New("eval: give PRED and TRUTH (files or folders)")}
	}
	model, _, _, err := loadModel(c.String("model"))
	if err != nil {
		return usageError{err}
	}
	classes := model.Classes
	if c.IsSet("classes") {
		classes = c.Int("classes")
	}
	if classes < 1 || classes > 256 {
		return usageError{fmt.Errorf("eval: --classes %d out of range 1..256", classes)}
	}
	var volume *int
	if c.IsSet("volume") {
		v := c.Int("volume")
		if v < 0 {
			return usageError{fmt.Errorf("eval: --volume must be 0 or more, not %d", v)}
		}
		volume = &v
	}
	pairs, csvDefault, err := evalPairs(c.Args().Get(0), c.Args().Get(1))
	if err != nil {
		return usageError{err}
	}
	var rows []evalRow
	add := func(volume string, m eval.Metrics) {
		for k, cm := range m.Classes {
			rows = append(rows, evalRow{Volume: volume, Class: k, Name: model.LabelName(k), Dice: cm.Dice, Precision: cm.Precision,
				Recall: cm.Recall, Pred: cm.Pred, Truth: cm.Truth, Intersection: cm.Intersection, Accuracy: m.Accuracy})
		}
	}
	var all []eval.Metrics
	for _, p := range pairs {
		m, err := evalOne(c.App.ErrWriter, p, classes, volume, c.Bool("allow-affine-mismatch"))
		if err != nil {
			return err
		}
		all = append(all, m)
		add(p.name, m)
	}
	add("ALL", eval.Pool(all))
	meanDice := printEval(c.App.Writer, rows, classes, len(pairs))

	csvPath := c.String("csv")
	if csvPath == "" {
		csvPath = csvDefault
	}
	if err := writeEvalCSV(csvPath, rows); err != nil {
		return err
	}
	if floor := c.Float64("min-mean-dice"); floor > 0 && meanDice < floor {
		return cli.Exit(fmt.Sprintf("eval: mean Dice %.4f is below --min-mean-dice %.4f", meanDice, floor), exitFailed)
	}
	return nil
}

// evalPairs matches predictions to truths.
func evalPairs(pred, truth string) ([]evalPair, string, error) {
	ps, err := os.Stat(pred)
	if err != nil {
		return nil, "", fmt.Errorf("eval: %w", err)
	}
	ts, err := os.Stat(truth)
	if err != nil {
		return nil, "", fmt.Errorf("eval: %w", err)
	}
	if !ps.IsDir() && !ts.IsDir() {
		name, _ := jobs.VolumeBase(truth)
		return []evalPair{{name, pred, truth}}, filepath.Join(filepath.Dir(pred), "eval.csv"), nil
	}
	if !ps.IsDir() || !ts.IsDir() {
		return nil, "", errors.New("eval: PRED and TRUTH must both be files or both be folders")
	}
	preds := map[string]string{}
	entries, err := os.ReadDir(pred)
	if err != nil {
		return nil, "", fmt.Errorf("eval: %w", err)
	}
	for _, e := range entries {
		if base, ok := jobs.VolumeBase(e.Name()); ok && !strings.HasPrefix(e.Name(), ".") {
			preds[base] = filepath.Join(pred, e.Name())
		}
	}
	entries, err = os.ReadDir(truth)
	if err != nil {
		return nil, "", fmt.Errorf("eval: %w", err)
	}
	var pairs []evalPair
	var missing []string
	for _, e := range entries {
		name, ok := jobs.VolumeBase(e.Name())
		if !ok || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		p, found := preds[name+"_mask"]
		if !found {
			p, found = preds[name]
		}
		if !found {
			missing = append(missing, name)
			continue
		}
		pairs = append(pairs, evalPair{name, p, filepath.Join(truth, e.Name())})
	}
	if len(missing) > 0 {
		return nil, "", fmt.Errorf("eval: no prediction in %s for %s", pred, strings.Join(missing, ", "))
	}
	if len(pairs) == 0 {
		return nil, "", fmt.Errorf("eval: no truth masks in %s", truth)
	}
	sort.Slice(pairs, func(i, j int) bool { return pairs[i].name < pairs[j].name })
	return pairs, filepath.Join(pred, "eval.csv"), nil
}

// readLabels reads a label file of any datatype: volume *volume of a 4D one (nil: a 4D file is
// refused with nifti.ErrMultiVolume).
func readLabels(path string, volume *int) (*nifti.Header, []uint8, error) {
	if volume != nil {
		if h, err := nifti.ReadHeader(path); err == nil && h.Volumes() > 1 {
			return nifti.ReadLabels(path, nifti.WithVolume(*volume))
		}
	}
	h, m, err := nifti.ReadLabels(path)
	if errors.Is(err, nifti.ErrMultiVolume) {
		err = fmt.Errorf("%w (compare one with --volume N)", err)
	}
	return h, m, err
}

func evalOne(warn io.Writer, p evalPair, classes int, volume *int, allowAffine bool) (eval.Metrics, error) {
	ph, pm, err := readLabels(p.pred, volume)
	if err != nil {
		return eval.Metrics{}, err
	}
	th, tm, err := readLabels(p.truth, volume)
	if err != nil {
		return eval.Metrics{}, err
	}
	if ph.NX() != th.NX() || ph.NY() != th.NY() || ph.NZ() != th.NZ() {
		return eval.Metrics{}, fmt.Errorf("eval %s: prediction is %dx%dx%d but truth %s is %dx%dx%d",
			p.pred, ph.NX(), ph.NY(), ph.NZ(), p.truth, th.NX(), th.NY(), th.NZ())
	}
	if d := affineDistance(ph.Affine(), th.Affine()); d > affineTolerance {
		err := fmt.Errorf("eval %s: %w: its affine differs from truth %s's by up to %.3g mm", p.pred, errAffineMismatch, p.truth, d)
		if !allowAffine {
			return eval.Metrics{}, fmt.Errorf("%w (--allow-affine-mismatch to compare anyway)", err)
		}
		fmt.Fprintf(warn, "warning: %v\n", err)
	}
	m := eval.Compare(pm, tm, classes)
	if m.OutOfRange > 0 {
		return m, fmt.Errorf("eval %s: %d voxels carry labels >= %d (wrong --classes?)", p.name, m.OutOfRange, classes)
	}
	return m, nil
}

// errAffineMismatch: a prediction and its truth place their voxels differently in the world.
var errAffineMismatch = errors.New("affine mismatch")

// affineDistance is the largest difference between two affines' entries, in mm (for the
// rotation-and-zoom part, mm per voxel index).
func affineDistance(a, b nifti.Affine) float64 {
	d := 0.0
	for r := range 3 {
		for c := range 4 {
			d = math.Max(d, math.Abs(a[r][c]-b[r][c]))
		}
	}
	return d
}

// printEval prints the per-volume Dice table and the pooled per-class table; it returns the
// mean over classes 1.. of the pooled Dice.
func printEval(w io.Writer, rows []evalRow, classes, volumes int) float64 {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "volume\t")
	for k := 0; k < classes; k++ {
		fmt.Fprintf(tw, "dice %d %s\t", k, rows[k].Name)
	}
	fmt.Fprint(tw, "accuracy\t\n")
	for i := 0; i < len(rows); i += classes {
		fmt.Fprintf(tw, "%s\t", rows[i].Volume)
		for k := 0; k < classes; k++ {
			fmt.Fprintf(tw, "%.4f\t", rows[i+k].Dice)
		}
		fmt.Fprintf(tw, "%.4f\t\n", rows[i].Accuracy)
	}
	tw.Flush()
	pooled := rows[len(rows)-classes:]
	var sum float64
	for _, r := range pooled[1:] {
		sum += r.Dice
	}
	mean := pooled[0].Dice
	if classes > 1 {
		mean = sum / float64(classes-1)
	}
	fmt.Fprintf(w, "\n%d volume(s); pooled over all voxels:\n", volumes)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "class\tname\tdice\tprecision\trecall\tpred voxels\ttruth voxels\t\n")
	for _, r := range pooled {
		fmt.Fprintf(tw, "%d\t%s\t%.4f\t%.4f\t%.4f\t%d\t%d\t\n", r.Class, r.Name, r.Dice, r.Precision, r.Recall, r.Pred, r.Truth)
	}
	tw.Flush()
	fmt.Fprintf(w, "mean Dice (classes 1..%d): %.4f; overall voxel accuracy %.4f\n", classes-1, mean, pooled[0].Accuracy)
	return mean
}

func writeEvalCSV(path string, rows []evalRow) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("eval: %w", err)
	}
	if err := gocsv.MarshalFile(&rows, f); err != nil {
		f.Close()
		return fmt.Errorf("eval: write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("eval: write %s: %w", path, err)
	}
	return nil
}
