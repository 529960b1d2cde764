package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

var updateREADME = flag.Bool("update-readme", false, "rewrite the flag tables of README.md and docs/usage/*.md from the commands' definitions")

// flagTable renders a command's flags as the docs show them: name and aliases, default,
// meaning, all taken from the definitions --help prints.
func flagTable(cmd *cli.Command) string {
	var b strings.Builder
	b.WriteString("| flag | default | meaning |\n| --- | --- | --- |\n")
	for _, f := range cmd.Flags {
		d, ok := f.(cli.DocGenerationFlag)
		if !ok || f == cli.HelpFlag {
			continue // urfave/cli adds --help to a command that has run
		}
		var names []string
		for _, n := range f.Names() {
			dash := "--"
			if len(n) == 1 {
				dash = "-"
			}
			names = append(names, "`"+dash+n+"`")
		}
		def := d.GetDefaultText()
		if !d.TakesValue() || def == "" || def == `""` {
			def = ""
		} else {
			def = "`" + def + "`"
		}
		usage := strings.ReplaceAll(d.GetUsage(), "|", `\|`)
		usage = strings.ReplaceAll(usage, "`", "")
		usage = strings.ReplaceAll(usage, "<", "&lt;") // "<run id>" is no HTML tag
		fmt.Fprintf(&b, "| %s | %s | %s |\n", strings.Join(names, ", "), def, usage)
	}
	return b.String()
}

// flagDocs are the files whose flag tables are the commands' own, relative to this package.
func flagDocs(t *testing.T) []string {
	t.Helper()
	usage, err := filepath.Glob("../../docs/usage/*.md")
	if err != nil {
		t.Fatal(err)
	}
	if len(usage) == 0 {
		t.Fatal("no docs/usage/*.md found")
	}
	return append([]string{"../../README.md"}, usage...)
}

// documentedFlags lists the commands whose flags the docs must show as a table: every
// top-level command with a flag of its own (not only --help) and no subcommands of its own
// (urfave/cli adds a "help" subcommand to a command that has run).
func documentedFlags(app *cli.App) []string {
	var names []string
	for _, c := range app.Commands {
		if slices.ContainsFunc(c.Subcommands, func(s *cli.Command) bool { return s.Name != "help" }) {
			continue
		}
		for _, f := range c.Flags {
			if f != cli.HelpFlag {
				names = append(names, c.Name)
				break
			}
		}
	}
	return names
}

// The flag tables of README.md and docs/usage/*.md (<!-- flags: COMMAND --> ... <!-- /flags -->)
// are the commands' own: rewrite them with
// go test ./cmd/voxpipe -run TestREADMEFlagTables -update-readme
//
// Not parallel: it reads the commands' flags, among them urfave/cli's package-level help
// flag, which in-process runs of the app (in parallel tests) write to.
func TestREADMEFlagTables(t *testing.T) {
	app := newApp()
	section := regexp.MustCompile("(?s)<!-- flags: ([a-z-]+) -->\n(.*?)<!-- /flags -->")
	found := map[string]bool{}
	for _, path := range flagDocs(t) {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		doc := string(data)
		out := section.ReplaceAllStringFunc(doc, func(m string) string {
			name := section.FindStringSubmatch(m)[1]
			var cmd *cli.Command
			for _, c := range app.Commands {
				if c.Name == name {
					cmd = c
				}
			}
			if cmd == nil {
				t.Errorf("%s has a flag table for an unknown command %q", path, name)
				return m
			}
			found[name] = true
			return "<!-- flags: " + name + " -->\n" + flagTable(cmd) + "<!-- /flags -->"
		})
		if strings.Count(doc, "<!-- flags:") != strings.Count(doc, "<!-- /flags -->") {
			t.Errorf("%s: a <!-- flags: COMMAND --> section without its <!-- /flags --> (or the reverse)", path)
		}
		if out == doc {
			continue
		}
		if *updateREADME {
			if err := os.WriteFile(path, []byte(out), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		t.Errorf("%s: its flag tables differ from the commands' flags: go test ./cmd/voxpipe -run TestREADMEFlagTables -update-readme", path)
	}
	required := documentedFlags(app.App)
	for _, name := range []string{"run", "watch"} {
		if !slices.Contains(required, name) {
			t.Errorf("command %s has no flags of its own: documentedFlags is wrong", name)
		}
	}
	for _, name := range required {
		if !found[name] {
			t.Errorf("no flag table for %s in README.md or docs/usage/*.md (<!-- flags: %s --> ... <!-- /flags -->)", name, name)
		}
	}
}
