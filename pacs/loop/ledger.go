package loop

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"voxpipe/internal/atomicfile"
)

// Record is a series' line in the ledger: done, its SEGs stored.
type Record struct {
	Key       string    `json:"key"`
	StudyUID  string    `json:"study_uid"`
	SeriesUID string    `json:"series_uid"`
	SEGs      []string  `json:"seg_sop_instance_uids"`
	StoredAt  time.Time `json:"stored_at"`
	StoreURL  string    `json:"store_url"`
	Instances int       `json:"instances"`
	RunID     string    `json:"run_id,omitempty"`
	MaskFiles []string  `json:"masks"`
}

// paths of the work folder's pacs/ part.
func (s *Sync) pacsDir() string               { return filepath.Join(s.Dir, "pacs") }
func (s *Sync) doneDir() string               { return filepath.Join(s.pacsDir(), "done") }
func (s *Sync) donePath(key string) string    { return filepath.Join(s.doneDir(), key+".json") }
func (s *Sync) claimPath(key string) string   { return filepath.Join(s.pacsDir(), "series", key) }
func (s *Sync) statePath() string             { return filepath.Join(s.pacsDir(), "state.json") }
func (s *Sync) incomingDir(key string) string { return filepath.Join(s.pacsDir(), "incoming", key) }

// Done reads the ledger record of key: nil when the series is not done.
func (s *Sync) Done(key string) (*Record, error) {
	b, err := os.ReadFile(s.donePath(key))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("loop: ledger: %w", err)
	}
	var r Record
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("loop: ledger %s: %w", s.donePath(key), err)
	}
	return &r, nil
}

// markDone writes key's ledger record, whole or not at all.
func (s *Sync) markDone(r Record) error {
	if err := os.MkdirAll(s.doneDir(), 0o755); err != nil {
		return fmt.Errorf("loop: ledger: %w", err)
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := atomicfile.WriteBytes(s.donePath(r.Key), append(b, '\n')); err != nil {
		return fmt.Errorf("loop: ledger: %w", err)
	}
	return nil
}

// state is what a sync remembers between runs.
type state struct {
	// LastSearch is when the last sync whose search completed started: series new since then
	// are searched from its date (QIDO matches dates, not times).
	LastSearch time.Time `json:"last_search"`
}

// lastSearch is the start of the last completed search (zero: none yet).
func (s *Sync) lastSearch() (time.Time, error) {
	b, err := os.ReadFile(s.statePath())
	if errors.Is(err, fs.ErrNotExist) {
		return time.Time{}, nil
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("loop: state: %w", err)
	}
	var st state
	if err := json.Unmarshal(b, &st); err != nil {
		return time.Time{}, fmt.Errorf("loop: state %s: %w", s.statePath(), err)
	}
	return st.LastSearch, nil
}

// searched records that a search started at t completed (a later one is never replaced by
// an earlier one: concurrent syncs).
func (s *Sync) searched(t time.Time) error {
	if prev, err := s.lastSearch(); err == nil && prev.After(t) {
		return nil
	}
	b, err := json.Marshal(state{LastSearch: t.UTC()})
	if err != nil {
		return err
	}
	if err := os.MkdirAll(s.pacsDir(), 0o755); err != nil {
		return fmt.Errorf("loop: state: %w", err)
	}
	return atomicfile.WriteBytes(s.statePath(), append(b, '\n'))
}
