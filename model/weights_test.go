package model

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestModelRoundTrip(t *testing.T) {
	t.Parallel()
	for _, m := range []*Model{RandomModel(16, 4, 1), RandomModel(6, 3, 9), RandomModel(2, 1, 0)} {
		data, err := m.MarshalSafetensors()
		if err != nil {
			t.Fatal(err)
		}
		again, err := m.MarshalSafetensors()
		if err != nil || !bytes.Equal(data, again) {
			t.Fatalf("C%d: MarshalSafetensors is not deterministic (err %v)", m.Channels, err)
		}
		got, err := ParseModel(data)
		if err != nil {
			t.Fatalf("C%d: ParseModel: %v", m.Channels, err)
		}
		if !reflect.DeepEqual(got, m) {
			t.Errorf("C%d: round trip changed the model", m.Channels)
		}
		path := filepath.Join(t.TempDir(), "model.safetensors")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		loaded, err := LoadModel(path)
		if err != nil || !reflect.DeepEqual(loaded, m) {
			t.Errorf("C%d: LoadModel: %v, equal %v", m.Channels, err, reflect.DeepEqual(loaded, m))
		}
	}
}

func TestLoadModelMissingFile(t *testing.T) {
	t.Parallel()
	_, err := LoadModel(filepath.Join(t.TempDir(), "nope.safetensors"))
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("got %v, want a not-exist error", err)
	}
}

func TestRandomModel(t *testing.T) {
	t.Parallel()
	a, b, c := RandomModel(16, 4, 5), RandomModel(16, 4, 5), RandomModel(16, 4, 6)
	if !reflect.DeepEqual(a, b) {
		t.Error("same seed, different models")
	}
	if reflect.DeepEqual(a.C2W, c.C2W) {
		t.Error("different seeds, same weights")
	}
	if err := a.Validate(); err != nil {
		t.Error(err)
	}
	// He scale: weights of a layer with fan_in n have variance 2/n.
	for _, tc := range []struct {
		name  string
		w     []float32
		fanIn int
	}{{"c1", a.C1W, 27}, {"c2", a.C2W, 16 * 27}, {"head", a.HeadW, 16}} {
		var sum2 float64
		for _, v := range tc.w {
			sum2 += float64(v) * float64(v)
		}
		variance, want := sum2/float64(len(tc.w)), 2/float64(tc.fanIn)
		if math.Abs(variance-want) > 0.35*want {
			t.Errorf("%s: weight variance %.4g, want about %.4g", tc.name, variance, want)
		}
	}
}

// stEntry is one tensor of a hand-built safetensors file.
type stEntry struct {
	name    string
	dtype   string
	shape   []uint64
	data    []byte
	offsets *[2]uint64 // overrides the computed offsets
}

// buildSafetensors writes a safetensors file by hand, so tests can make files no correct writer
// would: tensors are laid out in the order given.
func buildSafetensors(t *testing.T, entries []stEntry, meta map[string]any, extra []byte) []byte {
	t.Helper()
	header := map[string]any{}
	if meta != nil {
		header["__metadata__"] = meta
	}
	var payload []byte
	for _, e := range entries {
		off := [2]uint64{uint64(len(payload)), uint64(len(payload) + len(e.data))}
		if e.offsets != nil {
			off = *e.offsets
		}
		header[e.name] = map[string]any{"dtype": e.dtype, "shape": e.shape, "data_offsets": off}
		payload = append(payload, e.data...)
	}
	payload = append(payload, extra...)
	h, err := json.Marshal(header)
	if err != nil {
		t.Fatal(err)
	}
	out := binary.LittleEndian.AppendUint64(nil, uint64(len(h)))
	out = append(out, h...)
	return append(out, payload...)
}

// validEntries is RandomModel(16, 4, 1) as hand-built entries, with its metadata.
func validEntries() ([]stEntry, map[string]any) {
	m := RandomModel(16, 4, 1)
	var entries []stEntry
	for _, spec := range tensorSpecs(m.Channels, m.Classes) {
		vals := *spec.field(m)
		raw := make([]byte, 4*len(vals))
		for i, v := range vals {
			binary.LittleEndian.PutUint32(raw[4*i:], math.Float32bits(v))
		}
		entries = append(entries, stEntry{name: spec.name, dtype: "F32", shape: spec.shape, data: raw})
	}
	meta := map[string]any{
		"format": ModelFormat, "version": ModelVersion, "channels": "16", "classes": "4",
		"class_names": "background,class1,class2,class3", "description": "test",
	}
	return entries, meta
}

