// Package claim lets any number of voxpipe processes share an output folder and segment each
// volume exactly once: before working on a volume a process claims it, with a small file next
// to the volume's mask (".<mask>.claim") that names the holder (host, boot, pid, run id) and
// whose modification time is the holder's heartbeat.
//
// The protocol, and the file-system semantics it relies on:
//   - A claim is created complete and atomically: its content is written to a private
//     temporary file, then hard-linked to the claim's name; link(2) fails with EEXIST when the
//     name exists, atomically, on local file systems and on NFSv3/v4 alike. (A lost NFS reply
//     can make a successful link report an error, so a failed link is checked by the
//     temporary's link count, as the NFS lock-file recipe goes.)
//   - A claim whose holder is dead is taken over: on the same host (same host name and boot
//     id) when its pid no longer runs the process that made it (pid and process start time);
//     otherwise (another host, or a host name seen with another boot id) when its heartbeat (mtime, refreshed every Options.Heartbeat) is older
//     than Options.Timeout. Hosts must therefore keep their clocks within a small fraction of
//     the timeout of each other (NTP).
//   - Takeovers and releases remove a claim file, which must never remove a claim made
//     meanwhile by someone else: both hold an exclusive lock on one lock file at the output
//     folder's root (flock(2), which Linux maps to POSIX locks on NFS: NFSv4, or NFSv3 with
//     lockd), and re-read the claim under it. Creating a claim needs no lock.
//   - A holder checks, at every heartbeat and before it commits the mask, that the claim is
//     still its own (its random token): a holder paused for longer than the timeout learns
//     that it lost the volume and abandons it.
//
// Written here rather than taken from a library: lock-file libraries (gofrs/flock, used for
// the takeover lock) hold kernel locks for as long as the work lasts, which tells a dead holder
// from a live one on one host but gives no heartbeat, no holder identity for the records, and
// no takeover across hosts on NFSv3 without lockd.
package claim

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"voxpipe/internal/regular"

	"github.com/gofrs/flock"
)

// Sentinel errors.
var (
	// ErrBusy: the volume is claimed by a live process (a *BusyError says which).
	ErrBusy = errors.New("claim: volume claimed by another live process")
	// ErrLost: a claim was taken over by another process (this one was presumed dead).
	ErrLost = errors.New("claim: claim taken over by another process")
)

// Defaults of Options.
const (
	DefaultTimeout = 2 * time.Minute
	// LockName is the lock file, at the output folder's root, that takeovers and releases hold.
	LockName = ".voxpipe.lock"
)

// Holder identifies the process holding a claim: the claim file's content (JSON).
type Holder struct {
	Host     string    `json:"host"`
	BootID   string    `json:"boot_id,omitempty"`
	PID      int       `json:"pid"`
	PIDStart uint64    `json:"pid_start,omitempty"` // process start, clock ticks since boot (/proc/PID/stat)
	RunID    string    `json:"run_id"`
	Token    string    `json:"token"` // random, unique per claim
	Started  time.Time `json:"started"`
}

func (h Holder) String() string {
	return fmt.Sprintf("%s pid %d (run %s)", h.Host, h.PID, h.RunID)
}

// BusyError says who holds a claim.
type BusyError struct {
	Path      string
	Holder    Holder
	Heartbeat time.Time
}

func (e *BusyError) Error() string {
	return fmt.Sprintf("claimed by %s, heartbeat %s ago", e.Holder, time.Since(e.Heartbeat).Round(time.Second))
}

func (e *BusyError) Is(target error) bool { return target == ErrBusy }

// Options configures a Manager.
type Options struct {
	RunID string
	// Timeout: a claim of another host whose heartbeat is older is presumed dead (default
	// DefaultTimeout). Heartbeat: how often held claims are refreshed (default Timeout/8).
	Timeout   time.Duration
	Heartbeat time.Duration
}

