package main

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/urfave/cli/v2"

	"voxpipe/io/nifti"
	"voxpipe/phantom"
)

func init() {
	commandMakers = append(commandMakers, func() *cli.Command {
		return &cli.Command{
			Name:   "gen",
			Before: requireFlags("out"),
			Usage:  "generate synthetic MRI phantoms with ground-truth masks (OUT/volumes, OUT/truth)",
			Description: "Writes OUT/volumes/<prefix><index>.<format> (int16 image) and OUT/truth/<same name>\n" +
				"(uint8 labels: 0 background, 1 tissue, 2 fluid, 3 lesion) for indices start..start+count-1.\n" +
				"Volume i uses a seed derived from --seed and i alone, so any subset of a series reproduces\n" +
				"the same files, whatever --workers is.",
			Flags: []cli.Flag{
				&cli.StringFlag{Name: "out", Aliases: []string{"o"}, Usage: "output folder (volumes/ and truth/ are created in it; required)"},
				&cli.StringFlag{Name: "dims", Value: "96x96x64", Usage: "volume size NXxNYxNZ"},
				&cli.IntFlag{Name: "count", Aliases: []string{"n"}, Value: 1, Usage: "number of volumes"},
				&cli.Uint64Flag{Name: "seed", Value: 1, Usage: "base seed of the series"},
				&cli.StringFlag{Name: "prefix", Value: "phantom_", Usage: "file name prefix"},
				&cli.IntFlag{Name: "start", Usage: "index of the first volume (names and seeds)"},
				&cli.StringFlag{Name: "format", Value: "nii.gz", Usage: "nii or nii.gz"},
				&cli.IntFlag{Name: "compression", Value: nifti.DefaultLevel, Usage: "gzip level of nii.gz files: 0 (store) to 9, -1 default"},
				&cli.IntFlag{Name: "workers", Usage: "threads generating and compressing (0: all cores); never changes the output"},
				&cli.BoolFlag{Name: "quiet", Aliases: []string{"q"}, Usage: "print nothing but errors"},
			},
			Action: genAction,
		}
	})
}

// genOptions is the validated command line of gen.
type genOptions struct {
	out, prefix, ext string
	nx, ny, nz       int
	count, start     int
	seed             uint64
	write            nifti.WriteOptions
	workers          int
	quiet            bool
}

func genAction(c *cli.Context) error {
	o, err := genParse(c)
	if err != nil {
		return usageError{err}
	}
	for _, dir := range []string{"volumes", "truth"} {
		if err := os.MkdirAll(filepath.Join(o.out, dir), 0o755); err != nil {
			return fmt.Errorf("gen: %w", err)
		}
	}
	for i := o.start; i < o.start+o.count; i++ {
		name := fmt.Sprintf("%s%03d", o.prefix, i)
		if err := genOne(c, o, name, phantom.SeedFor(o.seed, i)); err != nil {
			return err
		}
	}
	return nil
}

func genParse(c *cli.Context) (genOptions, error) {
	o := genOptions{
		out: c.String("out"), prefix: c.String("prefix"), seed: c.Uint64("seed"),
		count: c.Int("count"), start: c.Int("start"), workers: c.Int("workers"), quiet: c.Bool("quiet"),
		write: nifti.WriteOptions{Level: c.Int("compression"), Workers: max(0, c.Int("workers"))},
	}
	var err error
	if o.nx, o.ny, o.nz, err = phantom.ParseDims(c.String("dims")); err != nil {
		return o, fmt.Errorf("gen: --dims: %w", err)
	}
	switch f := c.String("format"); f {
	case "nii", "nii.gz":
		o.ext = "." + f
	default:
		return o, fmt.Errorf("gen: --format %q: want nii or nii.gz", f)
	}
	switch {
	case o.count < 1:
		return o, fmt.Errorf("gen: --count %d: want at least 1", o.count)
	case o.start < 0:
		return o, fmt.Errorf("gen: --start %d: want >= 0", o.start)
	case o.workers < 0:
		return o, fmt.Errorf("gen: --workers %d: want >= 0", o.workers)
	case o.write.Level < nifti.DefaultLevel || o.write.Level > 9:
		return o, fmt.Errorf("gen: --compression %d: want -1 to 9", o.write.Level)
	case o.prefix != filepath.Base(o.prefix) || o.prefix == "." || o.prefix == "..":
		return o, fmt.Errorf("gen: --prefix %q: want a plain file name prefix", o.prefix)
	}
	return o, nil
}

// genOne generates one phantom and writes its image and truth. The image goes to the writer
// as a view of the []int16 (phantom.ImageBytes), not a copy: at 512x512x1000 that is 0.5 GB.
func genOne(c *cli.Context, o genOptions, name string, seed uint64) error {
	t0 := time.Now()
	ph, err := phantom.Generate(phantom.Params{NX: o.nx, NY: o.ny, NZ: o.nz, Seed: seed, Workers: o.workers})
	if err != nil {
		return fmt.Errorf("gen %s: %w", name, err)
	}
	generated := time.Since(t0)
	image := filepath.Join(o.out, "volumes", name+o.ext)
	if err := nifti.Write(image, ph.Header, ph.ImageBytes(), o.write); err != nil {
		return fmt.Errorf("gen %s: %w", name, err)
	}
	truthHeader := nifti.MaskHeader(ph.Header, phantom.MaxLabel, fmt.Sprintf("phantom truth seed=%d", seed))
	if err := nifti.Write(filepath.Join(o.out, "truth", name+o.ext), truthHeader, ph.Truth, o.write); err != nil {
		return fmt.Errorf("gen %s: %w", name, err)
	}
	if !o.quiet {
		fmt.Fprintf(c.App.Writer, "%s  %dx%dx%d  seed=%d  generate %.2fs  write %.2fs\n",
			image, o.nx, o.ny, o.nz, seed, generated.Seconds(), (time.Since(t0) - generated).Seconds())
	}
	return nil
}
