// Package mosquittotest runs an Eclipse Mosquitto broker for tests: on a
// free loopback port, with persistence in a temporary directory, unlimited
// queues for offline persistent sessions and a large in-flight window.
//
// The broker comes from the OS packages (Debian: apt-get install -y
// mosquitto). When it is missing, Start fails the test if the CI
// environment variable is set and skips it otherwise.
package mosquittotest

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Broker is a running (or stopped) Mosquitto.
type Broker struct {
	t    testing.TB
	exe  string
	conf string
	// URL is tcp://127.0.0.1:PORT; it stays the same across restarts.
	URL string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}

	logMu sync.Mutex
	log   strings.Builder
}

// Log returns what the broker logged so far, across restarts.
func (b *Broker) Log() string {
	b.logMu.Lock()
	defer b.logMu.Unlock()
	return b.log.String()
}

// Binary returns the path of mosquitto, or "" when it is not installed.
func Binary() string {
	if p, err := exec.LookPath("mosquitto"); err == nil {
		return p
	}
	for _, p := range []string{"/usr/sbin/mosquitto", "/usr/local/sbin/mosquitto"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return ""
}

// Start starts a broker that is stopped when the test ends.
func Start(t testing.TB) *Broker {
	t.Helper()
	exe := Binary()
	if exe == "" {
		t.Fatal("mosquitto is not installed: bash scripts/test installs it (apt-get install -y mosquitto)")
	}
	dir := t.TempDir()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	conf := filepath.Join(dir, "mosquitto.conf")
	user := ""
	if os.Geteuid() == 0 {
		// As root, mosquitto switches to the user "mosquitto", which
		// cannot write the test's directory.
		user = "user root\n"
	}
	err = os.WriteFile(conf, []byte(fmt.Sprintf(`%slistener %d 127.0.0.1
allow_anonymous true
persistence true
persistence_location %s/
autosave_interval 1
max_inflight_messages 1000
max_queued_messages 0
max_queued_bytes 0
log_dest stderr
log_type error
log_type warning
log_type notice
log_type information
`, user, port, dir)), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	b := &Broker{t: t, exe: exe, conf: conf, URL: fmt.Sprintf("tcp://127.0.0.1:%d", port)}
	b.Restart()
	t.Cleanup(b.Stop)
	return b
}

// Restart starts the broker again (after Stop), from its persisted state.
func (b *Broker) Restart() {
	b.t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	cmd := exec.Command(b.exe, "-c", b.conf)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		b.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.t.Fatal(err)
	}
	ready := make(chan struct{})
	done := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		once := sync.Once{}
		for sc.Scan() {
			b.logMu.Lock()
			b.log.WriteString(sc.Text() + "\n")
			b.logMu.Unlock()
			// "mosquitto version X running" once it listens.
			if strings.Contains(sc.Text(), " running") {
				once.Do(func() { close(ready) })
			}
		}
		cmd.Wait()
		close(done)
	}()
	select {
	case <-ready:
	case <-done:
		b.t.Fatalf("mosquitto exited:\n%s", b.Log())
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		b.t.Fatal("mosquitto did not start")
	}
	b.cmd, b.done = cmd, done
}

// Stop stops the broker gracefully (SIGTERM: it saves its persistent
// state) and waits for it to exit.
func (b *Broker) Stop() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.cmd == nil {
		return
	}
	b.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-b.done:
	case <-time.After(30 * time.Second):
		b.cmd.Process.Kill()
		<-b.done
	}
	b.cmd = nil
}