// Manager claims volumes for one process.
type Manager struct {
	lock *flock.Flock
	self Holder
	// hostKey identifies this host and boot in the names of temporary claim files, so that
	// one left empty by a process killed before it wrote it can still be judged.
	hostKey   string
	timeout   time.Duration
	heartbeat time.Duration
	now       func() time.Time // tests

	mu   sync.Mutex
	held map[*Claim]struct{}
}

// NewManager prepares claims under root (the output folder, which must exist).
func NewManager(root string, opt Options) (*Manager, error) {
	if opt.Timeout <= 0 {
		opt.Timeout = DefaultTimeout
	}
	if opt.Heartbeat <= 0 {
		opt.Heartbeat = opt.Timeout / 8
	}
	if opt.Heartbeat >= opt.Timeout {
		return nil, fmt.Errorf("claim: heartbeat %v must be shorter than the timeout %v", opt.Heartbeat, opt.Timeout)
	}
	host, err := os.Hostname()
	if err != nil {
		return nil, fmt.Errorf("claim: host name: %w", err)
	}
	self := Holder{Host: host, BootID: bootID(), PID: os.Getpid(), RunID: opt.RunID}
	self.PIDStart, _ = processStart(self.PID)
	key := sha256.Sum256([]byte(self.Host + "\n" + self.BootID))
	return &Manager{
		lock: flock.New(filepath.Join(root, LockName)), self: self, hostKey: hex.EncodeToString(key[:6]),
		timeout: opt.Timeout, heartbeat: opt.Heartbeat, now: time.Now,
		held: map[*Claim]struct{}{},
	}, nil
}

// Self is the holder this manager writes into its claims (without a token).
func (m *Manager) Self() Holder { return m.self }

// Path is the claim file of the mask at mask.
func Path(mask string) string {
	return filepath.Join(filepath.Dir(mask), "."+filepath.Base(mask)+".claim")
}

// Claim is a claim this process holds.
type Claim struct {
	m      *Manager
	mask   string
	path   string
	holder Holder
	// TookOver is the dead holder whose claim this one replaced, or nil.
	TookOver *Holder

	lostOnce sync.Once
	lost     chan struct{}
}

// Lost is closed when a heartbeat finds that the claim is no longer this process's.
func (c *Claim) Lost() <-chan struct{} { return c.lost }

// Path is the claim file.
func (c *Claim) Path() string { return c.path }

// Mask is the mask path the claim is for.
func (c *Claim) Mask() string { return c.mask }

// Acquire claims the volume whose mask is at mask. It fails with a *BusyError (ErrBusy) when
// a live process holds it; a dead holder's claim is taken over (Claim.TookOver).
func (m *Manager) Acquire(mask string) (*Claim, error) {
	path := Path(mask)
	h := m.self
	h.Token = newToken()
	h.Started = m.now().UTC()
	content, err := json.Marshal(h)
	if err != nil {
		return nil, err
	}
	tmp := fmt.Sprintf("%s.%s-%d-%d-%s.tmp", path, m.hostKey, h.PID, h.PIDStart, h.Token)
	defer os.Remove(tmp) // also when writing it failed part way (a full disk)
	if err := os.WriteFile(tmp, append(content, '\n'), 0o644); err != nil {
		return nil, fmt.Errorf("claim %s: %w", mask, err)
	}
	c := &Claim{m: m, mask: mask, path: path, holder: h, lost: make(chan struct{})}
	if err := linkOnce(tmp, path); err == nil {
		m.add(c)
		return c, nil
	} else if !errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("claim %s: %w", mask, err)
	}

	// Someone holds or held it: take it over if they are dead, under the lock so that the
	// claim removed is the one judged dead.
	var taken *Holder
	err = m.locked(func() error {
		old, mtime, err := m.read(path)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			// released meanwhile: claim it like a fresh one
		case err != nil:
			return err
		default:
			if m.alive(old, mtime) {
				return &BusyError{Path: path, Holder: old, Heartbeat: mtime}
			}
			if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
			taken = &old
		}
		return linkOnce(tmp, path)
	})
	if errors.Is(err, fs.ErrExist) {
		// A fresh claim (made without the lock) won the race; report its holder.
		old, mtime, rerr := m.read(path)
		if rerr != nil {
			return nil, fmt.Errorf("claim %s: %w", mask, ErrBusy)
		}
		return nil, &BusyError{Path: path, Holder: old, Heartbeat: mtime}
	}
	var busy *BusyError
	if errors.As(err, &busy) {
		return nil, err
	}
	if err != nil {
		return nil, fmt.Errorf("claim %s: %w", mask, err)
	}
	c.TookOver = taken
	m.add(c)
	return c, nil
}

