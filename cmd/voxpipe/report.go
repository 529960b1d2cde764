package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/urfave/cli/v2"

	"voxpipe/report"
)

func init() {
	commands = append(commands, &cli.Command{
		Name:      "report",
		Usage:     "compare the latencies of run(s) A against baseline run(s) B",
		UsageText: "voxpipe report --run A [--run A2 ...] --baseline B [--baseline B2 ...] [-o DIR] [--fail-if-slower PCT [--gate-stage STAGE]]",
		Description: "A and B are voxpipe output folders (every run recorded in OUT/runs/, merged: each volume's\n" +
			"latest outcome), one run's folder (OUT/runs/<id>), folders of CSVs (their timings*.csv and\n" +
			"summary*.csv, and those of their immediate subfolders), or the CSV files themselves;\n" +
			"repeated flags merge shards.\n" +
			"Writes a Markdown summary to stdout and report.md, report.csv and report.html to DIR.\n" +
			"Exit codes: 0 ok, 2 bad usage or input, 3 the --fail-if-slower gate failed.",
		Flags: []cli.Flag{
			&cli.StringSliceFlag{Name: "run", Aliases: []string{"a"}, Usage: "folder or CSV of the run(s) under test (A); repeatable"},
			&cli.StringSliceFlag{Name: "baseline", Aliases: []string{"b"}, Usage: "folder or CSV of the baseline run(s) (B); repeatable"},
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Value: ".", Usage: "folder for report.md, report.csv and report.html"},
			&cli.Float64Flag{Name: "fail-if-slower", Usage: "exit 3 when A's p50 is slower than B's by more than `PCT` percent"},
			&cli.StringFlag{Name: "gate-stage", Value: report.EndToEnd, Usage: "`STAGE` whose p50 the gate compares"},
			&cli.StringFlag{Name: "timeline-volume", Usage: "volume of A for the slab timeline (default: A's slowest)"},
			&cli.IntFlag{Name: "resamples", Value: report.DefaultResamples, Usage: "bootstrap resamples for the speedup's confidence interval"},
			&cli.Uint64Flag{Name: "seed", Value: 1, Usage: "bootstrap seed"},
		},
		OnUsageError: func(_ *cli.Context, err error, _ bool) error { return usageError{err} },
		Action:       reportAction,
	})
}

func reportAction(c *cli.Context) error {
	if c.NArg() > 0 {
		return usageError{fmt.Errorf("report: unexpected arguments %q (inputs go in --run and --baseline)", c.Args().Slice())}
	}
	runs, baselines := c.StringSlice("run"), c.StringSlice("baseline")
	if len(runs) == 0 || len(baselines) == 0 {
		return usageError{errors.New("report: need at least one --run and one --baseline")}
	}
	if c.Int("resamples") < 1 {
		return usageError{errors.New("report: --resamples must be at least 1")}
	}
	opts := report.Options{
		TimelineVolume: c.String("timeline-volume"),
		Resamples:      c.Int("resamples"),
		Seed:           c.Uint64("seed"),
	}
	if c.IsSet("fail-if-slower") {
		opts.Gate = &report.GateOptions{Stage: c.String("gate-stage"), MaxSlowerPct: c.Float64("fail-if-slower")}
	}

	rep, err := report.Generate(runs, baselines, opts)
	if err == nil {
		err = rep.WriteMarkdown(os.Stdout)
	}
	if err == nil {
		err = rep.WriteFiles(c.String("output"))
	}
	switch report.ExitCode(rep, err) {
	case report.ExitOK:
		return nil
	case report.ExitBadInput:
		return usageError{err}
	case report.ExitGateFailed:
		return cli.Exit(rep.Gate.Message(), report.ExitGateFailed)
	default:
		return err
	}
}
