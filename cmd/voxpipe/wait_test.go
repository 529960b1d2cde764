package main

import "time"

// pollInterval is how often the tests look for what a separate process does: the files it
// writes (the file system sends the tests no events to wait on).
const pollInterval = 10 * time.Millisecond

// poll calls cond every pollInterval until it returns true (poll returns true), or until
// deadline (poll returns what cond returns then).
func poll(deadline time.Time, cond func() bool) bool {
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	timeout := time.NewTimer(time.Until(deadline))
	defer timeout.Stop()
	for !cond() {
		select {
		case <-tick.C:
		case <-timeout.C:
			return cond()
		}
	}
	return true
}

// pace waits d between the steps of a slow writer that a test plays (a file copied in parts,
// a DICOM series file by file): arrival in real time is what a watch's settling is tested on.
func pace(d time.Duration) { time.Sleep(d) }
