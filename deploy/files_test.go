package deploy

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

const sbatchScript = "slurm/voxpipe-array.sbatch"

// checkSbatch reports what is wrong with the array script: sbatch reads #SBATCH lines only
// up to the first command, the array must be declared there, and the voxpipe run it starts
// must take its shard from the array (--shard auto).
func checkSbatch(script string) error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	lines := strings.Split(script, "\n")
	if !strings.HasPrefix(lines[0], "#!") {
		bad("the first line is not a #! line")
	}
	header, array := true, false
	runs := 0
	for i, line := range lines[1:] {
		trimmed := strings.TrimSpace(line)
		if header && trimmed != "" && !strings.HasPrefix(trimmed, "#") {
			header = false
		}
		if strings.HasPrefix(trimmed, "#SBATCH") {
			if !header {
				bad("line %d: %q comes after the first command: sbatch ignores it", i+2, trimmed)
			}
			if regexp.MustCompile(`^#SBATCH\s+(--array[= ]\S+|-a\s*\S+)`).MatchString(trimmed) {
				array = true
			}
			continue
		}
		if strings.HasPrefix(trimmed, "#") {
			continue
		}
		if regexp.MustCompile(`\brun\b.*--shard auto\b`).MatchString(trimmed) && strings.Contains(trimmed, "VOXPIPE") {
			runs++
		}
	}
	if !array {
		bad("no #SBATCH --array line before the first command")
	}
	if runs != 1 {
		bad("%d commands run \"$VOXPIPE\" run ... --shard auto, want 1", runs)
	}
	if !strings.Contains(script, `--run-id "$run_id"`) || !strings.Contains(script, `run_id="slurm-${SLURM_ARRAY_JOB_ID}-${SLURM_ARRAY_TASK_ID}"`) {
		bad("the run id is not slurm-${SLURM_ARRAY_JOB_ID}-${SLURM_ARRAY_TASK_ID}")
	}
	return errors.Join(errs...)
}

func TestSbatchScript(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(sbatchScript)
	if err != nil {
		t.Fatal(err)
	}
	if err := checkSbatch(string(b)); err != nil {
		t.Errorf("%s:\n%v", sbatchScript, err)
	}
	good := string(b)
	for _, tc := range []struct{ old, new string }{
		{"#SBATCH --array=0-3\n", ""},
		{"#SBATCH --array=0-3\n", "#SBATCH --arrays=0-3\n"},
		{`--shard auto --run-id "$run_id"`, `--shard 0/4 --run-id "$run_id"`},
		{"#SBATCH --job-name=voxpipe\n", "#SBATCH --job-name=voxpipe\nset -e\n"},
		{`--run-id "$run_id"`, `--run-id "$RANDOM"`},
	} {
		if strings.Count(good, tc.old) != 1 {
			t.Fatalf("%q is not in %s exactly once: update this case", tc.old, sbatchScript)
		}
		if checkSbatch(strings.Replace(good, tc.old, tc.new, 1)) == nil {
			t.Errorf("replacing %q by %q went unnoticed", tc.old, tc.new)
		}
	}
}

// unit is a systemd unit file's settings, by "Section.Key" (repeated keys in order).
type unit map[string][]string

func parseUnit(text string) unit {
	u := unit{}
	section := ""
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";"):
		case strings.HasPrefix(line, "["):
			section = strings.Trim(line, "[]")
		default:
			k, v, _ := strings.Cut(line, "=")
			u[section+"."+k] = append(u[section+"."+k], v)
		}
	}
	return u
}

func (u unit) get(key string) string {
	v := u[key]
	if len(v) == 0 {
		return ""
	}
	return v[len(v)-1]
}

// checkService: ExecStart runs voxpipe's subcommand sub ("watch", "pacs watch").
func checkService(u unit, sub string) error {
	var errs []error
	exec := u["Service.ExecStart"]
	if len(exec) != 1 {
		return fmt.Errorf("want one ExecStart, got %d", len(exec))
	}
	f, words := strings.Fields(exec[0]), strings.Fields(sub)
	if len(f) < 1+len(words) || filepath.Base(f[0]) != "voxpipe" || !filepath.IsAbs(f[0]) || strings.Join(f[1:1+len(words)], " ") != sub {
		errs = append(errs, fmt.Errorf("ExecStart %q does not run /.../voxpipe %s", exec[0], sub))
	}
	if !strings.Contains(exec[0], " -o ") {
		errs = append(errs, fmt.Errorf("ExecStart %q has no -o OUT", exec[0]))
	}
	return errors.Join(errs...)
}

