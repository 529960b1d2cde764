package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/urfave/cli/v2"

	"voxpipe/report"
	"voxpipe/stage"
)

func init() {
	commandMakers = append(commandMakers, func() *cli.Command {
		return &cli.Command{
			Name:      "report",
			Usage:     "compare the latencies of run(s) A against baseline run(s) B",
			UsageText: "voxpipe report --run A [--run A2 ...] --baseline B [--baseline B2 ...] [-o DIR] [--fail-if-slower PCT [--gate-stage STAGE]] [--min-volumes N]",
			Description: "A and B are voxpipe output folders (every run recorded in OUT/runs/, merged: each volume's\n" +
				"latest outcome), one run's folder (OUT/runs/<id>), folders of CSVs (their timings*.csv and\n" +
				"summary*.csv, and those of their immediate subfolders), or the CSV files themselves;\n" +
				"repeated flags merge shards.\n" +
				"Writes a Markdown summary to stdout and report.md, report.csv and report.html to DIR.\n" +
				"Rows: each stage; service (wall_ms - queue_ms: the time a volume was worked on); end_to_end\n" +
				"(turnaround: wall_ms, the time it waited for an engine included). Files without queue_ms\n" +
				"(older runs, the PyTorch baseline) count no wait: service = turnaround.\n" +
				"A speedup resting on fewer than --min-volumes volumes on a side (pairs when paired) is\n" +
				"flagged \"too few volumes\", and the gate is not evaluated on it: it neither passes nor\n" +
				"fails, exits 0 and says \"gate not evaluated: too few volumes (n=3 < 10)\" on stderr and in\n" +
				"the report.\n" +
				"Exit codes: 0 ok (the gate passed, was not evaluated, or was not asked for), 2 bad usage or\n" +
				"input, 3 the --fail-if-slower gate failed.",
			Flags: []cli.Flag{
				&cli.StringSliceFlag{Name: "run", Aliases: []string{"a"}, Usage: "folder or CSV of the run(s) under test (A); repeatable"},
				&cli.StringSliceFlag{Name: "baseline", Aliases: []string{"b"}, Usage: "folder or CSV of the baseline run(s) (B); repeatable"},
				&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Value: ".", Usage: "folder for report.md, report.csv and report.html"},
				&cli.Float64Flag{Name: "fail-if-slower", Usage: "exit 3 when A's p50 is slower than B's by more than `PCT` percent"},
				&cli.StringFlag{Name: "gate-stage", Value: string(report.EndToEnd), Usage: "`STAGE` whose p50 the gate compares: end_to_end (turnaround), service, or a stage (read, segment...)"},
				&cli.IntFlag{Name: "min-volumes", Value: report.DefaultMinVolumes, Usage: "fewest volumes on each side (pairs when paired) for a speedup's interval to count and for the gate to decide; `N` >= 1"},
				&cli.StringFlag{Name: "timeline-volume", Usage: "volume of A for the slab timeline (default: A's slowest)"},
				&cli.IntFlag{Name: "resamples", Value: report.DefaultResamples, Usage: "bootstrap resamples for the speedup's confidence interval"},
				&cli.Uint64Flag{Name: "seed", Value: 1, Usage: "bootstrap seed"},
			},
			OnUsageError: func(_ *cli.Context, err error, _ bool) error { return usageError{err} },
			Action:       reportAction,
		}
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
	for flag, paths := range map[string][]string{"run": runs, "baseline": baselines} {
		for _, p := range paths {
			if _, err := os.Stat(p); err != nil {
				return usageError{fmt.Errorf("report: --%s: %w", flag, err)}
			}
		}
	}
	if c.Int("resamples") < 1 {
		return usageError{errors.New("report: --resamples must be at least 1")}
	}
	if c.Int("min-volumes") < 1 {
		return usageError{fmt.Errorf("report: --min-volumes must be at least 1, not %d", c.Int("min-volumes"))}
	}
	opts := report.Options{
		TimelineVolume: c.String("timeline-volume"),
		Resamples:      c.Int("resamples"),
		Seed:           c.Uint64("seed"),
		MinVolumes:     c.Int("min-volumes"),
	}
	if c.IsSet("fail-if-slower") {
		opts.Gate = &report.GateOptions{Stage: stage.Stage(c.String("gate-stage")), MaxSlowerPct: c.Float64("fail-if-slower")}
	}

	rep, err := report.Generate(runs, baselines, opts)
	if err == nil {
		err = rep.WriteMarkdown(c.App.Writer)
	}
	if err == nil {
		err = rep.WriteFiles(c.String("output"))
	}
	switch report.ExitCode(rep, err) {
	case report.ExitOK:
		if rep.Gate != nil && rep.Gate.NotEvaluated {
			// Exit 0, but not silently: a CI log must show that nothing was checked.
			fmt.Fprintln(c.App.ErrWriter, "voxpipe:", rep.Gate.Message())
		}
		return nil
	case report.ExitBadInput:
		return usageError{err}
	case report.ExitGateFailed:
		return cli.Exit(rep.Gate.Message(), report.ExitGateFailed)
	default:
		return err
	}
}
