package forward

import (
	"os/exec"
	"syscall"
)

// dieWithParent makes the kernel kill cmd when the test process dies, so
// that a test binary killed by its timeout leaves no VictoriaMetrics behind.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
