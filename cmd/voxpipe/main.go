// Command voxpipe segments 3D medical volumes in batch. This package only parses flags and
// calls into the packages that do the work; each subcommand lives in its own file and
// registers itself in commands.
package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"

	"github.com/urfave/cli/v2"
)

// Exit codes: 0 all volumes ok or skipped, 1 some failed (or an operational error),
// 2 usage error, 3 a report gate failed.
const (
	exitFailed = 1
	exitUsage  = 2
)

// commandMakers is filled by the init functions of the subcommand files: each makes its
// command afresh, so that every app (an in-process test's too) has commands of its own.
var commandMakers []func() *cli.Command

// newCommands makes the commands of one app.
func newCommands() []*cli.Command {
	cmds := make([]*cli.Command, len(commandMakers))
	for i, mk := range commandMakers {
		cmds[i] = mk()
	}
	return cmds
}

func init() {
	cli.VersionPrinter = func(c *cli.Context) { printVersion(c.App.Writer) }
}

// appRuns serialises the runs of apps in one process (see runIO).
var appRuns sync.Mutex

// app is the command line application and what its run found out besides its error.
type app struct {
	*cli.App
	helpNotFound error // help was asked about a topic that does not exist
}

func newApp() *app {
	a := &app{}
	commands := newCommands()
	for _, c := range commands {
		if c.OnUsageError == nil {
			c.OnUsageError = func(_ *cli.Context, err error, _ bool) error { return usageError{err} }
		}
		if len(c.Subcommands) > 0 && c.Action == nil {
			c.Action = subcommandRequired
		}
	}
	a.App = &cli.App{
		Name:                 "voxpipe",
		Usage:                "batch segmentation of 3D MRI volumes on CPU or GPU",
		Version:              versionString(),
		Commands:             commands,
		EnableBashCompletion: true,
		Suggest:              true, // "did you mean" for mistyped commands and flags
		// Without a command: the help, on stderr, and a usage error (as go does); an unknown
		// command: a usage error with the nearest command.
		Action: func(c *cli.Context) error {
			if c.NArg() == 0 {
				cli.HelpPrinter(c.App.ErrWriter, cli.AppHelpTemplate, c.App)
				return usageError{errors.New("give a command")}
			}
			err := fmt.Errorf("unknown command %q", c.Args().First())
			if s := cli.SuggestCommand(c.App.Commands, c.Args().First()); s != "" {
				err = fmt.Errorf("%w. %s", err, s) // "Did you mean ...?"
			}
			return usageError{err}
		},
		OnUsageError: func(c *cli.Context, err error, _ bool) error {
			return usageError{err}
		},
		ExitErrHandler: func(*cli.Context, error) {}, // main decides the exit code, after cleanup
		// "voxpipe help runn": urfave/cli would exit 3 (the report gate's code); a help topic
		// that does not exist is a usage error. The error is kept for run to return.
		CommandNotFound: func(c *cli.Context, name string) {
			err := fmt.Errorf("no help topic %q", name)
			if s := cli.SuggestCommand(c.App.Commands, name); s != "" {
				err = fmt.Errorf("%w. %s", err, s)
			}
			a.helpNotFound = usageError{err}
		},
	}
	return a
}

// subcommandRequired is the action of a command that only groups subcommands ("voxpipe
// model"): without one, or with one that does not exist, a usage error after the help.
func subcommandRequired(c *cli.Context) error {
	if !c.Args().Present() {
		cli.HelpPrinter(c.App.ErrWriter, cli.SubcommandHelpTemplate, c.Command)
		return usageError{fmt.Errorf("%s: give a subcommand", c.Command.Name)}
	}
	err := fmt.Errorf("%s: unknown subcommand %q", c.Command.Name, c.Args().First())
	if s := cli.SuggestCommand(c.Command.Subcommands, c.Args().First()); s != "" {
		err = fmt.Errorf("%w. %s", err, s)
	}
	return usageError{err}
}

// requireFlags is the Before of a command with required flags: it fails with a usageError
// naming the first one not set, after the command's help when no argument was given.
// (urfave/cli's own Required reports a missing flag with an unexported error type that only
// its text identifies.)
func requireFlags(names ...string) cli.BeforeFunc {
	return func(c *cli.Context) error {
		for _, name := range names {
			if !c.IsSet(name) {
				if !c.Args().Present() {
					cli.HelpPrinter(c.App.Writer, cli.CommandHelpTemplate, c.Command)
				}
				return usageError{fmt.Errorf("required flag %q not set", name)}
			}
		}
		return nil
	}
}

// usageError marks errors that exit with code 2.
type usageError struct{ error }

func (u usageError) Unwrap() error { return u.error }

func main() {
	stop := cpuProfile(os.Getenv("VOXPIPE_CPU_PROFILE"), os.Stderr)
	code := run(os.Args)
	stop()
	os.Exit(code)
}

