package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"voxpipe/io/nifti"
	"voxpipe/phantom"
)

func genRun(t *testing.T, args ...string) {
	t.Helper()
	if code := run(append([]string{"voxpipe", "gen", "--quiet"}, args...)); code != 0 {
		t.Fatalf("voxpipe gen %s: exit code %d", strings.Join(args, " "), code)
	}
}

// genListing returns the relative paths of the files under dir's volumes/ and truth/.
func genListing(t *testing.T, dir string) []string {
	t.Helper()
	var files []string
	for _, sub := range []string{"volumes", "truth"} {
		entries, err := os.ReadDir(filepath.Join(dir, sub))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			files = append(files, filepath.Join(sub, e.Name()))
		}
	}
	return files
}

func TestGenLayoutAndContent(t *testing.T) {
	t.Parallel()
	for _, format := range []string{"nii", "nii.gz"} {
		t.Run(format, func(t *testing.T) {
			dir := t.TempDir()
			genRun(t, "--out", dir, "--dims", "24x20x12", "--count", "2", "--seed", "5", "--start", "3",
				"--prefix", "ph", "--format", format, "--workers", "2")
			want := []string{"volumes/ph003." + format, "volumes/ph004." + format, "truth/ph003." + format, "truth/ph004." + format}
			if got := genListing(t, dir); !slices.Equal(slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(want))) {
				t.Fatalf("files %v, want %v", got, want)
			}
			for i := 3; i <= 4; i++ {
				name := fmt.Sprintf("ph%03d.%s", i, format)
				ref, err := phantom.Generate(phantom.Params{NX: 24, NY: 20, NZ: 12, Seed: phantom.SeedFor(5, i)})
				if err != nil {
					t.Fatal(err)
				}
				h, image, err := nifti.ReadFloat32(filepath.Join(dir, "volumes", name))
				if err != nil {
					t.Fatal(err)
				}
				if h.Datatype != nifti.Int16 || h.NX() != 24 || h.NY() != 20 || h.NZ() != 12 {
					t.Errorf("%s: datatype %s, dims %dx%dx%d", name, h.Datatype, h.NX(), h.NY(), h.NZ())
				}
				for j, v := range ref.Image {
					if image[j] != float32(v) {
						t.Fatalf("%s: voxel %d is %g, phantom.Generate gives %d", name, j, image[j], v)
					}
				}
				th, truth, err := nifti.ReadUint8(filepath.Join(dir, "truth", name))
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(truth, ref.Truth) {
					t.Errorf("%s: truth differs from phantom.Generate", name)
				}
				// The truth sits on the image's grid.
				if th.Dim != h.Dim || th.PixDim != h.PixDim || th.SrowX != h.SrowX || th.SrowY != h.SrowY ||
					th.SrowZ != h.SrowZ || th.QformCode != h.QformCode || th.SformCode != h.SformCode ||
					th.QoffsetX != h.QoffsetX || th.QoffsetY != h.QoffsetY || th.QoffsetZ != h.QoffsetZ {
					t.Errorf("%s: truth geometry differs from the image's", name)
				}
				if th.IntentCode != nifti.IntentLabel || th.CalMax != float64(phantom.MaxLabel) {
					t.Errorf("%s: truth intent %d, cal_max %g", name, th.IntentCode, th.CalMax)
				}
				// The written header is the generator's (the writer derives nothing that matters).
				if h.PixDim != ref.Header.PixDim || h.SrowX != ref.Header.SrowX || h.Descrip != ref.Header.Descrip {
					t.Errorf("%s: header pixdim %v srow %v descrip %q, generated %v %v %q", name,
						h.PixDim, h.SrowX, h.Descrip, ref.Header.PixDim, ref.Header.SrowX, ref.Header.Descrip)
				}
			}
		})
	}
}

// TestGenBytesIndependentOfWorkersAndSubset: a series is the same files whether generated
// with one worker or several, whole or in parts. 128x96x48 int16 is more than one 1 MiB
// compression block, so the parallel compression is exercised too.
func TestGenBytesIndependentOfWorkersAndSubset(t *testing.T) {
	t.Parallel()
	whole, parts := t.TempDir(), t.TempDir()
	genRun(t, "--out", whole, "--dims", "128x96x48", "--count", "3", "--seed", "11", "--workers", "1")
	genRun(t, "--out", parts, "--dims", "128x96x48", "--count", "1", "--seed", "11", "--workers", "3")
	genRun(t, "--out", parts, "--dims", "128x96x48", "--count", "2", "--start", "1", "--seed", "11")
	genCompareTrees(t, whole, parts)
}

// genCompareTrees fails unless got holds exactly want's volumes/ and truth/ files, byte for byte.
func genCompareTrees(t *testing.T, want, got string) {
	t.Helper()
	wantFiles, gotFiles := genListing(t, want), genListing(t, got)
	if !slices.Equal(wantFiles, gotFiles) {
		t.Fatalf("files %v, want %v", gotFiles, wantFiles)
	}
	for _, f := range wantFiles {
		a, err := os.ReadFile(filepath.Join(want, f))
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(got, f))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a, b) {
			t.Errorf("%s differs (%d vs %d bytes)", f, len(b), len(a))
		}
	}
}

func TestGenUsageErrors(t *testing.T) {
	t.Parallel()
	cases := [][]string{
		{"--dims", "96x96"},
		{"--dims", "0x4x4"},
		{"--format", "hdr"},
		{"--count", "0"},
		{"--start", "-1"},
		{"--workers", "-2"},
		{"--compression", "12"},
		{"--prefix", "a/b"},
	}
	for _, args := range cases {
		dir := t.TempDir()
		if code := run(append([]string{"voxpipe", "gen", "--quiet", "--out", dir}, args...)); code != exitUsage {
			t.Errorf("gen %v: exit code %d, want %d", args, code, exitUsage)
		}
	}
}

// TestFixturesReproduce runs the command fixtures/README.md states and checks that it gives
// the shipped fixtures byte for byte.
func TestFixturesReproduce(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("regenerates the fixtures")
	}
	fixtures := filepath.Join("..", "..", "fixtures")
	args := genReadmeCommand(t, filepath.Join(fixtures, "README.md"))
	dir := t.TempDir()
	out := slices.Index(args, "--out")
	if out < 0 || out+1 >= len(args) || args[out+1] != "fixtures" {
		t.Fatalf("README command %v: want --out fixtures", args)
	}
	args[out+1] = dir
	genRun(t, args...)
	genCompareTrees(t, fixtures, dir)
}

// genReadmeCommand returns the arguments after "gen" on the README's line that runs
// "go run ./cmd/voxpipe gen".
func genReadmeCommand(t *testing.T, readme string) []string {
	t.Helper()
	f, err := os.Open(readme)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var found []string
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if i := slices.Index(fields, "gen"); i >= 3 && slices.Equal(fields[i-3:i], []string{"go", "run", "./cmd/voxpipe"}) {
			if found != nil {
				t.Fatalf("%s states more than one gen command", readme)
			}
			found = fields[i+1:]
		}
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	if found == nil {
		t.Fatalf("%s states no `go run ./cmd/voxpipe gen ...` command", readme)
	}
	return found
}
