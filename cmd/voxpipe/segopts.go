package main

import (
	"voxpipe/io/dicomseg"
	"voxpipe/model"
)

// segOptions describes the model's labels as SEG segments: segment N is label N, named and
// coded by the model card (SNOMED CT Tissue where the card gives no codes), made by the model
// (AUTOMATIC: its name, and its weights' SHA-256 as the version).
func segOptions(m *model.Model, name, digest string, emptyFrames bool) *dicomseg.Options {
	var segs []dicomseg.Segment
	for _, l := range m.Labels() {
		if l.Value < 1 || l.Value > dicomseg.MaxSegments {
			continue // background is not a segment
		}
		sg := dicomseg.Segment{Number: l.Value, Label: l.Name, Algorithm: name, AlgorithmVersion: digest}
		if l.Category != nil {
			sg.Category = dicomseg.Code(*l.Category)
		}
		if l.Type != nil {
			sg.Type = dicomseg.Code(*l.Type)
		}
		segs = append(segs, sg)
	}
	return &dicomseg.Options{Segments: segs, EmptyFrames: emptyFrames, Digest: digest,
		Software: "voxpipe " + versionString(), SeriesDescription: "voxpipe " + name}
}
