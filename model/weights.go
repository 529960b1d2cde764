package model

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/nlpodyssey/safetensors"
)

// ErrBadModel is wrapped by every error about a weights file or a Model that is not a valid
// voxpipe network.
var ErrBadModel = errors.New("model: bad model")

// Weights file metadata (the safetensors "__metadata__" string map).
const (
	ModelFormat  = "voxpipe-attn-gate"
	ModelVersion = "1"
)

// Limits that keep a hostile or corrupt file from making us allocate absurd amounts.
const (
	maxHeaderBytes = 1 << 20   // the header of a real model is about 2 KiB
	maxModelBytes  = 256 << 20 // C=256 would be ~30 MiB
	maxChannels    = 1024
	maxClasses     = 256 // labels are uint8
)

// tensorSpec names one tensor of the state_dict and where it lives in a Model.
type tensorSpec struct {
	name  string
	shape []uint64
	field func(m *Model) *[]float32
}

// tensorSpecs lists the state_dict of a network with c channels and k classes, in a fixed order.
func tensorSpecs(c, k int) []tensorSpec {
	uc, uk, ug := uint64(c), uint64(k), uint64(c/2)
	return []tensorSpec{
		{"c1.weight", []uint64{uc, 1, 3, 3, 3}, func(m *Model) *[]float32 { return &m.C1W }},
		{"c1.bias", []uint64{uc}, func(m *Model) *[]float32 { return &m.C1B }},
		{"c2.weight", []uint64{uc, uc, 3, 3, 3}, func(m *Model) *[]float32 { return &m.C2W }},
		{"c2.bias", []uint64{uc}, func(m *Model) *[]float32 { return &m.C2B }},
		{"cg.weight", []uint64{uc, uc, 3, 3, 3}, func(m *Model) *[]float32 { return &m.CGW }},
		{"cg.bias", []uint64{uc}, func(m *Model) *[]float32 { return &m.CGB }},
		{"wx.weight", []uint64{ug, uc, 1, 1, 1}, func(m *Model) *[]float32 { return &m.WXW }},
		{"wx.bias", []uint64{ug}, func(m *Model) *[]float32 { return &m.WXB }},
		{"wg.weight", []uint64{ug, uc, 1, 1, 1}, func(m *Model) *[]float32 { return &m.WGW }},
		{"wg.bias", []uint64{ug}, func(m *Model) *[]float32 { return &m.WGB }},
		{"psi.weight", []uint64{1, ug, 1, 1, 1}, func(m *Model) *[]float32 { return &m.PsiW }},
		{"psi.bias", []uint64{1}, func(m *Model) *[]float32 { return &m.PsiB }},
		{"head.weight", []uint64{uk, uc, 1, 1, 1}, func(m *Model) *[]float32 { return &m.HeadW }},
		{"head.bias", []uint64{uk}, func(m *Model) *[]float32 { return &m.HeadB }},
	}
}

// Parameters is the number of weights and biases in the network.
func (m *Model) Parameters() int {
	n := 0
	for _, spec := range tensorSpecs(m.Channels, m.Classes) {
		n += numel(spec.shape)
	}
	return n
}

func numel(shape []uint64) int {
	n := 1
	for _, d := range shape {
		n *= int(d)
	}
	return n
}

// Validate checks that the Model is a complete, finite network: sizes consistent with Channels
// and Classes, one name per class, no NaN or Inf weights.
func (m *Model) Validate() error {
	if m.Channels < 2 || m.Channels%2 != 0 || m.Channels > maxChannels {
		return fmt.Errorf("%w: channels %d: want an even number in [2, %d]", ErrBadModel, m.Channels, maxChannels)
	}
	if m.Classes < 1 || m.Classes > maxClasses {
		return fmt.Errorf("%w: classes %d: want 1..%d (labels are uint8)", ErrBadModel, m.Classes, maxClasses)
	}
	if m.Card != nil {
		if err := m.Card.Validate(m.Classes); err != nil {
			return err
		}
		for i, l := range m.Card.Labels {
			if i < len(m.ClassNames) && l.Name != m.ClassNames[i] {
				return fmt.Errorf("%w: card label %d is %q but class_names has %q", ErrBadModel, i, l.Name, m.ClassNames[i])
			}
		}
	}
	if len(m.ClassNames) != m.Classes {
		return fmt.Errorf("%w: %d class names for %d classes", ErrBadModel, len(m.ClassNames), m.Classes)
	}
	for i, name := range m.ClassNames {
		if name == "" || strings.ContainsRune(name, ',') || strings.TrimSpace(name) != name {
			return fmt.Errorf("%w: class name %d %q: want non-empty, no comma, no surrounding spaces", ErrBadModel, i, name)
		}
	}
	for _, spec := range tensorSpecs(m.Channels, m.Classes) {
		data := *spec.field(m)
		if want := numel(spec.shape); len(data) != want {
			return fmt.Errorf("%w: tensor %s: %d values, want %d for shape %v", ErrBadModel, spec.name, len(data), want, spec.shape)
		}
		for i, v := range data {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				return fmt.Errorf("%w: tensor %s: value %d is %v", ErrBadModel, spec.name, i, v)
			}
		}
	}
	return nil
}

