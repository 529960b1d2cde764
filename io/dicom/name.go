package dicom

import (
	"fmt"
	"strconv"
	"strings"
)

// DefaultName is the default naming template: "series_", the SeriesNumber, "_" and the
// series' ID, the name logs and records give the series (jobs.DICOMJobName). It holds no
// patient data; a template asks for DICOM fields explicitly.
const DefaultName = "series_%s_%h"

// nameFields are the template's verbs. PatientName and birth dates have none, on purpose.
var nameFields = map[byte]func(s *Series) string{
	'i': func(s *Series) string { return s.PatientID },
	't': func(s *Series) string { return s.StudyDate },
	's': func(s *Series) string { return strconv.Itoa(s.Number) },
	'd': func(s *Series) string { return s.Description },
	'p': func(s *Series) string { return s.ProtocolName },
	'm': func(s *Series) string { return s.Modality },
	'e': func(s *Series) string { return strconv.Itoa(s.EchoNumber) },
	'j': func(s *Series) string { return s.UID },
	'k': func(s *Series) string { return s.StudyUID },
	'h': func(s *Series) string { return s.ID() },
}

// CheckName validates a naming template: text and the verbs %i (PatientID), %t (StudyDate),
// %s (SeriesNumber), %d (SeriesDescription), %p (ProtocolName), %m (Modality), %e
// (EchoNumber), %j (SeriesInstanceUID), %k (StudyInstanceUID), %h (the series' ID hash), %%.
func CheckName(template string) error {
	for i := 0; i < len(template); i++ {
		if template[i] != '%' {
			continue
		}
		if i+1 == len(template) {
			return fmt.Errorf("name template %q ends with %%", template)
		}
		i++
		if _, ok := nameFields[template[i]]; !ok && template[i] != '%' {
			return fmt.Errorf("name template %q: unknown verb %%%c (known: %%i %%t %%s %%d %%p %%m %%e %%j %%k %%h %%%%)", template, template[i])
		}
	}
	return nil
}

// Name expands a template (checked by CheckName) for the series, sanitised into one file name:
// only letters, digits, '.', '-' and '_' remain (others become '_'), runs of '_' collapse and
// none lead or trail. An empty result is the series' ID.
func (s *Series) Name(template string) string {
	var b strings.Builder
	for i := 0; i < len(template); i++ {
		c := template[i]
		if c == '%' && i+1 < len(template) {
			i++
			if f, ok := nameFields[template[i]]; ok {
				b.WriteString(f(s))
				continue
			}
			c = template[i]
		}
		b.WriteByte(c)
	}
	return sanitise(b.String(), s.ID())
}

func sanitise(name, fallback string) string {
	var b strings.Builder
	for _, r := range name {
		ok := r < 128 && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '-')
		if !ok {
			r = '_'
		}
		if r == '_' && (b.Len() == 0 || strings.HasSuffix(b.String(), "_")) {
			continue
		}
		b.WriteRune(r)
	}
	out := strings.Trim(b.String(), "_.")
	if out == "" {
		return fallback
	}
	return out
}

// Names names each series by the template, making the names unique: series whose names
// collide each get "_" and their ID appended.
func Names(series []*Series, template string) []string {
	names := make([]string, len(series))
	count := map[string]int{}
	for i, s := range series {
		names[i] = s.Name(template)
		count[names[i]]++
	}
	for i, s := range series {
		if count[names[i]] > 1 {
			names[i] += "_" + s.ID()
		}
	}
	return names
}
