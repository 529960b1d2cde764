package archcheck

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

// The rules of docs/architecture.md, checked on the repository itself.
const (
	maxFileLines   = 500
	maxFuncLines   = 80
	maxLongFuncs   = 5
	maxFields      = 12
	minParallel    = 150
	minSynctest    = 4
	maxSleeps      = 3
	signalOwner    = "session/"
	exitOwner      = "cmd/voxpipe/"
	architectureMD = "docs/architecture.md"
)

var repoRoot = filepath.Join("..", "..")

var loadRepo = sync.OnceValues(func() (*Tree, error) { return Load(repoRoot) })

func repo(t *testing.T) *Tree {
	t.Helper()
	tree, err := loadRepo()
	if err != nil {
		t.Fatal(err)
	}
	return tree
}

// Every package is on the map, and every import runs down a floor, within its row's list.
func TestRepoMatchesTheMap(t *testing.T) {
	t.Parallel()
	md, err := os.ReadFile(filepath.Join(repoRoot, architectureMD))
	if err != nil {
		t.Fatal(err)
	}
	m, err := ParseMap(md)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ImportProblems(repo(t), m) {
		t.Errorf("%s: %s", architectureMD, p)
	}
}

func TestRepoSizeLimits(t *testing.T) {
	t.Parallel()
	files, err := LongFiles(repoRoot, maxFileLines)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		t.Errorf("%s: %d lines, over %d", f.Path, f.Lines, maxFileLines)
	}
	if long := LongFuncs(repo(t), maxFuncLines); len(long) > maxLongFuncs {
		for _, f := range long {
			t.Logf("%s: %s, %d lines", f.File, f.Name, f.Lines)
		}
		t.Errorf("%d functions over %d lines, at most %d allowed", len(long), maxFuncLines, maxLongFuncs)
	}
	for _, w := range WideOptions(repo(t), maxFields) {
		t.Errorf("%s: group the fields by concern (at most %d)", w, maxFields)
	}
}

// The session's shutdown handler is the only user of os/signal, and only main functions of
// the command exit the process.
func TestRepoProcessCalls(t *testing.T) {
	t.Parallel()
	for _, f := range Importers(repo(t), "os/signal") {
		if !strings.HasPrefix(f, signalOwner) {
			t.Errorf("%s imports os/signal: only %s handles signals", f, signalOwner)
		}
	}
	for _, c := range Calls(repo(t), "os", "Exit") {
		if file, fn, _ := strings.Cut(c, ": "); fn != "main" || !strings.HasPrefix(file, exitOwner) && !isOtherMain(repo(t), file) {
			t.Errorf("%s calls os.Exit: only %smain does", c, exitOwner)
		}
	}
}

// isOtherMain reports whether file belongs to a package main outside the product (a script or
// a lab tool), whose main function may exit.
func isOtherMain(tree *Tree, file string) bool {
	p := tree.Packages[filepath.ToSlash(filepath.Dir(file))]
	return p != nil && !strings.HasPrefix(p.Path, "cmd/") && slices.ContainsFunc(p.Files, func(f *File) bool {
		return f.Path == file && f.AST.Name.Name == "main"
	})
}

func TestRepoTestHabits(t *testing.T) {
	t.Parallel()
	h := CountTestHabits(repo(t))
	if h.Parallel < minParallel {
		t.Errorf("%d t.Parallel calls, want %d or more: tests that share nothing run in parallel", h.Parallel, minParallel)
	}
	if h.SynctestFiles < minSynctest {
		t.Errorf("%d test files use testing/synctest, want %d or more", h.SynctestFiles, minSynctest)
	}
	if h.Sleeps > maxSleeps {
		t.Errorf("%d time.Sleep calls in tests, want %d or fewer: use testing/synctest", h.Sleeps, maxSleeps)
	}
	t.Logf("%+v", h)
}

// The docs' sizes the issue set: README.md an overview that links the rest, docs/perf.md the
// current figures only (their history is notes/perf-journal.md).
var docLimits = map[string]int{"README.md": 150, "docs/perf.md": 250}

func TestRepoDocSizes(t *testing.T) {
	t.Parallel()
	for path, limit := range docLimits {
		b, err := os.ReadFile(filepath.Join(repoRoot, path))
		if err != nil {
			t.Fatal(err)
		}
		if n := bytes.Count(b, []byte("\n")); n > limit {
			t.Errorf("%s: %d lines, at most %d: details go to docs/usage and docs/formats, history to notes/", path, n, limit)
		}
	}
}
