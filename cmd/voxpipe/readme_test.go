package main

import (
	"flag"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

var updateREADME = flag.Bool("update-readme", false, "rewrite README.md's flag tables from the commands' definitions")

// flagTable renders a command's flags as the README shows them: name and aliases, default,
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

// The README's flag tables are the commands' own: rewrite them with
// go test ./cmd/voxpipe -run TestREADMEFlagTables -update-readme
func TestREADMEFlagTables(t *testing.T) {
	const path = "../../README.md"
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	readme := string(data)
	section := regexp.MustCompile("(?s)<!-- flags: ([a-z]+) -->\n(.*?)<!-- /flags -->")
	found := map[string]bool{}
	out := section.ReplaceAllStringFunc(readme, func(m string) string {
		name := section.FindStringSubmatch(m)[1]
		var cmd *cli.Command
		for _, c := range newApp().Commands {
			if c.Name == name {
				cmd = c
			}
		}
		if cmd == nil {
			t.Errorf("README has a flag table for an unknown command %q", name)
			return m
		}
		found[name] = true
		return "<!-- flags: " + name + " -->\n" + flagTable(cmd) + "<!-- /flags -->"
	})
	for _, name := range []string{"run", "watch"} {
		if !found[name] {
			t.Errorf("README has no flag table for %s (<!-- flags: %s --> ... <!-- /flags -->)", name, name)
		}
	}
	if out == readme {
		return
	}
	if *updateREADME {
		if err := os.WriteFile(path, []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Error("README.md's flag tables differ from the commands' flags: go test ./cmd/voxpipe -run TestREADMEFlagTables -update-readme")
}
