package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/walrelay/walrelay/bench/schedstat"
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/<pid>/stat: 100 on
// every Linux architecture Go supports.
const clockTicks = 100

// proc is a subprocess the harness started. Every proc is registered until it has
// exited, so that killAll can end what is left on any exit path.
type proc struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	started time.Time
	done    chan struct{} // closed once Wait returned
	err     error         // Wait's result, read after done
}

var live struct {
	sync.Mutex
	procs map[*proc]struct{}
}

// startProc starts path with args in its own process group (so a Ctrl-C at the
// terminal reaches only the harness, which then stops the children in order), with
// SIGKILL as the parent-death signal (so a harness killed outright does not leave
// them behind). stdout and stderr go to logPath; stdout may be taken instead.
func startProc(name, logPath string, stdout *os.File, path string, args ...string) (*proc, error) {
	return startProcWith(name, logPath, stdout, nil, path, args...)
}

// startProcWith is startProc with an environment (nil: the harness's).
func startProcWith(name, logPath string, stdout *os.File, env []string, path string, args ...string) (*proc, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open log of %s: %w", name, err)
	}
	defer logFile.Close() // the child holds its own descriptor
	cmd := exec.Command(path, args...)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if stdout != nil {
		cmd.Stdout = stdout
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	p := &proc{name: name, cmd: cmd, logPath: logPath, done: make(chan struct{})}
	live.Lock()
	defer live.Unlock()
	p.started = time.Now()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	if live.procs == nil {
		live.procs = map[*proc]struct{}{}
	}
	live.procs[p] = struct{}{}
	go func() {
		p.err = cmd.Wait()
		live.Lock()
		delete(live.procs, p)
		live.Unlock()
		close(p.done)
	}()
	return p, nil
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

// exited reports whether the process has ended.
func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop sends SIGTERM, waits up to grace, then kills the process group. It returns
// an error when the process did not exit cleanly on SIGTERM.
func (p *proc) stop(grace time.Duration) error {
	if p.exited() {
		return p.exitErr()
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return p.exitErr()
	case <-time.After(grace):
		_ = syscall.Kill(-p.pid(), syscall.SIGKILL)
		<-p.done
		return fmt.Errorf("%s did not stop within %s of SIGTERM; killed it (log: %s)", p.name, grace, p.logPath)
	}
}

func (p *proc) exitErr() error {
	if p.err != nil {
		return fmt.Errorf("%s: %w (log: %s)", p.name, p.err, p.logPath)
	}
	return nil
}

// rusage returns the child's resource usage once it has exited.
func (p *proc) rusage() *syscall.Rusage {
	if !p.exited() || p.cmd.ProcessState == nil {
		return nil
	}
	ru, _ := p.cmd.ProcessState.SysUsage().(*syscall.Rusage)
	return ru
}

// killAll ends every subprocess still running: SIGTERM to each group, then SIGKILL
// to whatever is left after grace.
func killAll(grace time.Duration) {
	live.Lock()
	procs := make([]*proc, 0, len(live.procs))
	for p := range live.procs {
		procs = append(procs, p)
	}
	live.Unlock()
	for _, p := range procs {
		_ = syscall.Kill(-p.pid(), syscall.SIGTERM)
	}
	deadline := time.After(grace)
	for _, p := range procs {
		select {
		case <-p.done:
		case <-deadline:
			_ = syscall.Kill(-p.pid(), syscall.SIGKILL)
			<-p.done
		}
	}
}

// cpuSeconds is the CPU time pid has used: the sum of its threads' run time in
// /proc/<pid>/task/*/schedstat, in nanoseconds, or utime+stime of /proc/<pid>/stat
// (10 ms units, so ±0.7 ms/s over 15 s) where schedstat is missing. The two are the
// same quantity, the kernel scales utime and stime to the run time; a thread that
// exited drops out of the sum, which a Go process or a PostgreSQL backend does not
// have.
func cpuSeconds(pid int) (float64, error) {
	if s, err := runSeconds(pid); err == nil {
		return s, nil
	}
	return statSeconds(pid)
}

func runSeconds(pid int) (float64, error) {
	d, err := schedstat.Run(strconv.Itoa(pid))
	return d.Seconds(), err
}

// statSeconds reads utime+stime of pid from /proc/<pid>/stat.
func statSeconds(pid int) (float64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) is in parentheses and may hold spaces.
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	f := strings.Fields(s[i+1:]) // f[0] is field 3 (state)
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: too few fields", pid)
	}
	utime, err1 := strconv.ParseUint(f[11], 10, 64) // field 14
	stime, err2 := strconv.ParseUint(f[12], 10, 64) // field 15
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	return float64(utime+stime) / clockTicks, nil
}