// cpuProfile starts a pprof CPU profile of the whole process into path (VOXPIPE_CPU_PROFILE, a
// diagnostic for performance work: `go tool pprof voxpipe PATH`) and returns what ends it; ""
// profiles nothing. A profile that cannot start is said on stderr and the process goes on.
func cpuProfile(path string, stderr io.Writer) (stop func()) {
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path)
	if err == nil {
		if err = pprof.StartCPUProfile(f); err != nil {
			f.Close()
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "voxpipe: VOXPIPE_CPU_PROFILE: %v\n", err)
		return func() {}
	}
	return func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			fmt.Fprintf(stderr, "voxpipe: VOXPIPE_CPU_PROFILE: %v\n", err)
		}
	}
}

func run(args []string) int { return runIO(args, os.Stdout, os.Stderr) }

// runIO runs the command line args with its output on stdout and stderr, and returns the exit
// code.
func runIO(args []string, stdout, stderr io.Writer) int {
	// urfave/cli's help and version flags are package-level values that every App.Run writes
	// to: in-process runs (tests) take turns.
	appRuns.Lock()
	defer appRuns.Unlock()
	app := newApp()
	app.Writer, app.ErrWriter = stdout, stderr
	ordered, err := flagsFirst(app.App, args)
	if err == nil {
		err = app.Run(ordered)
	}
	if err == nil {
		err = app.helpNotFound
	}
	if err == nil {
		return 0
	}
	var ue usageError
	var ec cli.ExitCoder
	code, msg := exitFailed, err.Error()
	switch {
	case errors.As(err, &ec):
		code, msg = ec.ExitCode(), ec.Error()
	case errors.As(err, &ue):
		code = exitUsage
	}
	if msg != "" {
		lastLine(stderr, jsonLogs(args), msg, code)
	}
	return code
}

// lastLine writes why the command ends: "voxpipe: msg" or, when logs are JSON, a JSON log
// line like the others, so that every line of stderr parses.
func lastLine(w io.Writer, asJSON bool, msg string, code int) {
	if !asJSON {
		fmt.Fprintln(w, "voxpipe:", msg)
		return
	}
	slog.New(slog.NewJSONHandler(w, nil)).Error(msg, "exit_code", code)
}

// jsonLogs reports whether the command line asks for --log-format json (also read when flag
// parsing itself failed).
func jsonLogs(args []string) bool {
	for i, a := range args {
		name := strings.TrimLeft(a, "-")
		if a == "--" {
			break
		}
		if name == "log-format=json" || name == "log-format" && i+1 < len(args) && args[i+1] == "json" {
			return true
		}
	}
	return false
}

// flagsFirst moves a subcommand's flags in front of its positional arguments, so that
// "voxpipe run fixtures/volumes -o out" works: urfave/cli stops parsing flags at the first
// positional argument. Flags that take a value keep it; everything after "--" stays positional.
// A flag that the command does not define is a usage error naming the nearest one.
func flagsFirst(app *cli.App, args []string) ([]string, error) {
	if len(args) < 2 {
		return args, nil
	}
	var cmd *cli.Command
	for _, c := range app.Commands {
		if c.HasName(args[1]) {
			cmd = c
		}
	}
	if cmd == nil {
		return args, nil
	}
	head := 2 // args[:head] are the program and the command names
	for len(args) > head {
		// urfave/cli adds a help subcommand to every command once run: descend only into
		// subcommands named on the command line.
		sub := cmd.Command(args[head])
		if sub == nil || sub.Name == "help" {
			break
		}
		cmd, head = sub, head+1
	}
	takesValue := map[string]bool{"help": false, "h": false}
	for _, f := range cmd.Flags {
		_, isBool := f.(*cli.BoolFlag)
		for _, name := range f.Names() {
			takesValue[name] = !isBool
		}
	}
	var flags, positional []string
	rest := args[head:]
	for i := 0; i < len(rest); i++ {
		a := rest[i]
		switch {
		case a == "--":
			positional = append(positional, rest[i+1:]...)
			i = len(rest)
		case len(a) > 1 && a[0] == '-':
			flags = append(flags, a)
			name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
			if _, known := takesValue[name]; !known {
				err := fmt.Errorf("%s: unknown flag %s", cmd.Name, a)
				if s := cli.SuggestFlag(cmd.Flags, name, false); s != "" {
					err = fmt.Errorf("%w; did you mean %s?", err, s)
				}
				return nil, usageError{err}
			}
			if !hasValue && takesValue[name] && i+1 < len(rest) {
				i++
				flags = append(flags, rest[i])
			}
		default:
			positional = append(positional, a)
		}
	}
	out := append(slices.Clone(args[:head]), flags...)
	if len(positional) > 0 {
		out = append(out, "--")
		out = append(out, positional...)
	}
	return out, nil
}
