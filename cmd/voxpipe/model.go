package main

import (
	"fmt"
	"path/filepath"

	"voxpipe/fixtures"
	"voxpipe/segment"
)

// loadModel reads the weights file at path, or the embedded default model when path is empty,
// and returns it with a short name for logs and mask headers.
func loadModel(path string) (*segment.Model, string, error) {
	if path == "" {
		m, err := segment.ParseModel(fixtures.DefaultModel)
		if err != nil {
			return nil, "", fmt.Errorf("embedded default model: %w", err)
		}
		return m, fixtures.DefaultModelName, nil
	}
	m, err := segment.LoadModel(path)
	if err != nil {
		return nil, "", err
	}
	return m, filepath.Base(path), nil
}