// LoadModel reads and validates a weights file.
func LoadModel(path string) (*Model, error) {
	m, _, err := ReadModel(path)
	return m, err
}

// ReadModel is LoadModel that also returns the file's bytes, so that a caller can hash them
// (provenance) without reading the file again.
func ReadModel(path string) (*Model, []byte, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, nil, fmt.Errorf("load model: %w", err)
	}
	if info.Size() > maxModelBytes {
		return nil, nil, fmt.Errorf("load model %s: %w: file is %d bytes, more than the %d a model may have", path, ErrBadModel, info.Size(), maxModelBytes)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("load model: %w", err)
	}
	m, err := ParseModel(data)
	if err != nil {
		return nil, nil, fmt.Errorf("load model %s: %w", path, err)
	}
	return m, data, nil
}

// ParseModel decodes a safetensors weights file held in memory. Every tensor's name, dtype,
// shape and data offsets are checked, and the metadata must describe the same network; the
// error names the tensor or field at fault.
func ParseModel(data []byte) (*Model, error) {
	if len(data) < 8 {
		return nil, fmt.Errorf("%w: file is %d bytes, too short for a safetensors header", ErrBadModel, len(data))
	}
	headerLen := binary.LittleEndian.Uint64(data[:8])
	if headerLen > maxHeaderBytes || headerLen > uint64(len(data)-8) {
		return nil, fmt.Errorf("%w: header length %d is absurd for a %d-byte file (limit %d)", ErrBadModel, headerLen, len(data), maxHeaderBytes)
	}
	header := data[8 : 8+headerLen]
	payload := data[8+headerLen:]

	var md safetensors.Metadata
	if err := json.Unmarshal(header, &md); err != nil {
		return nil, fmt.Errorf("%w: safetensors header: %w", ErrBadModel, err)
	}
	infos := md.Tensors()
	if err := checkTensorNames(infos); err != nil {
		return nil, err
	}
	m, err := modelOfMetadata(md.Metadata())
	if err != nil {
		return nil, err
	}
	specs := tensorSpecs(m.Channels, m.Classes)
	if err := checkTensors(specs, infos, uint64(len(payload)), m.Channels, m.Classes); err != nil {
		return nil, err
	}
	if err := checkTiling(specs, infos, uint64(len(payload))); err != nil {
		return nil, err
	}
	for _, spec := range specs {
		info := infos[spec.name]
		raw := payload[info.DataOffsets[0]:info.DataOffsets[1]]
		vals := make([]float32, len(raw)/4)
		for i := range vals {
			vals[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
		}
		*spec.field(m) = vals
	}
	if err := m.Validate(); err != nil {
		return nil, err
	}
	return m, nil
}

// modelOfMetadata is the model (without its tensors) that the header's metadata describes:
// format, version, channels, classes and their names, description and card.
func modelOfMetadata(meta map[string]string) (*Model, error) {
	if got := meta["format"]; got != ModelFormat {
		return nil, fmt.Errorf("%w: not a voxpipe model: metadata format %q, want %q", ErrBadModel, got, ModelFormat)
	}
	if got := meta["version"]; got != ModelVersion {
		return nil, fmt.Errorf("%w: metadata version %q: this voxpipe reads version %q", ErrBadModel, got, ModelVersion)
	}
	channels, err := metaInt(meta, "channels", 2, maxChannels)
	if err != nil {
		return nil, err
	}
	if channels%2 != 0 {
		return nil, fmt.Errorf("%w: metadata channels %d: must be even", ErrBadModel, channels)
	}
	classes, err := metaInt(meta, "classes", 1, maxClasses)
	if err != nil {
		return nil, err
	}
	namesField, ok := meta["class_names"]
	if !ok {
		return nil, fmt.Errorf("%w: metadata class_names missing", ErrBadModel)
	}
	names := strings.Split(namesField, ",")
	for i := range names {
		names[i] = strings.TrimSpace(names[i])
	}
	if len(names) != classes {
		return nil, fmt.Errorf("%w: metadata class_names %q has %d names for %d classes", ErrBadModel, namesField, len(names), classes)
	}

	m := &Model{Channels: channels, Classes: classes, ClassNames: names, Description: meta["description"]}
	if raw, ok := meta[CardKey]; ok {
		if m.Card, err = ParseCard(raw, classes); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// checkTensors checks each tensor's dtype, shape and data offsets against specs (payload:
// the data bytes after the header).
func checkTensors(specs []tensorSpec, infos map[string]*safetensors.TensorInfo, payload uint64, channels, classes int) error {
	for _, spec := range specs {
		info := infos[spec.name]
		if info.DType != safetensors.F32 {
			return fmt.Errorf("%w: tensor %s: dtype %v, want F32", ErrBadModel, spec.name, info.DType)
		}
		if !slices.Equal(info.Shape, spec.shape) {
			return fmt.Errorf("%w: tensor %s: shape %v, want %v (channels %d, classes %d)", ErrBadModel, spec.name, info.Shape, spec.shape, channels, classes)
		}
		start, end := info.DataOffsets[0], info.DataOffsets[1]
		if end < start {
			return fmt.Errorf("%w: tensor %s: data offsets [%d, %d] run backwards", ErrBadModel, spec.name, start, end)
		}
		if end > payload {
			return fmt.Errorf("%w: tensor %s: data offsets [%d, %d] past the end of the %d data bytes (truncated file?)", ErrBadModel, spec.name, start, end, payload)
		}
		if want := uint64(numel(spec.shape)) * 4; end-start != want {
			return fmt.Errorf("%w: tensor %s: data offsets [%d, %d] hold %d bytes, want %d", ErrBadModel, spec.name, start, end, end-start, want)
		}
	}
	return nil
}

// checkTensorNames reports, in one error, every tensor the network needs that is missing and
// every tensor it does not know.
func checkTensorNames(infos map[string]*safetensors.TensorInfo) error {
	want := map[string]bool{}
	for _, spec := range tensorSpecs(2, 1) {
		want[spec.name] = true
	}
	var missing, unexpected []string
	for name := range want {
		if _, ok := infos[name]; !ok {
			missing = append(missing, name)
		}
	}
	for name := range infos {
		if !want[name] {
			unexpected = append(unexpected, name)
		}
	}
	if len(missing) == 0 && len(unexpected) == 0 {
		return nil
	}
	sort.Strings(missing)
	sort.Strings(unexpected)
	var parts []string
	if len(missing) > 0 {
		parts = append(parts, "missing tensor "+listSome(missing))
	}
	if len(unexpected) > 0 {
		parts = append(parts, "unexpected tensor "+listSome(unexpected))
	}
	return fmt.Errorf("%w: not a voxpipe model: %s", ErrBadModel, strings.Join(parts, " / "))
}

// listSome joins names, eliding the middle of long lists (foreign checkpoints have hundreds).
func listSome(names []string) string {
	const keep = 6
	if len(names) <= keep {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:keep], ", "), len(names)-keep)
}

// checkTiling requires the tensors to cover the data buffer exactly, without overlaps or holes,
// as the safetensors format does.
func checkTiling(specs []tensorSpec, infos map[string]*safetensors.TensorInfo, size uint64) error {
	order := make([]string, len(specs))
	for i, spec := range specs {
		order[i] = spec.name
	}
	sort.Slice(order, func(i, j int) bool {
		a, b := infos[order[i]].DataOffsets, infos[order[j]].DataOffsets
		return a[0] < b[0] || (a[0] == b[0] && order[i] < order[j])
	})
	pos, prev := uint64(0), ""
	for _, name := range order {
		off := infos[name].DataOffsets
		switch {
		case off[0] < pos:
			return fmt.Errorf("%w: tensor %s: data offsets [%d, %d] overlap tensor %s", ErrBadModel, name, off[0], off[1], prev)
		case off[0] > pos:
			return fmt.Errorf("%w: tensor %s: data offsets [%d, %d] leave a hole of %d bytes before them", ErrBadModel, name, off[0], off[1], off[0]-pos)
		}
		pos, prev = off[1], name
	}
	if pos != size {
		return fmt.Errorf("%w: %d bytes of data after the last tensor", ErrBadModel, size-pos)
	}
	return nil
}

func metaInt(meta map[string]string, key string, lo, hi int) (int, error) {
	s, ok := meta[key]
	if !ok {
		return 0, fmt.Errorf("%w: metadata %s missing", ErrBadModel, key)
	}
	v, err := strconv.Atoi(s)
	if err != nil || v < lo || v > hi {
		return 0, fmt.Errorf("%w: metadata %s %q: want an integer in [%d, %d]", ErrBadModel, key, s, lo, hi)
	}
	return v, nil
}

// MarshalSafetensors encodes the Model as a weights file. The bytes depend only on the Model:
// tensors are laid out by name and the JSON header has sorted keys.
func (m *Model) MarshalSafetensors() ([]byte, error) {
	if err := m.Validate(); err != nil {
		return nil, err
	}
	views := make(map[string]safetensors.TensorView)
	for _, spec := range tensorSpecs(m.Channels, m.Classes) {
		vals := *spec.field(m)
		raw := make([]byte, 4*len(vals))
		for i, v := range vals {
			binary.LittleEndian.PutUint32(raw[4*i:], math.Float32bits(v))
		}
		view, err := safetensors.NewTensorView(safetensors.F32, spec.shape, raw)
		if err != nil {
			return nil, fmt.Errorf("marshal tensor %s: %w", spec.name, err)
		}
		views[spec.name] = view
	}
	meta := map[string]string{
		"format":      ModelFormat,
		"version":     ModelVersion,
		"channels":    strconv.Itoa(m.Channels),
		"classes":     strconv.Itoa(m.Classes),
		"class_names": strings.Join(m.ClassNames, ","),
		"description": m.Description,
	}
	if m.Card != nil {
		card, err := m.Card.Marshal()
		if err != nil {
			return nil, err
		}
		meta[CardKey] = card
	}
	out, err := safetensors.Serialize(views, meta)
	if err != nil {
		return nil, fmt.Errorf("marshal model: %w", err)
	}
	return out, nil
}

// RandomModel makes a deterministic network for tests and benchmarks: weights uniform with He
// scale (variance 2/fan_in, so ReLU activations keep roughly unit power layer after layer),
// small random biases. The generator is SplitMix64, fixed here so the same seed gives the same
// weights on every Go version and in other languages.
func RandomModel(channels, classes int, seed uint64) *Model {
	rng := SplitMix64{State: seed}
	names := make([]string, classes)
	for i := range names {
		names[i] = fmt.Sprintf("class%d", i)
	}
	if classes > 0 {
		names[0] = "background"
	}
	m := &Model{
		Channels:    channels,
		Classes:     classes,
		ClassNames:  names,
		Description: fmt.Sprintf("random weights, seed %d (tests only)", seed),
	}
	for _, spec := range tensorSpecs(channels, classes) {
		n := numel(spec.shape)
		vals := make([]float32, n)
		var bound float64
		if len(spec.shape) > 1 { // weight: fan_in = product of all dims but the first
			fanIn := n / int(spec.shape[0])
			bound = math.Sqrt(6 / float64(fanIn))
		} else {
			bound = 0.1
		}
		for i := range vals {
			vals[i] = float32(bound * (2*rng.Float64() - 1))
		}
		*spec.field(m) = vals
	}
	return m
}

// SplitMix64 is the generator of RandomModel (and of test volumes): splitmix64, seeded by State.
type SplitMix64 struct{ State uint64 }

// Next returns the next 64 random bits.
func (r *SplitMix64) Next() uint64 {
	r.State += 0x9e3779b97f4a7c15
	z := r.State
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// Float64 returns a uniform value in [0, 1) with 53 random bits.
func (r *SplitMix64) Float64() float64 { return float64(r.Next()>>11) / (1 << 53) }
