package dicomweb

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
)

// The DICOM tags the client reads, as DICOM JSON keys (PS3.18 F.2).
const (
	tagStudyDate        = "00080020"
	tagSeriesDate       = "00080021"
	tagStudyTime        = "00080030"
	tagSeriesTime       = "00080031"
	tagModality         = "00080060"
	tagSeriesDesc       = "0008103E"
	tagRetrieveURL      = "00081190"
	tagFailureReason    = "00081197"
	tagFailedSOPSeq     = "00081198"
	tagReferencedSOPSeq = "00081199"
	tagSOPClassUID      = "00081150" // ReferencedSOPClassUID
	tagSOPInstanceUID   = "00081155" // ReferencedSOPInstanceUID
	tagStudyUID         = "0020000D"
	tagSeriesUID        = "0020000E"
	tagSeriesNumber     = "00200011"
	tagSeriesInstances  = "00201209" // NumberOfSeriesRelatedInstances
)

// dataset is one DICOM JSON object: tag -> attribute.
type dataset map[string]attribute

// UnmarshalJSON reads a dataset with its tags upper-cased (PS3.18 writes them so; not every
// server does).
func (d *dataset) UnmarshalJSON(b []byte) error {
	var m map[string]attribute
	if err := json.Unmarshal(b, &m); err != nil {
		return err
	}
	*d = make(dataset, len(m))
	for k, v := range m {
		(*d)[strings.ToUpper(k)] = v
	}
	return nil
}

// attribute is one DICOM JSON attribute. Value holds strings, numbers, person-name objects or
// nested datasets, by VR; it is kept raw and read by the accessor that knows what it wants.
type attribute struct {
	VR    string            `json:"vr"`
	Value []json.RawMessage `json:"Value"`
}

// str is the first value of tag as a string: a JSON string as is, a number as written
// (Orthanc and others send IS and DS values as numbers or as strings), a person name's
// Alphabetic group. Missing, null or empty: "".
func (d dataset) str(tag string) string {
	a, ok := d[tag]
	if !ok || len(a.Value) == 0 {
		return ""
	}
	raw := bytes.TrimSpace(a.Value[0])
	switch {
	case len(raw) == 0 || string(raw) == "null":
		return ""
	case raw[0] == '"':
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return ""
		}
		return strings.TrimSpace(s)
	case raw[0] == '{':
		var pn struct{ Alphabetic string }
		if json.Unmarshal(raw, &pn) != nil {
			return ""
		}
		return pn.Alphabetic
	}
	return string(raw) // a number
}

// int is the first value of tag as an integer; 0 when missing or not a number.
func (d dataset) int(tag string) int {
	s := d.str(tag)
	if n, err := strconv.Atoi(s); err == nil {
		return n
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil && f == float64(int(f)) {
		return int(f)
	}
	return 0
}

// seq is the items of a sequence attribute; nil when missing. An item that is not an object
// fails.
func (d dataset) seq(tag string) ([]dataset, error) {
	a, ok := d[tag]
	if !ok {
		return nil, nil
	}
	items := make([]dataset, 0, len(a.Value))
	for _, raw := range a.Value {
		var item dataset
		if err := json.Unmarshal(raw, &item); err != nil {
			return nil, err
		}
		items = append(items, item)
	}
	return items, nil
}
