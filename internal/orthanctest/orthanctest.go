package orthanctest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"voxpipe/internal/testexec"
)

// PluginPath is where Debian's orthanc-dicomweb puts the DICOMweb plugin.
const PluginPath = "/usr/share/orthanc/plugins/libOrthancDicomWeb.so"

// Defaults of Options.
const (
	DefaultUser      = "voxpipe"
	DefaultPassword  = "secret"
	DefaultStableAge = 1
	DefaultAET       = "VOXTEST"
)

const (
	readyWithin = 30 * time.Second // from the start of the process to GET /system answering
	killAfter   = 15 * time.Second // from SIGTERM to SIGKILL
	lifetime    = time.Hour        // bound on the process where the test has no deadline
	portTries   = 5                // starts on fresh ports when one was taken meanwhile
)

// Options configure the Orthanc of a test. The zero value is a server with Basic
// authentication (voxpipe/secret), StableAge 1 s, and OverwriteInstances false.
type Options struct {
	// User and Password are the one registered user; empty, DefaultUser and DefaultPassword.
	User, Password string
	// NoAuth turns Orthanc's authentication off (User and Password are then ignored).
	NoAuth bool
	// StableAge is how many seconds a series goes without a new instance before Orthanc
	// marks it stable (StableSeries); 0 means DefaultStableAge.
	StableAge int
	// Overwrite is Orthanc's OverwriteInstances: an instance stored again replaces the one
	// stored (and counts as a new instance) rather than being ignored.
	Overwrite bool
}

// Server is a running Orthanc. Its fields are for the code under test: where to connect, and
// with which credentials.
type Server struct {
	URL            string // http://127.0.0.1:PORT, Orthanc's REST API
	DICOMweb       string // URL + "/dicom-web", the root of QIDO-RS, WADO-RS and STOW-RS
	DicomPort      int    // DIMSE (C-STORE, C-ECHO) on 127.0.0.1
	AET            string // Orthanc's application entity title
	User, Password string // HTTP Basic credentials; empty where authentication is off
	Dir            string // the server's folder: orthanc.json, orthanc.log, db/

	bin       string
	name      string // Orthanc's Name, which /system tells: unique to this server
	stableAge int
	client    *http.Client

	mu      sync.Mutex
	proc    *process // nil once stopped
	stopErr error    // what the last Stop returned
}

// process is one run of Orthanc.
type process struct {
	cmd  *exec.Cmd
	pid  int
	done chan struct{} // closed once Wait returned
	err  error         // Wait's result, set before done is closed
}

// errPortInUse is an Orthanc that exited because one of its ports was taken.
var errPortInUse = errors.New("orthanctest: a port of Orthanc is already in use")

// Start starts an Orthanc for the test and returns it once it answers. It is stopped when the
// test ends (t.Cleanup), or earlier by Stop. Where Orthanc or its DICOMweb plugin is not
// installed the test skips, or fails where VOXPIPE_REQUIRE_TOOLS=1.
func Start(t testing.TB, o Options) *Server {
	t.Helper()
	bin := orthancPath(t)
	if _, err := os.Stat(PluginPath); err != nil {
		missing(t, fmt.Sprintf("the DICOMweb plugin of Orthanc (%s) is not installed (Debian: orthanc-dicomweb)", PluginPath))
	}
	s := &Server{AET: DefaultAET, Dir: t.TempDir(), bin: bin, stableAge: o.StableAge,
		name: fmt.Sprintf("voxpipe-test-%016x", rand.Uint64())}
	if s.stableAge <= 0 {
		s.stableAge = DefaultStableAge
	}
	if !o.NoAuth {
		s.User, s.Password = o.User, o.Password
		if s.User == "" {
			s.User = DefaultUser
		}
		if s.Password == "" {
			s.Password = DefaultPassword
		}
	}
	s.client = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 4}}
	if err := os.Mkdir(filepath.Join(s.Dir, "db"), 0o755); err != nil {
		t.Fatal(err)
	}
	for try := 1; ; try++ {
		httpPort, dicomPort, err := freePorts()
		if err != nil {
			t.Fatal(err)
		}
		if err := s.configure(httpPort, dicomPort, o); err != nil {
			t.Fatal(err)
		}
		err = s.launch(t)
		if err == nil {
			return s
		}
		if !errors.Is(err, errPortInUse) || try == portTries {
			t.Fatal(err)
		}
		t.Logf("orthanctest: %v, trying other ports", err)
	}
}