// Check returns nil while the claim is still this process's, ErrLost once another process
// has taken it over (or removed it).
func (c *Claim) Check() error {
	h, _, err := c.m.read(c.path)
	if errors.Is(err, fs.ErrNotExist) || (err == nil && h.Token != c.holder.Token) {
		c.markLost()
		return fmt.Errorf("%s: %w", c.path, ErrLost)
	}
	return err
}

// Release removes the claim if it is still this process's. Releasing twice is harmless.
func (c *Claim) Release() error {
	if !c.m.remove(c) {
		return nil
	}
	return c.m.locked(func() error {
		h, _, err := c.m.read(c.path)
		if err != nil || h.Token != c.holder.Token {
			return nil // taken over: not ours to remove
		}
		return os.Remove(c.path)
	})
}

// Held lists the claims this manager holds.
func (m *Manager) Held() []*Claim {
	m.mu.Lock()
	defer m.mu.Unlock()
	all := make([]*Claim, 0, len(m.held))
	for c := range m.held {
		all = append(all, c)
	}
	return all
}

// ReleaseAll releases every claim still held.
func (m *Manager) ReleaseAll() error {
	var errs []error
	for _, c := range m.Held() {
		errs = append(errs, c.Release())
	}
	return errors.Join(errs...)
}

// Heartbeat refreshes every held claim every Options.Heartbeat until stop is closed, and
// marks lost the claims that are no longer this process's.
func (m *Manager) Heartbeat(stop <-chan struct{}) {
	t := time.NewTicker(m.heartbeat)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		for _, c := range m.Held() {
			if c.Check() == nil {
				now := m.now()
				os.Chtimes(c.path, now, now)
			}
		}
	}
}

// RemoveStaleTemps removes the temporary claim files
// (".<mask>.claim.<hostkey>-<pid>-<start>-<token>.tmp") that processes left when they died
// between creating and removing them: those whose holder is dead by the rules of Acquire,
// judged by their content, or by their name when they died before writing it. It returns the
// paths removed.
func (c *Claim) RemoveStaleTemps() []string {
	dir, base := filepath.Split(c.path)
	entries, _ := os.ReadDir(dir)
	var removed []string
	for _, e := range entries {
		name := e.Name()
		if !strings.HasPrefix(name, base+".") || !strings.HasSuffix(name, ".tmp") {
			continue
		}
		tmp := filepath.Join(dir, name)
		h, mtime, err := c.m.read(tmp)
		if err != nil {
			continue
		}
		if h.Host == "" {
			h = c.m.holderFromTempName(strings.TrimSuffix(strings.TrimPrefix(name, base+"."), ".tmp"))
		}
		if h.Token == c.holder.Token || c.m.alive(h, mtime) {
			continue
		}
		if os.Remove(tmp) == nil {
			removed = append(removed, tmp)
		}
	}
	return removed
}