// namedEntry is the entry called name.
func namedEntry(entries []stEntry, name string) *stEntry {
	for i := range entries {
		if entries[i].name == name {
			return &entries[i]
		}
	}
	panic(name)
}

// withoutEntry is entries less the one called name.
func withoutEntry(entries []stEntry, name string) []stEntry {
	var out []stEntry
	for _, e := range entries {
		if e.name != name {
			out = append(out, e)
		}
	}
	return out
}

// modelEdit changes a valid model's entries and metadata, and may add bytes after its data.
type modelEdit = func(entries []stEntry, meta map[string]any) ([]stEntry, map[string]any, []byte)

// editedFile is a valid model's file after edit.
func editedFile(t *testing.T, edit modelEdit) []byte {
	entries, meta := validEntries()
	entries, meta, extra := edit(entries, meta)
	return buildSafetensors(t, entries, meta, extra)
}

// metaEdit sets the metadata key to value, or deletes it when value is nil.
func metaEdit(key string, value any) modelEdit {
	return func(entries []stEntry, meta map[string]any) ([]stEntry, map[string]any, []byte) {
		if value == nil {
			delete(meta, key)
		} else {
			meta[key] = value
		}
		return entries, meta, nil
	}
}

// metaFile is a valid model's file with metaEdit(key, value).
func metaFile(key string, value any) func(t *testing.T) []byte {
	return func(t *testing.T) []byte { return editedFile(t, metaEdit(key, value)) }
}

