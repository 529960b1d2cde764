package claim

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"voxpipe/internal/fullfs"
	"voxpipe/internal/testexec"
)

func newManager(t *testing.T, root, run string) *Manager {
	t.Helper()
	m, err := NewManager(root, Options{RunID: run, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// writeClaim plants a claim file as another process would have left it.
func writeClaim(t *testing.T, mask string, h Holder, mtime time.Time) {
	t.Helper()
	b, _ := json.Marshal(h)
	if err := os.WriteFile(Path(mask), b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(Path(mask), mtime, mtime); err != nil {
		t.Fatal(err)
	}
}

// deadPID is the pid of a process that has exited (and been reaped).
func deadPID(t *testing.T) int {
	t.Helper()
	cmd := testexec.Cmd(t, "true")
	if err := cmd.Run(); err != nil {
		t.Skip("cannot run true:", err)
	}
	return cmd.Process.Pid
}

func TestAcquireReleaseAndBusy(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	mask := filepath.Join(dir, "a_mask.nii.gz")
	a, b := newManager(t, dir, "run-a"), newManager(t, dir, "run-b")
	c, err := a.Acquire(mask)
	if err != nil {
		t.Fatal(err)
	}
	if c.TookOver != nil {
		t.Errorf("fresh claim reports a takeover of %v", c.TookOver)
	}
	got, _, err := a.read(Path(mask))
	if err != nil || got.RunID != "run-a" || got.PID != os.Getpid() || got.Token == "" {
		t.Fatalf("claim content %+v, %v", got, err)
	}
	// Another manager of a live process (this one) finds it busy, with the holder named.
	_, err = b.Acquire(mask)
	var busy *BusyError
	if !errors.Is(err, ErrBusy) || !errors.As(err, &busy) || busy.Holder.RunID != "run-a" {
		t.Fatalf("second acquire: %v", err)
	}
	if err := c.Check(); err != nil {
		t.Fatalf("check of a held claim: %v", err)
	}
	if err := c.Release(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(Path(mask)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("claim file after release: %v", err)
	}
	if err := c.Release(); err != nil {
		t.Fatalf("second release: %v", err)
	}
	if _, err := b.Acquire(mask); err != nil {
		t.Fatalf("acquire after release: %v", err)
	}
	leftovers, _ := filepath.Glob(filepath.Join(dir, ".*.tmp"))
	if len(leftovers) != 0 {
		t.Errorf("temporary claim files left: %v", leftovers)
	}
}

func TestTakeoverSameHost(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	m := newManager(t, dir, "run-new")
	self := m.Self()
	cases := []struct {
		name  string
		h     Holder
		taken bool
	}{
		{"dead pid", Holder{Host: self.Host, BootID: self.BootID, PID: deadPID(t), RunID: "old"}, true},
		{"pid reused by another process", Holder{Host: self.Host, BootID: self.BootID, PID: 1, PIDStart: 1<<62 + 5, RunID: "old"}, true},
		// Another boot id under this host name may be another machine named alike: judged by
		// its heartbeat, which is fresh here.
		{"other boot id", Holder{Host: self.Host, BootID: "another-boot", PID: os.Getpid(), PIDStart: self.PIDStart, RunID: "old"}, false},
		{"live process", Holder{Host: self.Host, BootID: self.BootID, PID: os.Getpid(), PIDStart: self.PIDStart, RunID: "old"}, false},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			mask := filepath.Join(dir, tc.name+".nii.gz")
			// A fresh heartbeat: same-host claims are judged by their process, not their age.
			writeClaim(t, mask, tc.h, time.Now())
			c, err := m.Acquire(mask)
			if !tc.taken {
				if !errors.Is(err, ErrBusy) {
					t.Fatalf("case %d: want busy, got %v", i, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("takeover: %v", err)
			}
			if c.TookOver == nil || c.TookOver.RunID != "old" {
				t.Errorf("TookOver = %+v", c.TookOver)
			}
			got, _, _ := m.read(Path(mask))
			if got.RunID != "run-new" {
				t.Errorf("claim after takeover belongs to %q", got.RunID)
			}
		})
	}
}

func TestTakeoverOtherHostByHeartbeat(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	m := newManager(t, dir, "run-new")
	other := Holder{Host: "node-17", BootID: "x", PID: os.Getpid(), RunID: "remote"}

	fresh := filepath.Join(dir, "fresh.nii.gz")
	writeClaim(t, fresh, other, time.Now().Add(-30*time.Second)) // within the 1 min timeout
	if _, err := m.Acquire(fresh); !errors.Is(err, ErrBusy) {
		t.Fatalf("claim with a recent heartbeat on another host: %v", err)
	}
	stale := filepath.Join(dir, "stale.nii.gz")
	writeClaim(t, stale, other, time.Now().Add(-2*time.Minute))
	c, err := m.Acquire(stale)
	if err != nil || c.TookOver == nil || c.TookOver.Host != "node-17" {
		t.Fatalf("stale claim of another host: %v, %+v", err, c)
	}

	// Garbage at the claim's name is judged by its age alone.
	junk := filepath.Join(dir, "junk.nii.gz")
	os.WriteFile(Path(junk), []byte("not json"), 0o644)
	if _, err := m.Acquire(junk); !errors.Is(err, ErrBusy) {
		t.Fatalf("recent unparsable claim: %v", err)
	}
	old := time.Now().Add(-time.Hour)
	os.Chtimes(Path(junk), old, old)
	if _, err := m.Acquire(junk); err != nil {
		t.Fatalf("old unparsable claim: %v", err)
	}
}

// A claim another host took over is found lost at the next heartbeat, and releasing it
// leaves the new holder's claim in place.
func TestLostClaimIsDetectedAndNotReleased(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		const heartbeat = 20 * time.Millisecond
		dir := t.TempDir()
		mask := filepath.Join(dir, "a.nii.gz")
		m, err := NewManager(dir, Options{RunID: "slow", Timeout: 400 * time.Millisecond, Heartbeat: heartbeat})
		if err != nil {
			t.Fatal(err)
		}
		c, err := m.Acquire(mask)
		if err != nil {
			t.Fatal(err)
		}
		// Another host takes it over (as after this process was paused beyond the timeout).
		thief := Holder{Host: "node-2", PID: 42, RunID: "thief", Token: "other"}
		writeClaim(t, mask, thief, time.Now())
		stop := make(chan struct{})
		defer close(stop)
		started := time.Now()
		go m.Heartbeat(stop)
		select {
		case <-c.Lost():
		case <-time.After(5 * time.Second):
			t.Fatal("heartbeat did not notice the lost claim")
		}
		if took := time.Since(started); took != heartbeat {
			t.Errorf("lost noticed after %v, want at the first heartbeat (%v)", took, heartbeat)
		}
		if err := c.Check(); !errors.Is(err, ErrLost) {
			t.Fatalf("Check of a lost claim: %v", err)
		}
		if err := c.Release(); err != nil {
			t.Fatal(err)
		}
		got, _, err := m.read(Path(mask))
		if err != nil || got.RunID != "thief" {
			t.Fatalf("release removed the thief's claim: %+v, %v", got, err)
		}
	})
}

// The heartbeat sets a held claim's mtime to the time of each beat, not before the first.
func TestHeartbeatRefreshesMtime(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		const heartbeat = 10 * time.Millisecond
		dir := t.TempDir()
		mask := filepath.Join(dir, "a.nii.gz")
		m, err := NewManager(dir, Options{RunID: "r", Timeout: time.Second, Heartbeat: heartbeat})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := m.Acquire(mask); err != nil {
			t.Fatal(err)
		}
		old := time.Now().Add(-time.Hour)
		if err := os.Chtimes(Path(mask), old, old); err != nil {
			t.Fatal(err)
		}
		mtime := func() time.Time {
			t.Helper()
			st, err := os.Stat(Path(mask))
			if err != nil {
				t.Fatal(err)
			}
			return st.ModTime()
		}
		stop := make(chan struct{})
		defer close(stop)
		start := time.Now()
		go m.Heartbeat(stop)
		<-time.After(heartbeat / 2) // the fake clock: every goroutine of the bubble waits meanwhile
		if got := mtime(); !got.Equal(old) {
			t.Fatalf("mtime %v before the first heartbeat, want the planted %v", got, old)
		}
		for beat := 1; beat <= 3; beat++ {
			<-time.After(heartbeat)
			if got, want := mtime(), start.Add(time.Duration(beat)*heartbeat); !got.Equal(want) {
				t.Fatalf("mtime %v after heartbeat %d, want %v", got, beat, want)
			}
		}
	})
}

// Many managers racing for one volume, fresh or held by a dead process: exactly one wins.
func TestRaceExactlyOneWinner(t *testing.T) {
	t.Parallel()
	for _, dead := range []bool{false, true} {
		dir := t.TempDir()
		mask := filepath.Join(dir, "v.nii.gz")
		probe := newManager(t, dir, "probe")
		if dead {
			writeClaim(t, mask, Holder{Host: probe.Self().Host, BootID: probe.Self().BootID, PID: deadPID(t), RunID: "dead"}, time.Now())
		}
		const n = 16
		var wins atomic.Int32
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range n {
			m := newManager(t, dir, "racer")
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				_, err := m.Acquire(mask)
				switch {
				case err == nil:
					wins.Add(1)
				case !errors.Is(err, ErrBusy):
					t.Errorf("racer %d: %v", i, err)
				}
			}()
		}
		close(start)
		wg.Wait()
		if wins.Load() != 1 {
			t.Fatalf("dead=%v: %d winners", dead, wins.Load())
		}
	}
}

