package bench

import (
	"os/exec"
	"testing"
	"time"
)

func TestProcessCPUFollowsAChildAndSelfCPUThisProcess(t *testing.T) {
	// A child that spins, then sleeps: /proc shows its CPU time while it
	// lives, no more than it reports once reaped, and nothing after.
	cmd := exec.Command("sh", "-c", `i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done; sleep 2`)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var seen time.Duration
	for deadline := time.Now().Add(20 * time.Second); seen < 100*time.Millisecond && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		seen = max(seen, processCPU(cmd.Process.Pid))
	}
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	if seen < 100*time.Millisecond {
		t.Fatalf("processCPU saw %v of a child that spun for longer", seen)
	}
	if final := cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime(); seen > final+20*time.Millisecond {
		t.Errorf("processCPU saw %v, more than the child's whole %v", seen, final)
	}
	if got := processCPU(cmd.Process.Pid); got != 0 {
		t.Errorf("a reaped process still reads %v", got)
	}

	// Spinning shows in this process's CPU time (however busy the
	// machine: the spin goes on until it does, or 30 s pass).
	before := selfCPU()
	for start := time.Now(); selfCPU()-before < 100*time.Millisecond && time.Since(start) < 30*time.Second; {
	}
	if d := selfCPU() - before; d < 100*time.Millisecond {
		t.Errorf("selfCPU grew by %v over 30 s of spinning", d)
	}
}