// Restart starts Orthanc again after Stop, on the same ports and storage (what was stored is
// still there): a server that comes back. t must live as long as the server (the test of
// Start or a subtest that outlives its use). It fails the test where a port was taken
// meanwhile.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	s.mu.Lock()
	running := s.proc != nil
	s.mu.Unlock()
	if running {
		t.Fatal("orthanctest: Restart of a running Orthanc: Stop it first")
	}
	if err := s.launch(t); err != nil {
		t.Fatal(err)
	}
}

func orthancPath(t testing.TB) string {
	t.Helper()
	if p, err := exec.LookPath("Orthanc"); err == nil {
		return p
	}
	const debian = "/usr/sbin/Orthanc" // not on every PATH
	if _, err := os.Stat(debian); err == nil {
		return debian
	}
	return testexec.Tool(t, "Orthanc", "orthanc")
}

// missing skips the test, or fails it where VOXPIPE_REQUIRE_TOOLS=1, as testexec.Tool does.
func missing(t testing.TB, msg string) {
	t.Helper()
	if os.Getenv(testexec.RequireToolsEnv) == "1" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

// freePorts returns two distinct ports free on 127.0.0.1 just now.
func freePorts() (int, int, error) {
	var ports [2]int
	for i := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, 0, fmt.Errorf("orthanctest: no free port: %w", err)
		}
		defer l.Close() // held until both are picked, so that they differ
		ports[i] = l.Addr().(*net.TCPAddr).Port
	}
	return ports[0], ports[1], nil
}

// configure writes Dir/orthanc.json for the ports and sets the URLs.
func (s *Server) configure(httpPort, dicomPort int, o Options) error {
	users := map[string]string{}
	if s.User != "" {
		users[s.User] = s.Password
	}
	cfg := map[string]any{
		"Name":     s.name,
		"HttpPort": httpPort, "DicomPort": dicomPort, "DicomAet": s.AET,
		"StorageDirectory": filepath.Join(s.Dir, "db"), "IndexDirectory": filepath.Join(s.Dir, "db"),
		"RemoteAccessAllowed":   false,
		"AuthenticationEnabled": s.User != "", "RegisteredUsers": users,
		"StableAge": s.stableAge, "OverwriteInstances": o.Overwrite, "SaveJobs": false,
		"OrthancExplorerEnabled": false, "WebDavEnabled": false,
		"Plugins":  []string{PluginPath},
		"DicomWeb": map[string]any{"Enable": true, "Root": "/dicom-web/"},
	}
	b, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(s.Dir, "orthanc.json"), b, 0o644); err != nil {
		return fmt.Errorf("orthanctest: %w", err)
	}
	s.URL = "http://127.0.0.1:" + strconv.Itoa(httpPort)
	s.DICOMweb = s.URL + "/dicom-web"
	s.DicomPort = dicomPort
	return nil
}