func TestReleaseAllAndStaleTemps(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	m := newManager(t, dir, "r")
	var masks []string
	for _, n := range []string{"a", "b", "c"} {
		masks = append(masks, filepath.Join(dir, n+".nii.gz"))
		if _, err := m.Acquire(masks[len(masks)-1]); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.ReleaseAll(); err != nil {
		t.Fatal(err)
	}
	for _, mask := range masks {
		if _, err := os.Stat(Path(mask)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s still claimed", mask)
		}
	}

	// A temporary left by a dead process is removed by the next holder; a live one's is kept.
	mask := masks[0]
	self := m.Self()
	deadTmp := Path(mask) + ".deadbeef.tmp"
	b, _ := json.Marshal(Holder{Host: self.Host, BootID: self.BootID, PID: deadPID(t), Token: "deadbeef"})
	os.WriteFile(deadTmp, b, 0o644)
	liveTmp := Path(mask) + ".cafe.tmp"
	b, _ = json.Marshal(Holder{Host: self.Host, BootID: self.BootID, PID: os.Getpid(), PIDStart: self.PIDStart, Token: "cafe"})
	os.WriteFile(liveTmp, b, 0o644)
	// Killed before writing: empty, judged by its name (this host's key, a dead pid), or by
	// its age when the key is another host's.
	emptyDead := fmt.Sprintf("%s.%s-%d-0-aa.tmp", Path(mask), m.hostKey, deadPID(t))
	os.WriteFile(emptyDead, nil, 0o644)
	emptyOther := Path(mask) + ".0123456789ab-77-5-bb.tmp"
	os.WriteFile(emptyOther, nil, 0o644)
	c, err := m.Acquire(mask)
	if err != nil {
		t.Fatal(err)
	}
	removed := c.RemoveStaleTemps()
	slices.Sort(removed)
	want := []string{emptyDead, deadTmp}
	slices.Sort(want) // the host key in emptyDead's name sorts either side of "deadbeef"
	if !slices.Equal(removed, want) {
		t.Errorf("removed %v, want %v", removed, want)
	}
	for _, kept := range []string{liveTmp, emptyOther} {
		if _, err := os.Stat(kept); err != nil {
			t.Errorf("%s was removed: %v", kept, err)
		}
	}
}

func TestProcessStart(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	a, err := processStart(os.Getpid())
	if err != nil || a == 0 {
		t.Fatalf("processStart(self) = %d, %v", a, err)
	}
	cmd := testexec.Cmd(t, "sleep", "5")
	if err := cmd.Start(); err != nil {
		t.Skip(err)
	}
	defer cmd.Process.Kill()
	b, err := processStart(cmd.Process.Pid)
	if err != nil || b < a {
		t.Fatalf("child started at %d, before its parent (%d)? %v", b, a, err)
	}
}

// On a full disk a claim fails with ENOSPC and leaves no temporary file behind.
func TestAcquireOnFullDiskLeavesNothing(t *testing.T) {
	t.Parallel()
	dir := fullfs.New(t)
	m := newManager(t, dir, "run-full")
	mask := filepath.Join(dir, "a_mask.nii.gz")
	if _, err := m.Acquire(mask); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Acquire on a full disk: %v; want ENOSPC", err)
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if e.Name() != ".filler" {
			t.Errorf("left behind: %s", e.Name())
		}
	}
	if len(m.Held()) != 0 {
		t.Errorf("holds %d claims", len(m.Held()))
	}
}
