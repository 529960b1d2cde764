package loop

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"voxpipe/io/dicom"
	"voxpipe/store/claim"
)

// Series is what a QIDO-RS search says of a series.
type Series struct {
	StudyUID, SeriesUID, Modality string
	Instances                     int // NumberOfSeriesRelatedInstances, 0 when not given
}

// Source is the PACS series come from (a DICOMweb client).
type Source interface {
	// Search lists the series to consider, new since since (zero: all).
	Search(ctx context.Context, since time.Time) ([]Series, error)
	// Retrieve writes the series' instances into dir and returns their paths.
	Retrieve(ctx context.Context, s Series, dir string) ([]string, error)
}

// Store is where the SEGs go (STOW-RS); it returns the SOP Instance UIDs it stored and fails
// unless it stored every file.
type Store interface {
	Store(ctx context.Context, files ...string) ([]string, error)
}

// Sync is one pass of the loop over a work folder.
type Sync struct {
	Dir      string         // the work folder: masks, SEGs, records, and pacs/ (doc.go)
	Claims   *claim.Manager // rooted at Dir
	Source   Source
	Store    Store
	StoreURL string // for the ledger
	// Keep, when set, is asked of each series that is not done before it is claimed: false
	// leaves it for a later search (one still arriving: Settler).
	Keep func(Series) bool
	Log  *slog.Logger
	Now  func() time.Time // default time.Now
}

// Item is a new series this sync holds the claim of.
type Item struct {
	Series Series
	Key    string // its ID: the mask's and the ledger's name
	Dir    string // where its files are retrieved
	Files  []string
	claim  *claim.Claim
}

// Plan is what a search found: the series to do (claimed), and how many were left alone.
type Plan struct {
	Todo                            []*Item
	Done, SEGs, Busy, Waiting, Seen int
	started                         time.Time
}

// ErrSearch wraps a failed search: nothing was claimed.
var ErrSearch = errors.New("loop: search failed")

// Key is the work folder's name of a series: its ID (io/dicom.SeriesID, part 0).
func Key(seriesUID string) string { return dicom.SeriesID(seriesUID, 0) }

// Lookback is how far before the last completed search a search starts: QIDO matches a
// series by its study's date, and a study begun before midnight gets series after it.
const Lookback = 24 * time.Hour

// Plan searches the source for series new since the last completed sync (a first one: since
// today), Lookback before, and claims the ones
// not done yet: SEG series are left out, series in the ledger are done, series another live
// sync holds are busy. The caller releases every item (Finish or Abandon).
func (s *Sync) Plan(ctx context.Context) (*Plan, error) {
	p := &Plan{started: s.now()}
	last, err := s.lastSearch()
	if err != nil {
		return nil, err
	}
	if last.IsZero() {
		last = p.started // a first sync starts from today, not from the PACS's whole past
	}
	// A day before: a study begun before midnight whose series arrive after it.
	found, err := s.Source.Search(ctx, last.Add(-Lookback))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrSearch, err)
	}
	seen := map[string]bool{}
	for _, sr := range found {
		key := Key(sr.SeriesUID)
		if seen[key] {
			continue // listed twice (paging over a list that changed)
		}
		seen[key] = true
		p.Seen++
		if sr.Modality == "SEG" {
			p.SEGs++
			continue
		}
		it, err := s.claim(sr, key)
		switch {
		case errors.Is(err, errWait):
			p.Waiting++
		case errors.Is(err, claim.ErrBusy):
			p.Busy++
		case errors.Is(err, errDone):
			p.Done++
		case err != nil:
			s.release(p.Todo)
			return nil, err
		default:
			p.Todo = append(p.Todo, it)
		}
	}
	return p, nil
}

// errDone: the series is in the ledger.
var errDone = errors.New("loop: series done")

// errWait: Keep left the series for later.
var errWait = errors.New("loop: series left for later")

// claim claims a series not in the ledger, reading the ledger again under the claim.
func (s *Sync) claim(sr Series, key string) (*Item, error) {
	if r, err := s.Done(key); err != nil || r != nil {
		return nil, orDone(err)
	}
	if s.Keep != nil && !s.Keep(sr) {
		return nil, errWait
	}
	if err := os.MkdirAll(s.pacsDir()+"/series", 0o755); err != nil {
		return nil, fmt.Errorf("loop: %w", err)
	}
	c, err := s.Claims.Acquire(s.claimPath(key))
	if err != nil {
		return nil, err
	}
	if r, err := s.Done(key); err != nil || r != nil { // finished while we claimed
		c.Release()
		return nil, orDone(err)
	}
	return &Item{Series: sr, Key: key, Dir: s.incomingDir(key), claim: c}, nil
}

func orDone(err error) error {
	if err != nil {
		return err
	}
	return errDone
}

// Retrieve fetches the item's series into its folder (emptied first).
func (s *Sync) Retrieve(ctx context.Context, it *Item) error {
	if err := os.RemoveAll(it.Dir); err != nil {
		return fmt.Errorf("loop: %w", err)
	}
	if err := os.MkdirAll(it.Dir, 0o755); err != nil {
		return fmt.Errorf("loop: %w", err)
	}
	files, err := s.Source.Retrieve(ctx, it.Series, it.Dir)
	if err != nil {
		return fmt.Errorf("retrieve series %s: %w", it.Key, err)
	}
	if len(files) == 0 {
		return fmt.Errorf("retrieve series %s: the PACS sent no instance", it.Key)
	}
	if n := it.Series.Instances; n > 0 && n != len(files) {
		s.log().Warn("series retrieved with another instance count than the search gave", "series", it.Key, "listed", n, "retrieved", len(files))
	}
	it.Files = files
	return nil
}

// Finish stores the item's SEGs, records the series as done, and lets it go. A store that
// fails leaves the series not done (the next sync tries again) and is returned.
func (s *Sync) Finish(ctx context.Context, it *Item, segs, masks []string, runID string) error {
	defer s.release([]*Item{it})
	if len(segs) == 0 {
		return fmt.Errorf("series %s: no DICOM SEG to store", it.Key)
	}
	if err := it.claim.Check(); err != nil {
		return fmt.Errorf("series %s: %w", it.Key, err)
	}
	uids, err := s.Store.Store(ctx, segs...)
	if err != nil {
		return fmt.Errorf("store the SEG of series %s: %w", it.Key, err)
	}
	return s.markDone(Record{
		Key: it.Key, StudyUID: it.Series.StudyUID, SeriesUID: it.Series.SeriesUID, SEGs: uids,
		StoredAt: s.now().UTC(), StoreURL: s.StoreURL, Instances: len(it.Files), RunID: runID, MaskFiles: masks,
	})
}

// Abandon lets an item go without storing anything: the next sync does it again.
func (s *Sync) Abandon(it *Item) { s.release([]*Item{it}) }

// Searched records that this plan's search is covered: the next sync searches from its date.
// Call it only when every series the search found is done, so that one that failed is
// searched for again.
func (s *Sync) Searched(p *Plan) error { return s.searched(p.started) }

// release removes the items' retrieved files and claims.
func (s *Sync) release(items []*Item) {
	for _, it := range items {
		if err := os.RemoveAll(it.Dir); err != nil {
			s.log().Warn("remove a retrieved series", "series", it.Key, "err", err)
		}
		if it.claim != nil {
			if err := it.claim.Release(); err != nil {
				s.log().Warn("release a series' claim", "series", it.Key, "err", err)
			}
		}
	}
}

func (s *Sync) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

func (s *Sync) log() *slog.Logger {
	if s.Log != nil {
		return s.Log
	}
	return slog.New(slog.DiscardHandler)
}