// badModelFiles are broken model files and what ParseModel's error says of each.
var badModelFiles = []struct {
	name string
	data func(t *testing.T) []byte
	want string // substring of the error
}{
	{"empty file", func(*testing.T) []byte { return nil }, "too short"},
	{"short file", func(*testing.T) []byte { return []byte{1, 2, 3, 4} }, "too short"},
	{"absurd header length", func(t *testing.T) []byte {
		data := editedFile(t, metaEdit("description", "x"))
		binary.LittleEndian.PutUint64(data, 1<<62)
		return data
	}, "header length 4611686018427387904 is absurd"},
	{"header longer than file", func(t *testing.T) []byte {
		data := editedFile(t, metaEdit("description", "x"))
		binary.LittleEndian.PutUint64(data, uint64(len(data)))
		return data
	}, "is absurd"},
	{"header not JSON", func(*testing.T) []byte {
		h := []byte("{not json}")
		return append(binary.LittleEndian.AppendUint64(nil, uint64(len(h))), h...)
	}, "safetensors header"},
	{"tensor entry malformed", func(t *testing.T) []byte {
		h := []byte(`{"c1.weight": {"dtype": "F32", "shape": [16]}}`)
		return append(binary.LittleEndian.AppendUint64(nil, uint64(len(h))), h...)
	}, `tensor "c1.weight"`},
	{"missing tensor", func(t *testing.T) []byte {
		return editedFile(t, func(e []stEntry, m map[string]any) ([]stEntry, map[string]any, []byte) {
			return withoutEntry(e, "c2.weight"), m, nil
		})
	}, "not a voxpipe model: missing tensor c2.weight"},
	{"unexpected tensor", func(t *testing.T) []byte {
		return editedFile(t, func(e []stEntry, m map[string]any) ([]stEntry, map[string]any, []byte) {
			return append(e, stEntry{name: "extra.weight", dtype: "F32", shape: []uint64{1}, data: make([]byte, 4)}), m, nil
		})
	}, "not a voxpipe model: unexpected tensor extra.weight"},
	{"other architecture", func(t *testing.T) []byte {
		var entries []stEntry
		for i := range 9 {
			name := []string{"conv1.weight", "conv1.bias", "bn1.weight"}[i%3] + strings.Repeat("x", i/3)
			entries = append(entries, stEntry{name: name, dtype: "F32", shape: []uint64{2}, data: make([]byte, 8)})
		}
		return buildSafetensors(t, entries, map[string]any{"format": "pt"}, nil)
	}, "not a voxpipe model: missing tensor c1.bias, c1.weight, c2.bias, c2.weight, cg.bias, cg.weight and 8 more / unexpected tensor bn1.weight"},
	{"no metadata", func(t *testing.T) []byte {
		entries, _ := validEntries()
		return buildSafetensors(t, entries, nil, nil)
	}, `not a voxpipe model: metadata format ""`},
	{"wrong format", metaFile("format", "pytorch"), `metadata format "pytorch"`},
	{"wrong version", metaFile("version", "2"), `metadata version "2"`},
	{"metadata not a string", metaFile("channels", 16), `"channels"`},
	{"channels missing", metaFile("channels", nil), "metadata channels missing"},
	{"channels not a number", metaFile("channels", "sixteen"), `metadata channels "sixteen"`},
	{"channels odd", metaFile("channels", "15"), "must be even"},
	{"channels disagree with shapes", metaFile("channels", "8"), "tensor c1.weight: shape [16 1 3 3 3], want [8 1 3 3 3]"},
	{"classes zero", metaFile("classes", "0"), `metadata classes "0"`},
	{"classes too many", metaFile("classes", "300"), `metadata classes "300"`},
	{"class names missing", metaFile("class_names", nil), "class_names missing"},
	{"class names count", metaFile("class_names", "a,b,c"), "has 3 names for 4 classes"},
	{"class name empty", metaFile("class_names", "a,,c,d"), `class name 1 ""`},
	{"wrong shape", func(t *testing.T) []byte {
		return editedFile(t, func(e []stEntry, m map[string]any) ([]stEntry, map[string]any, []byte) {
			namedEntry(e, "cg.weight").shape = []uint64{16, 16, 9, 3, 1}
			return e, m, nil
		})
	}, "tensor cg.weight: shape [16 16 9 3 1], want [16 16 3 3 3]"},
	{"wrong dtype", func(t *testing.T) []byte {
		return editedFile(t, func(e []stEntry, m map[string]any) ([]stEntry, map[string]any, []byte) {
			b := namedEntry(e, "head.bias")
			b.dtype, b.data = "F16", b.data[:len(b.data)/2]
			return e, m, nil
		})
	}, "tensor head.bias: dtype F16, want F32"},
	{"unknown dtype", func(t *testing.T) []byte {
		return editedFile(t, func(e []stEntry, m map[string]any) ([]stEntry, map[string]any, []byte) {
			namedEntry(e, "psi.bias").dtype = "F8_E4M3"
			return e, m, nil
		})
	}, `tensor "psi.bias"`},
	{"truncated data", func(t *testing.T) []byte {
		data := editedFile(t, metaEdit("description", "x"))
		return data[:len(data)-100]
	}, "past the end of the"},
	{"offsets backwards", func(t *testing.T) []byte {
		return editedFile(t, func(e []stEntry, m map[string]any) ([]stEntry, map[string]any, []byte) {
			namedEntry(e, "wx.bias").offsets = &[2]uint64{64, 32}
			return e, m, nil
		})
	}, "tensor wx.bias: data offsets [64, 32] run backwards"},
	{"size disagrees with shape", func(t *testing.T) []byte {
		return editedFile(t, func(e []stEntry, m map[string]any) ([]stEntry, map[string]any, []byte) {
			namedEntry(e, "c1.bias").offsets = &[2]uint64{1728, 1728 + 60}
			return e, m, nil
		})
	}, "tensor c1.bias: data offsets [1728, 1788] hold 60 bytes, want 64"},
	{"overlapping tensors", func(t *testing.T) []byte {
		return editedFile(t, func(e []stEntry, m map[string]any) ([]stEntry, map[string]any, []byte) {
			namedEntry(e, "c1.bias").offsets = &[2]uint64{0, 64} // over c1.weight
			return e, m, nil
		})
	}, "overlap tensor"},
	{"hole between tensors", func(t *testing.T) []byte {
		return editedFile(t, func(e []stEntry, m map[string]any) ([]stEntry, map[string]any, []byte) {
			namedEntry(e, "c1.weight").data = append(namedEntry(e, "c1.weight").data, 0, 0, 0, 0)
			namedEntry(e, "c1.weight").offsets = &[2]uint64{0, 1728}
			return e, m, nil
		})
	}, "tensor c1.bias: data offsets [1732, 1796] leave a hole of 4 bytes"},
	{"trailing bytes", func(t *testing.T) []byte {
		return editedFile(t, func(e []stEntry, m map[string]any) ([]stEntry, map[string]any, []byte) {
			return e, m, []byte{1, 2, 3, 4}
		})
	}, "4 bytes of data after the last tensor"},
	{"NaN weight", func(t *testing.T) []byte {
		return editedFile(t, func(e []stEntry, m map[string]any) ([]stEntry, map[string]any, []byte) {
			binary.LittleEndian.PutUint32(namedEntry(e, "wg.weight").data[8:], math.Float32bits(float32(math.NaN())))
			return e, m, nil
		})
	}, "tensor wg.weight: value 2 is NaN"},
}

func TestParseModelErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range badModelFiles {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m, err := ParseModel(tc.data(t))
			if err == nil {
				t.Fatalf("parsed a bad file: %d channels", m.Channels)
			}
			if !errors.Is(err, ErrBadModel) {
				t.Errorf("error %q does not wrap ErrBadModel", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not say %q", err, tc.want)
			}
		})
	}
}

func TestHandBuiltFileParses(t *testing.T) {
	t.Parallel()
	// The hand builder lays tensors out in state_dict order, not by name as Marshal does: any
	// valid layout must be accepted.
	entries, meta := validEntries()
	meta["class_names"] = "background, class1 ,class2,class3" // spaces around names are trimmed
	m, err := ParseModel(buildSafetensors(t, entries, meta, nil))
	if err != nil {
		t.Fatal(err)
	}
	want := RandomModel(16, 4, 1)
	want.Description = "test"
	if !reflect.DeepEqual(m, want) {
		t.Error("parsed model differs from the one written")
	}
}

func TestModelValidate(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		edit func(m *Model)
		want string
	}{
		{"channels odd", func(m *Model) { m.Channels = 15 }, "channels 15"},
		{"classes zero", func(m *Model) { m.Classes = 0 }, "classes 0"},
		{"names count", func(m *Model) { m.ClassNames = m.ClassNames[:3] }, "3 class names for 4 classes"},
		{"name with comma", func(m *Model) { m.ClassNames[2] = "a,b" }, `class name 2 "a,b"`},
		{"short tensor", func(m *Model) { m.WXB = m.WXB[:7] }, "tensor wx.bias: 7 values, want 8"},
		{"Inf weight", func(m *Model) { m.HeadW[3] = float32(math.Inf(1)) }, "tensor head.weight: value 3 is +Inf"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := RandomModel(16, 4, 1)
			tc.edit(m)
			err := m.Validate()
			if !errors.Is(err, ErrBadModel) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Validate: %v, want ErrBadModel saying %q", err, tc.want)
			}
			if _, err := m.MarshalSafetensors(); err == nil {
				t.Error("MarshalSafetensors wrote an invalid model")
			}
		})
	}
}

func FuzzParseModel(f *testing.F) {
	valid, err := RandomModel(2, 2, 1).MarshalSafetensors()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(valid)
	f.Add(valid[:len(valid)-3])
	f.Add([]byte{8, 0, 0, 0, 0, 0, 0, 0, '{', '}', ' ', ' ', ' ', ' ', ' ', ' '})
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := ParseModel(data)
		if err != nil {
			if !errors.Is(err, ErrBadModel) {
				t.Fatalf("error %v does not wrap ErrBadModel", err)
			}
			return
		}
		out, err := m.MarshalSafetensors()
		if err != nil {
			t.Fatalf("parsed model does not marshal: %v", err)
		}
		again, err := ParseModel(out)
		if err != nil || !reflect.DeepEqual(again, m) {
			t.Fatalf("re-marshalled model does not round trip: %v", err)
		}
	})
}
