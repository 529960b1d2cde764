package main

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// repoRoot is the repository's root, relative to this package.
const repoRoot = "../.."

// markdownDocs lists the Markdown files whose links TestDocLinks checks: README.md,
// CHANGELOG.md, and every .md under docs/ and notes/.
func markdownDocs(t *testing.T) []string {
	t.Helper()
	files := []string{filepath.Join(repoRoot, "README.md")}
	if _, err := os.Stat(filepath.Join(repoRoot, "CHANGELOG.md")); err == nil {
		files = append(files, filepath.Join(repoRoot, "CHANGELOG.md"))
	}
	for _, dir := range []string{"docs", "notes"} {
		err := filepath.WalkDir(filepath.Join(repoRoot, dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if !d.IsDir() && strings.HasSuffix(path, ".md") {
				files = append(files, path)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return files
}

var (
	// inlineLink matches [text](target) and ![alt](target); the target ends at the first space
	// (a title may follow) or closing parenthesis.
	inlineLink = regexp.MustCompile(`!?\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	// refLink matches a reference definition: [label]: target
	refLink    = regexp.MustCompile(`^\s{0,3}\[[^\]]+\]:\s+(\S+)`)
	codeSpan   = regexp.MustCompile("`[^`]*`")
	heading    = regexp.MustCompile(`^#{1,6}\s+(.*?)\s*#*\s*$`)
	linkInText = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)
)

// docLink is a link found in a Markdown file.
type docLink struct {
	line   int
	target string
}

// scanMarkdown returns a file's links (outside code) and the anchors of its headings, as
// GitHub makes them.
func scanMarkdown(text string) (links []docLink, anchors map[string]bool) {
	anchors = map[string]bool{}
	seen := map[string]int{}
	fenced := false
	for i, line := range strings.Split(text, "\n") {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
			fenced = !fenced
			continue
		}
		if fenced || strings.HasPrefix(line, "    ") || strings.HasPrefix(line, "\t") {
			continue // code: fenced or indented
		}
		if m := heading.FindStringSubmatch(line); m != nil {
			slug := headingSlug(m[1])
			if n := seen[slug]; n > 0 {
				anchors[fmt.Sprintf("%s-%d", slug, n)] = true
			} else {
				anchors[slug] = true
			}
			seen[slug]++
		}
		plain := codeSpan.ReplaceAllString(line, "")
		for _, m := range inlineLink.FindAllStringSubmatch(plain, -1) {
			links = append(links, docLink{i + 1, m[1]})
		}
		if m := refLink.FindStringSubmatch(plain); m != nil {
			links = append(links, docLink{i + 1, m[1]})
		}
	}
	return links, anchors
}

// headingSlug is GitHub's anchor for a heading: its text (links reduced to their text, code
// marks dropped), lower case, with every character but letters, digits, '-', '_' and spaces
// removed, and spaces made '-'.
func headingSlug(h string) string {
	h = linkInText.ReplaceAllString(h, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(h) {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteRune('-')
		}
	}
	return b.String()
}

// TestDocLinks checks that every relative link in the docs names a file or folder that
// exists, and that every #anchor into a Markdown file names one of its headings.
func TestDocLinks(t *testing.T) {
	t.Parallel()
	files := markdownDocs(t)
	anchorsOf := map[string]map[string]bool{}
	linksOf := map[string][]docLink{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		linksOf[f], anchorsOf[f] = scanMarkdown(string(b))
	}
	checked := 0
	for _, f := range files {
		for _, l := range linksOf[f] {
			target := l.target
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			checked++
			path, anchor, _ := strings.Cut(target, "#")
			where := fmt.Sprintf("%s:%d: link %q", strings.TrimPrefix(f, repoRoot+"/"), l.line, target)
			dest := f
			if path != "" {
				if filepath.IsAbs(path) {
					t.Errorf("%s: an absolute path (links must be relative)", where)
					continue
				}
				dest = filepath.Join(filepath.Dir(f), filepath.FromSlash(path))
				if _, err := os.Stat(dest); err != nil {
					t.Errorf("%s: %v", where, err)
					continue
				}
			}
			if anchor == "" || !strings.HasSuffix(dest, ".md") {
				continue
			}
			anchors, ok := anchorsOf[dest]
			if !ok {
				b, err := os.ReadFile(dest)
				if err != nil {
					t.Errorf("%s: %v", where, err)
					continue
				}
				_, anchors = scanMarkdown(string(b))
				anchorsOf[dest] = anchors
			}
			if !anchors[anchor] {
				t.Errorf("%s: %s has no heading with anchor #%s", where, strings.TrimPrefix(dest, repoRoot+"/"), anchor)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no relative link found in the docs: the scan is broken")
	}
}

// TestDocLinksScan checks the scanner itself: links in code are not links, GitHub's anchors.
func TestDocLinksScan(t *testing.T) {
	t.Parallel()
	text := "# The fp16 engine, one 512x512x1000 volume (H200)\n" +
		"## `summary.csv`\n## Dup\n## Dup\n" +
		"See [a](a.md#x) and ![b](img/b.png \"title\"), not `[c](c.md)`.\n" +
		"```\n[d](d.md)\n```\n" +
		"    [e](e.md)\n" +
		"[ref]: docs/f.md\n"
	links, anchors := scanMarkdown(text)
	var got []string
	for _, l := range links {
		got = append(got, l.target)
	}
	if want := "a.md#x img/b.png docs/f.md"; strings.Join(got, " ") != want {
		t.Errorf("links %q, want %q", strings.Join(got, " "), want)
	}
	for _, a := range []string{"the-fp16-engine-one-512x512x1000-volume-h200", "summarycsv", "dup", "dup-1"} {
		if !anchors[a] {
			t.Errorf("no anchor %q in %v", a, anchors)
		}
	}
}
