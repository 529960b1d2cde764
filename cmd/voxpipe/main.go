// Command voxpipe segments 3D medical volumes in batch. This package only parses flags and
// calls into the packages that do the work; each subcommand lives in its own file and
// registers itself in commands.
package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/urfave/cli/v2"
)

// Exit codes: 0 all volumes ok or skipped, 1 some failed (or an operational error),
// 2 usage error, 3 a report gate failed.
const (
	exitFailed = 1
	exitUsage  = 2
)

// commands is filled by the init functions of the subcommand files.
var commands []*cli.Command

func newApp() *cli.App {
	return &cli.App{
		Name:                 "voxpipe",
		Usage:                "batch segmentation of 3D MRI volumes on CPU or GPU",
		Commands:             commands,
		EnableBashCompletion: true,
		OnUsageError: func(c *cli.Context, err error, _ bool) error {
			return usageError{err}
		},
		ExitErrHandler: func(*cli.Context, error) {}, // main decides the exit code, after cleanup
	}
}

// usageError marks errors that exit with code 2.
type usageError struct{ error }

func (u usageError) Unwrap() error { return u.error }

func main() {
	os.Exit(run(os.Args))
}

func run(args []string) int {
	err := newApp().Run(args)
	if err == nil {
		return 0
	}
	var ue usageError
	var ec cli.ExitCoder
	switch {
	case errors.As(err, &ec):
		if msg := ec.Error(); msg != "" {
			fmt.Fprintln(os.Stderr, "voxpipe:", msg)
		}
		return ec.ExitCode()
	case errors.As(err, &ue):
		fmt.Fprintln(os.Stderr, "voxpipe:", err)
		return exitUsage
	default:
		fmt.Fprintln(os.Stderr, "voxpipe:", err)
		return exitFailed
	}
}