// checkWatch: the watch service as its notifications and --grace need it.
func checkWatch(u unit) error { return checkNotify(u, "watch") }

// checkNotify: a service running voxpipe's sub, which notifies systemd and stops within --grace.
func checkNotify(u unit, sub string) error {
	errs := []error{checkService(u, sub)}
	if u.get("Service.Type") != "notify" {
		errs = append(errs, fmt.Errorf("Type=%s, want notify (voxpipe %s sends READY=1)", u.get("Service.Type"), sub))
	}
	if u.get("Service.WatchdogSec") == "" {
		errs = append(errs, errors.New("no WatchdogSec"))
	}
	grace := 30 * time.Second // voxpipe watch's default --grace (pacs watch: the same, or set it)
	if m := regexp.MustCompile(`--grace[= ](\S+)`).FindStringSubmatch(u.get("Service.ExecStart")); m != nil {
		d, err := time.ParseDuration(m[1])
		if err != nil {
			errs = append(errs, fmt.Errorf("--grace %q: %v", m[1], err))
		}
		grace = d
	}
	stop, err := time.ParseDuration(u.get("Service.TimeoutStopSec"))
	if err != nil || stop <= grace {
		errs = append(errs, fmt.Errorf("TimeoutStopSec=%s must be a duration longer than --grace (%v)", u.get("Service.TimeoutStopSec"), grace))
	}
	return errors.Join(errs...)
}

// flagValue returns the value of ExecStart's flag (--name VALUE or --name=VALUE), "" without it.
func flagValue(exec, flag string) string {
	m := regexp.MustCompile(`(?:^|\s)` + regexp.QuoteMeta(flag) + `[= ](\S+)`).FindStringSubmatch(exec)
	if m == nil {
		return ""
	}
	return m[1]
}

// checkPACS: the pacs watch service, its secret a systemd credential, its network open and its
// work folder writable under ProtectSystem=strict.
func checkPACS(u unit) error {
	errs := []error{checkNotify(u, "pacs watch")}
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	exec := u.get("Service.ExecStart")
	if url := flagValue(exec, "--url"); !strings.HasPrefix(url, "http://") && !strings.HasPrefix(url, "https://") {
		bad("ExecStart: --url %q is no http(s) URL", url)
	}
	for _, f := range []string{"--interval", "--metrics-addr"} {
		if flagValue(exec, f) == "" {
			bad("ExecStart has no %s", f)
		}
	}
	if strings.Contains(exec, "--password ") || strings.Contains(exec, "--password=") {
		bad("ExecStart has a password on the command line (ps shows it)")
	}
	for _, e := range u["Service.Environment"] {
		if strings.Contains(e, "VOXPIPE_PACS_PASSWORD") {
			bad("Environment=%s: a password in the unit file, which every user may read", e)
		}
	}
	// The secret file: a credential that systemd copies under %d, loaded by that name.
	creds := map[string]bool{}
	for _, c := range u["Service.LoadCredential"] {
		name, _, _ := strings.Cut(c, ":")
		creds[name] = true
	}
	secrets := 0
	for _, f := range []string{"--password-file", "--token-file"} {
		v := flagValue(exec, f)
		if v == "" {
			continue
		}
		secrets++
		name, ok := strings.CutPrefix(v, "%d/")
		if !ok || !creds[name] {
			bad("%s %s is not %%d/NAME with a LoadCredential=NAME:...", f, v)
		}
	}
	if secrets != 1 || (flagValue(exec, "--password-file") != "") != (flagValue(exec, "--user") != "") {
		bad("ExecStart: want --user with --password-file, or --token-file")
	}
	families := " " + u.get("Service.RestrictAddressFamilies") + " "
	if !strings.Contains(families, " AF_INET ") || !strings.Contains(families, " AF_INET6 ") {
		bad("RestrictAddressFamilies=%s: the PACS needs AF_INET and AF_INET6", u.get("Service.RestrictAddressFamilies"))
	}
	if !strings.Contains(strings.Join(u["Unit.After"], " "), "network-online.target") {
		bad("not After=network-online.target")
	}
	out := flagValue(exec, "-o")
	writable := slices.Contains(strings.Fields(strings.Join(u["Service.ReadWritePaths"], " ")), out)
	for _, d := range strings.Fields(u.get("Service.StateDirectory")) {
		writable = writable || "/var/lib/"+d == out
	}
	if out == "" || !writable {
		bad("-o %q is neither a StateDirectory= under /var/lib nor in ReadWritePaths=", out)
	}
	return errors.Join(errs...)
}