// statusKB reads a "Name: N kB" line (VmHWM, VmRSS) from /proc/<pid>/status.
func statusKB(pid int, name string) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), name+":"); ok {
			return strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
		}
	}
	return 0, fmt.Errorf("/proc/%d/status: no %s", pid, name)
}

// machineCPU is a reading of the first line of /proc/stat: busy and total jiffies
// over all cores.
type machineCPU struct{ busy, total uint64 }

func readMachineCPU() machineCPU {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return machineCPU{}
	}
	line, _, _ := strings.Cut(string(data), "\n")
	f := strings.Fields(line)
	var m machineCPU
	for i, v := range f[1:] {
		n, _ := strconv.ParseUint(v, 10, 64)
		if i >= 8 { // guest and guest_nice are already counted in user and nice
			break
		}
		m.total += n
		if i != 3 && i != 4 { // idle, iowait
			m.busy += n
		}
	}
	return m
}

// busySince returns the share of all cores' time that was busy since m (0..1).
func (m machineCPU) busySince() float64 {
	now := readMachineCPU()
	if now.total <= m.total {
		return 0
	}
	return float64(now.busy-m.busy) / float64(now.total-m.total)
}

// busyCPUSince returns the CPU seconds all cores spent busy since m.
func (m machineCPU) busyCPUSince() float64 {
	now := readMachineCPU()
	if now.busy <= m.busy {
		return 0
	}
	return float64(now.busy-m.busy) / clockTicks
}

// tailFile returns the last n lines of a file, for error messages.
func tailFile(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// treeCPU returns the CPU seconds used so far by a process and all its
// descendants: live ones from their /proc/<pid>/stat, exited ones through the
// cutime and cstime of whoever reaped them. For the postmaster that is the whole
// server: backends, walsenders, autovacuum, checkpointer.
func treeCPU(root int) float64 {
	children := map[int][]int{}
	entries, _ := os.ReadDir("/proc")
	for _, ent := range entries {
		pid, err := strconv.Atoi(ent.Name())
		if err != nil {
			continue
		}
		if ppid, ok := parentPID(pid); ok {
			children[ppid] = append(children[ppid], pid)
		}
	}
	var total float64
	var walk func(pid int)
	walk = func(pid int) {
		if c, err := cpuSeconds(pid); err == nil {
			total += c + reapedCPU(pid)
		}
		for _, child := range children[pid] {
			walk(child)
		}
	}
	walk(root)
	return total
}

// parentPID reads field 4 of /proc/<pid>/stat.
func parentPID(pid int) (int, bool) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, false
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 2 {
		return 0, false
	}
	ppid, err := strconv.Atoi(f[1])
	return ppid, err == nil
}

// reapedCPU reads cutime+cstime (fields 16 and 17): the CPU of exited children the
// process waited for.
func reapedCPU(pid int) float64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 15 {
		return 0
	}
	cu, _ := strconv.ParseUint(f[13], 10, 64)
	cs, _ := strconv.ParseUint(f[14], 10, 64)
	return float64(cu+cs) / clockTicks
}
