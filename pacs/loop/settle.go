package loop

import (
	"sync"
	"time"
)

// Settler tells when a series has stopped growing: once the instance count a search gives
// has not changed for Settle (less a twentieth, at most 250 ms), as seen by successive
// searches. A series is first seen
// unsettled, so it is taken at the earliest Settle after the first search that lists it.
type Settler struct {
	Settle time.Duration
	Now    func() time.Time // default time.Now

	mu   sync.Mutex
	seen map[string]sighting
}

type sighting struct {
	instances int
	since     time.Time // when the count was first seen at this value
}

// Ready records what a search says of s and reports whether it has settled.
func (st *Settler) Ready(s Series) bool {
	now := time.Now()
	if st.Now != nil {
		now = st.Now()
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.seen == nil {
		st.seen = map[string]sighting{}
	}
	prev, ok := st.seen[s.SeriesUID]
	if !ok || prev.instances != s.Instances {
		st.seen[s.SeriesUID] = sighting{instances: s.Instances, since: now}
		return st.Settle <= 0
	}
	return now.Sub(prev.since) >= st.Settle-slack(st.Settle)
}

// slack forgives searches that come a little early (a ticker's period, measured from when a
// search began): without it a series settled for --settle = --interval waited an interval more.
func slack(settle time.Duration) time.Duration { return min(settle/20, 250*time.Millisecond) }

// Forget drops what is known of a series (done, or failed: a later search starts it over).
func (st *Settler) Forget(seriesUID string) {
	st.mu.Lock()
	defer st.mu.Unlock()
	delete(st.seen, seriesUID)
}