// holderFromTempName reads "<hostkey>-<pid>-<start>-<token>": a holder on this host when the
// key is this host's, else nobody known (judged by age).
func (m *Manager) holderFromTempName(s string) Holder {
	parts := strings.Split(s, "-")
	if len(parts) != 4 || parts[0] != m.hostKey {
		return Holder{}
	}
	pid, err1 := strconv.Atoi(parts[1])
	start, err2 := strconv.ParseUint(parts[2], 10, 64)
	if err1 != nil || err2 != nil {
		return Holder{}
	}
	return Holder{Host: m.self.Host, BootID: m.self.BootID, PID: pid, PIDStart: start, Token: parts[3]}
}

func (c *Claim) markLost() { c.lostOnce.Do(func() { close(c.lost) }) }

func (m *Manager) add(c *Claim) {
	m.mu.Lock()
	m.held[c] = struct{}{}
	m.mu.Unlock()
}

// remove forgets c, reporting whether it was held.
func (m *Manager) remove(c *Claim) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.held[c]
	delete(m.held, c)
	return ok
}

// locked runs f holding the lock file's exclusive lock.
func (m *Manager) locked(f func() error) error {
	if err := m.lock.Lock(); err != nil {
		return fmt.Errorf("claim: lock %s: %w", m.lock.Path(), err)
	}
	defer m.lock.Unlock()
	return f()
}

// read returns the holder of the claim at path and its heartbeat. A claim that cannot be
// parsed (not one of ours, or damaged) is returned with an empty holder: it is judged by its
// mtime alone.
func (m *Manager) read(path string) (Holder, time.Time, error) {
	f, st, err := regular.Open(path) // a FIFO there must not block the run
	if errors.Is(err, regular.ErrNotRegular) {
		if st, err := os.Lstat(path); err == nil {
			return Holder{}, st.ModTime(), nil
		}
	}
	if err != nil {
		return Holder{}, time.Time{}, err
	}
	defer f.Close()
	var b [4096]byte
	n, _ := f.Read(b[:])
	var h Holder
	if json.Unmarshal(bytes.TrimSpace(b[:n]), &h) != nil {
		h = Holder{}
	}
	return h, st.ModTime(), nil
}

// alive judges whether the holder of a claim with heartbeat mtime still runs.
func (m *Manager) alive(h Holder, mtime time.Time) bool {
	sameHost := h.Host != "" && h.Host == m.self.Host && h.BootID == m.self.BootID
	if !sameHost || h.PID <= 0 {
		return m.now().Sub(mtime) < m.timeout
	}
	if h.PID == m.self.PID && h.PIDStart == m.self.PIDStart {
		return true // ours: another goroutine of this process (not reached: masks are unique)
	}
	start, err := processStart(h.PID)
	if err != nil {
		return processExists(h.PID) && h.PIDStart == 0
	}
	return h.PIDStart == 0 || start == h.PIDStart
}

// linkOnce links tmp to path, atomically failing with fs.ErrExist when path exists.
func linkOnce(tmp, path string) error {
	err := os.Link(tmp, path)
	if err == nil || errors.Is(err, fs.ErrExist) {
		return err
	}
	// NFS: the link may have been made although the reply was lost.
	var st syscall.Stat_t
	if syscall.Stat(tmp, &st) == nil && st.Nlink == 2 {
		return nil
	}
	return err
}

func newToken() string {
	var b [12]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// bootID identifies the current boot of this host (Linux), so that a claim left before a
// reboot is not judged by a pid that may have been reused since.
func bootID() string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// processStart is the start time of process pid, in clock ticks since boot (field 22 of
// /proc/PID/stat), which tells a pid reused by a new process from the one that made a claim.
func processStart(pid int) (uint64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	// The command name (field 2) may hold spaces and parentheses: fields follow the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, errors.New("claim: unexpected /proc stat format")
	}
	fields := strings.Fields(string(b[i+1:]))
	const startField = 22 - 3 // fields after ')' start at field 3
	if len(fields) <= startField {
		return 0, errors.New("claim: unexpected /proc stat format")
	}
	return strconv.ParseUint(fields[startField], 10, 64)
}

// processExists reports whether pid names a process (where /proc is not available).
func processExists(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
