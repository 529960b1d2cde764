package report

import (
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"voxpipe/store/records"
	"voxpipe/telemetry/timing"
)

// A run's output folder with previews for some volumes: the page shows each as a thumbnail
// linking to the PNG, by a path relative to the report's folder that leads to the file, with
// the statistics link when the JSON exists; volumes without a preview are not shown.
func TestPreviewsLinkedRelativeToTheReport(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	out := filepath.Join(root, "out")
	rec, err := records.Create(out, "r1")
	if err != nil {
		t.Fatal(err)
	}
	names := []string{"v1", "v 2#x", "sub/v3", "v4"}
	for i, name := range names {
		s := timing.Summary{RunID: "r1", Volume: name, Status: timing.StatusOK, WallMS: 10 + float64(i), Voxels: 1000,
			FinishedAt: records.Stamp(time.Date(2026, 12, 3, 8, 0, i, 0, time.UTC))}
		rec.Timings.Append(timing.Row{RunID: "r1", Volume: name, Stage: "read", Slab: -1, Device: "host", StartMS: 1, DurationMS: 3})
		if err := rec.Summary.Append(s); err != nil {
			t.Fatal(err)
		}
	}
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	write := func(path, data string) {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range names[:3] { // v4 has none
		write(filepath.Join(out, records.PreviewsDir, filepath.FromSlash(name)+".png"), "png of "+name)
	}
	write(filepath.Join(out, records.StatisticsDir, "v1.json"), "{}")

	r := loadSample(t, []string{out}, []string{"testdata/B"}, Options{})
	dir := filepath.Join(root, "reports", "today")
	if err := r.WriteFiles(dir); err != nil {
		t.Fatal(err)
	}
	page, err := os.ReadFile(filepath.Join(dir, "report.html"))
	if err != nil {
		t.Fatal(err)
	}
	html := string(page)
	imgs := regexp.MustCompile(`<a href="([^"]+)"><img src="([^"]+)" alt="preview of ([^"]+)"`).FindAllStringSubmatch(html, -1)
	if len(imgs) != 3 {
		t.Fatalf("%d thumbnails, want 3 (v4 has no preview):\n%s", len(imgs), html)
	}
	for _, m := range imgs {
		href, src := unescapeAttr(m[1]), unescapeAttr(m[2])
		if href != src || !strings.HasPrefix(href, "../../out/previews/") {
			t.Errorf("%s: link %q, thumbnail %q: want the same path relative to the report folder", m[3], href, src)
		}
		p, err := url.PathUnescape(href)
		if err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(p)))
		if err != nil || string(data) != "png of "+unescapeAttr(m[3]) {
			t.Errorf("%s: %q from the report folder reads %q, %v", m[3], href, data, err)
		}
	}
	if !strings.Contains(html, `<a href="../../out/statistics/v1.json">statistics</a>`) {
		t.Errorf("no statistics link for v1")
	}
	if strings.Count(html, ">statistics</a>") != 1 {
		t.Errorf("statistics links for volumes without a JSON")
	}

	// Without previews the section says so.
	bare := loadSample(t, []string{"testdata/A"}, []string{"testdata/B"}, Options{})
	var b strings.Builder
	if err := bare.WriteHTML(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "None: no volume has a preview") || strings.Contains(b.String(), "<img") {
		t.Error("a report without previews does not say it has none")
	}
}

// unescapeAttr undoes html/template's escaping of an attribute value.
func unescapeAttr(s string) string {
	return strings.NewReplacer("&amp;", "&", "&#43;", "+", "&#34;", `"`, "&#39;", "'").Replace(s)
}
