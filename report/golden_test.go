package report

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

func TestGolden(t *testing.T) {
	if !*update {
		t.Parallel() // only reads testdata; -update rewrites it
	}
	r := loadSample(t, []string{"testdata/A"}, []string{"testdata/B"},
		Options{Seed: 1, Gate: &GateOptions{Stage: EndToEnd, MaxSlowerPct: 10}})
	for _, out := range []struct {
		name  string
		write func(*bytes.Buffer) error
	}{
		{"report.md", func(b *bytes.Buffer) error { return r.WriteMarkdown(b) }},
		{"report.csv", func(b *bytes.Buffer) error { return r.WriteCSV(b) }},
	} {
		var got bytes.Buffer
		if err := out.write(&got); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join("testdata", "golden", out.name)
		if *update {
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, got.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run go test -update to create it)", err)
		}
		if got.String() != string(want) {
			t.Errorf("%s differs from %s (go test -update refreshes it):\n%s", out.name, path, got.String())
		}
	}
}

func TestHTMLIsSelfContained(t *testing.T) {
	t.Parallel()
	r := loadSample(t, []string{"testdata/A"}, []string{"testdata/B"}, Options{MinVolumes: 4, Gate: &GateOptions{MaxSlowerPct: 10}})
	dir := t.TempDir()
	if err := r.WriteFiles(dir); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"report.md", "report.csv", "report.html"} {
		if st, err := os.Stat(filepath.Join(dir, name)); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", name, err)
		}
	}
	page, err := os.ReadFile(filepath.Join(dir, "report.html"))
	if err != nil {
		t.Fatal(err)
	}
	html := string(page)
	if n := strings.Count(html, "<svg"); n != 3 {
		t.Errorf("%d inline SVGs, want 3 (bars, CDF, timeline)", n)
	}
	// Nothing to fetch: no src/href/url() to another place; the only URLs are XML namespaces.
	fetch := regexp.MustCompile(`(?i)(src|href)\s*=\s*["']?(https?:|//)|url\(\s*["']?(https?:|//)|<link|<script`)
	if m := fetch.FindString(html); m != "" {
		t.Errorf("HTML references an external resource: %q", m)
	}
	for _, want := range []string{"@font-face", "data:font/ttf;base64,", "Gate passed", "Volume <b>v4</b>", "v5</td><td>failed",
		"s0", "s1", "h2d", "kernels", "fraction of volumes"} {
		if !strings.Contains(html, want) {
			t.Errorf("HTML lacks %q", want)
		}
	}
	if strings.Contains(html, "<?xml") {
		t.Error("inline SVG kept its XML prolog")
	}
}