// checkBatch: the oneshot run, and the timer that starts it.
func checkBatch(service, timer unit) error {
	errs := []error{checkService(service, "run")}
	if service.get("Service.Type") != "oneshot" {
		errs = append(errs, fmt.Errorf("Type=%s, want oneshot", service.get("Service.Type")))
	}
	for _, s := range strings.Fields(strings.Join(service["Service.SuccessExitStatus"], " ")) {
		if s == "1" || s == "2" {
			errs = append(errs, fmt.Errorf("SuccessExitStatus has %s: a failed volume or a usage error would look like success", s))
		}
	}
	if u := timer.get("Timer.Unit"); u != "" && u != "voxpipe-batch.service" {
		errs = append(errs, fmt.Errorf("the timer starts %s, not voxpipe-batch.service", u))
	}
	if timer.get("Timer.OnCalendar") == "" {
		errs = append(errs, errors.New("the timer has no OnCalendar"))
	}
	if timer.get("Install.WantedBy") != "timers.target" {
		errs = append(errs, errors.New("the timer is not WantedBy=timers.target"))
	}
	return errors.Join(errs...)
}

func TestSystemdUnits(t *testing.T) {
	t.Parallel()
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join("systemd", name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	watch, service, timer := read("voxpipe-watch.service"), read("voxpipe-batch.service"), read("voxpipe-batch.timer")
	pacs := read("voxpipe-pacs.service")
	if err := checkWatch(parseUnit(watch)); err != nil {
		t.Errorf("voxpipe-watch.service:\n%v", err)
	}
	if err := checkPACS(parseUnit(pacs)); err != nil {
		t.Errorf("voxpipe-pacs.service:\n%v", err)
	}
	if err := checkBatch(parseUnit(service), parseUnit(timer)); err != nil {
		t.Errorf("voxpipe-batch.service/.timer:\n%v", err)
	}

	for _, tc := range []struct{ file, old, new string }{
		{"watch", "ExecStart=/usr/local/bin/voxpipe watch", "ExecStart=/usr/local/bin/voxpipe-watch"},
		{"watch", "Type=notify", "Type=simple"},
		{"watch", "TimeoutStopSec=45s", "TimeoutStopSec=20s"},
		{"watch", "--log-format json", "--grace 1m --log-format json"},
		{"batch", "ExecStart=/usr/local/bin/voxpipe run", "ExecStart=/usr/local/bin/voxpipe info"},
		{"batch", "SuccessExitStatus=130 143", "SuccessExitStatus=1 130 143"},
		{"timer", "Unit=voxpipe-batch.service", "Unit=voxpipe-watch.service"},
		{"pacs", "ExecStart=/usr/local/bin/voxpipe pacs watch", "ExecStart=/usr/local/bin/voxpipe pacs sync"},
		{"pacs", "Type=notify", "Type=exec"},
		{"pacs", "TimeoutStopSec=45s", "TimeoutStopSec=30s"},
		{"pacs", " --interval 2s", ""},
		{"pacs", " --metrics-addr 127.0.0.1:9465", ""},
		{"pacs", "--url http://", "--url 127.0.0.1:8042 http://"},
		{"pacs", "--password-file %d/pacs-password", "--password-file /etc/voxpipe/pacs-password"},
		{"pacs", "LoadCredential=pacs-password:", "LoadCredential=password:"},
		{"pacs", " --password-file %d/pacs-password", ""},
		{"pacs", "--password-file %d/pacs-password", "--password secret"},
		{"pacs", "\nLoadCredential=pacs-password:", "\nEnvironment=VOXPIPE_PACS_PASSWORD=secret\nLoadCredential=pacs-password:"},
		{"pacs", "RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6", "RestrictAddressFamilies=AF_UNIX"},
		{"pacs", "StateDirectory=voxpipe/pacs\n", "StateDirectory=voxpipe\n"},
		{"pacs", "After=network-online.target", "After=local-fs.target"},
	} {
		w, s, tm, p := watch, service, timer, pacs
		text := map[string]*string{"watch": &w, "batch": &s, "timer": &tm, "pacs": &p}[tc.file]
		if strings.Count(*text, tc.old) != 1 {
			t.Fatalf("%q is not in the %s unit exactly once: update this case", tc.old, tc.file)
		}
		*text = strings.Replace(*text, tc.old, tc.new, 1)
		if checkWatch(parseUnit(w)) == nil && checkBatch(parseUnit(s), parseUnit(tm)) == nil && checkPACS(parseUnit(p)) == nil {
			t.Errorf("%s: replacing %q by %q went unnoticed", tc.file, tc.old, tc.new)
		}
	}
}
