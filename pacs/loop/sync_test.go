package loop

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"voxpipe/store/claim"
)

// fakePACS lists series and writes one file per instance; it counts what it is asked.
type fakePACS struct {
	series    []Series
	sinceSeen []time.Time
	mu        sync.Mutex
	failFetch map[string]bool // series UIDs whose retrieve fails
	stored    []string        // files stored
	failStore bool
	stores    atomic.Int32
}

func (f *fakePACS) Search(_ context.Context, since time.Time) ([]Series, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sinceSeen = append(f.sinceSeen, since)
	return f.series, nil
}

func (f *fakePACS) Retrieve(_ context.Context, s Series, dir string) ([]string, error) {
	if f.failFetch[s.SeriesUID] {
		return nil, errors.New("connection reset")
	}
	var out []string
	for i := range max(s.Instances, 1) {
		p := filepath.Join(dir, fmt.Sprintf("%d.dcm", i))
		if err := os.WriteFile(p, []byte(s.SeriesUID), 0o644); err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

func (f *fakePACS) Store(_ context.Context, files ...string) ([]string, error) {
	f.stores.Add(1)
	if f.failStore {
		return nil, errors.New("503 from the PACS")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stored = append(f.stored, files...)
	uids := make([]string, len(files))
	for i := range files {
		uids[i] = fmt.Sprintf("2.25.%d", len(f.stored)+i)
	}
	return uids, nil
}

func newSync(t *testing.T, dir string, p *fakePACS, run string) *Sync {
	t.Helper()
	m, err := claim.NewManager(dir, claim.Options{RunID: run})
	if err != nil {
		t.Fatal(err)
	}
	return &Sync{Dir: dir, Claims: m, Source: p, Store: p, StoreURL: "http://pacs/dicom-web"}
}

func threeSeries() []Series {
	return []Series{
		{StudyUID: "1.2", SeriesUID: "1.2.1", Modality: "MR", Instances: 3},
		{StudyUID: "1.2", SeriesUID: "1.2.2", Modality: "MR", Instances: 2},
		{StudyUID: "1.2", SeriesUID: "1.2.9", Modality: "SEG", Instances: 1},
	}
}

// A sync claims the new series (not the SEG), retrieves them, stores a SEG for each and
// records them done: the next sync finds them done and stores nothing.
func TestSyncOnceThenDone(t *testing.T) {
	t.Parallel()
	dir, p := t.TempDir(), &fakePACS{series: threeSeries()}
	s := newSync(t, dir, p, "a")
	plan, err := s.Plan(context.Background())
	if err != nil || len(plan.Todo) != 2 || plan.SEGs != 1 || plan.Seen != 3 {
		t.Fatalf("plan %+v: %v", plan, err)
	}
	for _, it := range plan.Todo {
		if err := s.Retrieve(context.Background(), it); err != nil || len(it.Files) != it.Series.Instances {
			t.Fatalf("retrieve %s: %v (%d files)", it.Key, err, len(it.Files))
		}
		seg := filepath.Join(dir, it.Key+"_mask.seg.dcm")
		os.WriteFile(seg, []byte("SEG"), 0o644)
		if err := s.Finish(context.Background(), it, []string{seg}, nil, "run1"); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(it.Dir); !os.IsNotExist(err) {
			t.Errorf("%s: retrieved files kept after the series was done", it.Dir)
		}
		if r, err := s.Done(it.Key); err != nil || r == nil || r.SeriesUID != it.Series.SeriesUID || len(r.SEGs) != 1 {
			t.Errorf("ledger of %s: %+v %v", it.Key, r, err)
		}
	}
	if err := s.Searched(plan); err != nil {
		t.Fatal(err)
	}
	again, err := s.Plan(context.Background())
	if err != nil || len(again.Todo) != 0 || again.Done != 2 {
		t.Fatalf("second plan %+v: %v", again, err)
	}
	if p.stores.Load() != 2 {
		t.Errorf("%d stores, want 2", p.stores.Load())
	}
	if since, want := p.sinceSeen[1], plan.started.UTC().Add(-Lookback); !since.Equal(want) {
		t.Errorf("the second search was from %v, want a day before the first's start, %v", since, want)
	}
}

// Concurrent syncs on one work folder each claim a series at most once between them: every
// series is done by exactly one, the others see it busy or done.
func TestConcurrentSyncsExactlyOnce(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var series []Series
	for i := range 20 {
		series = append(series, Series{StudyUID: "1.2", SeriesUID: fmt.Sprintf("1.2.%d", i), Modality: "MR", Instances: 1})
	}
	p := &fakePACS{series: series}
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := newSync(t, dir, p, fmt.Sprintf("run%d", w))
			plan, err := s.Plan(context.Background())
			if err != nil {
				t.Error(err)
				return
			}
			for _, it := range plan.Todo {
				if err := s.Retrieve(context.Background(), it); err != nil {
					t.Error(err)
				}
				if err := s.Finish(context.Background(), it, it.Files, nil, "r"); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	if n := p.stores.Load(); n != 20 {
		t.Errorf("%d stores for 20 series", n)
	}
	entries, _ := os.ReadDir(filepath.Join(dir, "pacs", "done"))
	if len(entries) != 20 {
		t.Errorf("%d ledger records for 20 series", len(entries))
	}
}

// A series whose retrieve or store fails is not done: nothing is recorded, its files and
// claim are gone, and the next sync does it again.
func TestFailedSeriesIsRetried(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := &fakePACS{series: threeSeries()[:2], failFetch: map[string]bool{"1.2.1": true}, failStore: true}
	s := newSync(t, dir, p, "a")
	plan, err := s.Plan(context.Background())
	if err != nil || len(plan.Todo) != 2 {
		t.Fatalf("plan %+v: %v", plan, err)
	}
	for _, it := range plan.Todo {
		if err := s.Retrieve(context.Background(), it); err != nil {
			s.Abandon(it)
			continue
		}
		if err := s.Finish(context.Background(), it, it.Files, nil, "r"); err == nil {
			t.Fatalf("%s: store failed, Finish did not say so", it.Key)
		}
	}
	if entries, _ := os.ReadDir(filepath.Join(dir, "pacs", "incoming")); len(entries) != 0 {
		t.Errorf("%d retrieved series kept after they failed", len(entries))
	}
	p.failFetch, p.failStore = nil, false
	again, err := s.Plan(context.Background())
	if err != nil || len(again.Todo) != 2 || again.Done != 0 || again.Busy != 0 {
		t.Fatalf("second plan %+v: %v", again, err)
	}
	for _, it := range again.Todo {
		s.Abandon(it)
	}
}

// A series another live process holds is busy, not a failure; one in the ledger is done.
func TestBusyAndDone(t *testing.T) {
	t.Parallel()
	dir, p := t.TempDir(), &fakePACS{series: threeSeries()[:2]}
	other := newSync(t, dir, p, "other")
	held, err := other.Plan(context.Background())
	if err != nil || len(held.Todo) != 2 {
		t.Fatal(held, err)
	}
	it := held.Todo[0]
	if err := other.Retrieve(context.Background(), it); err != nil {
		t.Fatal(err)
	}
	if err := other.Finish(context.Background(), it, it.Files, nil, "r"); err != nil {
		t.Fatal(err)
	}
	s := newSync(t, dir, p, "me")
	plan, err := s.Plan(context.Background())
	if err != nil || len(plan.Todo) != 0 || plan.Busy != 1 || plan.Done != 1 {
		t.Fatalf("plan %+v: %v", plan, err)
	}
	other.Abandon(held.Todo[1])
}

// A series is taken once its instance count has not changed for Settle, seen by successive
// searches; one that grows starts over. Timing in a synctest bubble.
func TestSettler(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		st := &Settler{Settle: 10 * time.Second}
		s := Series{SeriesUID: "1.2.3", Instances: 5}
		if st.Ready(s) {
			t.Fatal("settled at first sight")
		}
		time.Sleep(6 * time.Second)
		if st.Ready(s) {
			t.Fatal("settled after 6 s of 10")
		}
		s.Instances = 7 // grew
		if st.Ready(s) {
			t.Fatal("settled as it grew")
		}
		time.Sleep(9 * time.Second)
		if st.Ready(s) {
			t.Fatal("settled 9 s after it grew")
		}
		time.Sleep(800 * time.Millisecond) // a search a little early: within the slack
		if !st.Ready(s) {
			t.Fatal("not settled 9.8 s after its last change (10 s, less 250 ms of slack)")
		}
	})
}

// Keep leaves a series for a later search without claiming it.
func TestKeepLeavesSeriesUnclaimed(t *testing.T) {
	t.Parallel()
	dir, p := t.TempDir(), &fakePACS{series: threeSeries()[:2]}
	s := newSync(t, dir, p, "a")
	s.Keep = func(sr Series) bool { return sr.SeriesUID == "1.2.1" }
	plan, err := s.Plan(context.Background())
	if err != nil || len(plan.Todo) != 1 || plan.Waiting != 1 {
		t.Fatalf("plan %+v: %v", plan, err)
	}
	other := newSync(t, dir, p, "b")
	if again, err := other.Plan(context.Background()); err != nil || len(again.Todo) != 1 || again.Busy != 1 {
		t.Fatalf("the series left waiting was claimed: %+v %v", again, err)
	}
}
