package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"voxpipe/engine/cuda"

	"github.com/urfave/cli/v2"
)

// version is set at link time (-ldflags "-X main.version=v1.2.3"); otherwise the module's
// build info is used.
var version = ""

func init() {
	commandMakers = append(commandMakers, func() *cli.Command {
		return &cli.Command{
			Name:  "version",
			Usage: "print the version, the engines compiled in, and the GPUs and driver when present",
			Action: func(c *cli.Context) error {
				if c.Args().Present() {
					return usageError{fmt.Errorf("version: takes no arguments, got %q", c.Args().First())}
				}
				printVersion(c.App.Writer)
				return nil
			},
		}
	})
}

// printVersion prints the version, the engines compiled in, and the GPUs and driver when
// present (voxpipe version, voxpipe --version).
func printVersion(w io.Writer) {
	fmt.Fprintf(w, "voxpipe %s (%s, %s/%s)\n", versionString(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
	engines := "cpu"
	if cuda.Compiled {
		engines += ", cuda"
	}
	fmt.Fprintf(w, "engines: %s\n", engines)
	if !cuda.Compiled {
		fmt.Fprintln(w, "gpu: not compiled in (build with -tags cuda)")
		return
	}
	info, err := cuda.Info()
	if err != nil {
		fmt.Fprintf(w, "gpu: none usable: %v\n", err)
		return
	}
	fmt.Fprintf(w, "gpu: %s\n", info)
}

func versionString() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		rev, dirty := "", ""
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				if s.Value == "true" {
					dirty = "-dirty"
				}
			}
		}
		if len(rev) > 12 {
			rev = rev[:12]
		}
		if rev != "" {
			return "dev-" + rev + dirty
		}
	}
	return "dev"
}