// launch starts Orthanc on the configuration written and waits until it answers. On an error
// nothing of it is left running.
func (s *Server) launch(t testing.TB) error {
	t.Helper()
	logf, err := os.OpenFile(s.logPath(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("orthanctest: %w", err)
	}
	defer logf.Close() // the child has its own copy
	cmd := testexec.CmdWithin(t, lifetime, s.bin, filepath.Join(s.Dir, "orthanc.json"))
	// Registered after CmdWithin's own cleanup, so run before it: Orthanc is stopped (SIGTERM)
	// before the command's context ends (which kills it).
	t.Cleanup(func() {
		if did, err := s.stop(); did && err != nil {
			t.Error(err)
		}
	})
	cmd.Dir = s.Dir
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// At the deadline the whole group goes, not only its leader.
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("orthanctest: starting %s: %w", s.bin, err)
	}
	p := &process{cmd: cmd, pid: cmd.Process.Pid, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	s.mu.Lock()
	s.proc, s.stopErr = p, nil
	s.mu.Unlock()
	if err := s.waitReady(p); err != nil {
		s.mu.Lock()
		s.proc = nil
		s.mu.Unlock()
		select {
		case <-p.done: // waitReady's error tells why; stop only checks the group
			_ = p.stop()
		default:
			err = errors.Join(err, p.stop())
		}
		return err
	}
	return nil
}

// waitReady polls GET /system until this Orthanc answers it, the process ends, or readyWithin
// passes. A request is cut short when the process ends: whatever holds a port that Orthanc
// could not bind may accept connections and never answer.
func (s *Server) waitReady(p *process) error {
	ctx, cancel := context.WithTimeout(context.Background(), readyWithin)
	defer cancel()
	go func() {
		select {
		case <-p.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		last := s.ready(ctx)
		if last == nil {
			return nil
		}
		select {
		case <-tick.C:
			continue
		case <-ctx.Done():
		}
		select {
		case <-p.done:
			tail := s.LogTail(20)
			if strings.Contains(tail, "already in use") {
				return fmt.Errorf("%w (%s): %v\n%s", errPortInUse, s.URL, p.err, tail)
			}
			return fmt.Errorf("orthanctest: Orthanc exited before it answered (%v); its log ends:\n%s", p.err, tail)
		default:
			return fmt.Errorf("orthanctest: Orthanc did not answer GET %s/system within %v (last: %v); its log ends:\n%s",
				s.URL, readyWithin, last, s.LogTail(20))
		}
	}
}

// ready asks GET /system once, and checks that the answer comes from this Orthanc (its own
// name and DICOM port), not another one that holds the port it could not bind.
func (s *Server) ready(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	code, b, err := s.do(ctx, http.MethodGet, "/system", nil, "")
	if err != nil {
		return err
	}
	if code != http.StatusOK {
		return fmt.Errorf("status %d", code)
	}
	var sys struct {
		Name      string
		DicomPort int
	}
	if err := json.Unmarshal(b, &sys); err != nil {
		return err
	}
	if sys.Name != s.name || sys.DicomPort != s.DicomPort {
		return fmt.Errorf("another server answers: %s on DICOM port %d", sys.Name, sys.DicomPort)
	}
	return nil
}

// Stop stops Orthanc: SIGTERM to its process group, SIGKILL after 15 s, and it checks that
// nothing of the group is left. It returns an error where Orthanc had to be killed, had
// exited before on its own (a crash: the error has its log's tail), or left a process behind.
// Calling it again returns the same result; the test's cleanup calls it too.
func (s *Server) Stop() error {
	_, err := s.stop()
	return err
}

// stop is Stop, and tells whether this call stopped a process (rather than returning what an
// earlier call did).
func (s *Server) stop() (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.proc
	if p == nil {
		return false, s.stopErr
	}
	s.proc = nil
	s.stopErr = p.stop()
	if s.stopErr != nil {
		s.stopErr = fmt.Errorf("%w; Orthanc's log ends:\n%s", s.stopErr, s.LogTail(10))
	}
	s.client.CloseIdleConnections()
	return true, s.stopErr
}

// stop ends the process where it still runs (SIGTERM to its group, SIGKILL after killAfter),
// and checks that the group is empty. The error tells an Orthanc that had exited already (a
// crash), that ended badly on SIGTERM or had to be killed, or that left a process behind.
func (p *process) stop() error {
	var err error
	select {
	case <-p.done:
		err = fmt.Errorf("orthanctest: Orthanc (pid %d) had exited before Stop: %v", p.pid, p.err)
	default:
		_ = syscall.Kill(-p.pid, syscall.SIGTERM)
		timer := time.NewTimer(killAfter)
		select {
		case <-p.done:
			timer.Stop()
			if p.err != nil {
				err = fmt.Errorf("orthanctest: Orthanc (pid %d) ended badly on SIGTERM: %v", p.pid, p.err)
			}
		case <-timer.C:
			_ = syscall.Kill(-p.pid, syscall.SIGKILL)
			<-p.done
			err = fmt.Errorf("orthanctest: Orthanc (pid %d) did not exit within %v of SIGTERM: killed", p.pid, killAfter)
		}
	}
	// Orthanc is reaped; its group must be empty too.
	if e := syscall.Kill(-p.pid, 0); !errors.Is(e, syscall.ESRCH) {
		_ = syscall.Kill(-p.pid, syscall.SIGKILL)
		err = errors.Join(err, fmt.Errorf("orthanctest: processes of Orthanc's group %d were left running (killed)", p.pid))
	}
	return err
}

// PID is the process ID of the running Orthanc, 0 once stopped.
func (s *Server) PID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return 0
	}
	return s.proc.pid
}

func (s *Server) logPath() string { return filepath.Join(s.Dir, "orthanc.log") }

// LogTail returns the last n lines of Orthanc's log (its standard output and error), for a
// test's failure message.
func (s *Server) LogTail(n int) string {
	b, err := os.ReadFile(s.logPath())
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
