package model

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Code is a coded concept, as DICOM's Code Sequence items hold one: the coding scheme designator
// (e.g. "SCT" for SNOMED CT), the code value in that scheme and its meaning. A DICOM SEG
// segment's category and type (Segmented Property Category and Type Code Sequences) are Codes.
type Code struct {
	Scheme  string `json:"scheme"`  // Coding Scheme Designator (0008,0102), SH
	Value   string `json:"value"`   // Code Value (0008,0100), SH
	Meaning string `json:"meaning"` // Code Meaning (0008,0104), LO
}

// Lengths of the DICOM value representations a Code's strings go to (PS3.5 6.2), in characters.
const (
	maxSH = 16 // Short String: Scheme, Value
	maxLO = 64 // Long String: Meaning
)

// String is the code as model info prints it: "SCT 52988006 Lesion".
func (c Code) String() string { return c.Scheme + " " + c.Value + " " + c.Meaning }

// validate checks the code's strings are what a DICOM SH or LO may hold: not blank, within
// the VR's length, and free of backslashes (DICOM's value separator) and control characters.
func (c *Code) validate() error {
	for _, f := range []struct {
		name, v string
		max     int
	}{{"scheme", c.Scheme, maxSH}, {"value", c.Value, maxSH}, {"meaning", c.Meaning, maxLO}} {
		if strings.TrimSpace(f.v) == "" {
			return fmt.Errorf("%s is empty", f.name)
		}
		if n := utf8.RuneCountInString(f.v); n > f.max {
			return fmt.Errorf("%s %q has %d characters, DICOM allows %d", f.name, f.v, n, f.max)
		}
		if !utf8.ValidString(f.v) {
			return fmt.Errorf("%s %q is not UTF-8", f.name, f.v)
		}
		if i := strings.IndexFunc(f.v, func(r rune) bool { return r == '\\' || unicode.IsControl(r) }); i >= 0 {
			r, _ := utf8.DecodeRuneInString(f.v[i:])
			return fmt.Errorf("%s %q holds %q: no backslash or control characters", f.name, f.v, r)
		}
	}
	return nil
}

// validateCodes checks the label's category and type, each absent or a valid Code.
func (l *Label) validateCodes() error {
	for _, f := range []struct {
		name string
		c    *Code
	}{{"category", l.Category}, {"type", l.Type}} {
		if f.c == nil {
			continue
		}
		if err := f.c.validate(); err != nil {
			return fmt.Errorf("%s: %w", f.name, err)
		}
	}
	return nil
}
