package bench

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// CPUUse is the CPU time a run took, per exam, by process: where an
// exam's cost goes on the machine, beside what the engine's histories
// show (package cost).
type CPUUse struct {
	// SystemMsPerExam is the process that embeds the engine, the object
	// store, the gateway and the CPU workers (and the benchmark's
	// uploading devices), from the burst's first upload to its last
	// report.
	SystemMsPerExam float64 `json:"systemMsPerExam"`
	// NodesMsPerExam is the GPU node processes over the same span: their
	// workers and the real stages on the tiny phantoms (the simulated
	// GPU time is a sleep and costs none).
	NodesMsPerExam float64 `json:"nodesMsPerExam"`
	// BareMsPerWorkflow is the embedding process over the bare run, per
	// bare workflow: what the engine alone costs for one.
	BareMsPerWorkflow float64 `json:"bareMsPerWorkflow"`
}

// String is the one-line printout.
func (u CPUUse) String() string {
	return fmt.Sprintf("CPU per exam: %.0f ms system + %.0f ms GPU nodes = %.0f ms; bare engine %.0f ms per workflow (×%.1f)",
		u.SystemMsPerExam, u.NodesMsPerExam, u.SystemMsPerExam+u.NodesMsPerExam, u.BareMsPerWorkflow,
		(u.SystemMsPerExam+u.NodesMsPerExam)/max(u.BareMsPerWorkflow, 1e-9))
}

// selfCPU is the CPU time this process has used, user and system.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// userHz is the unit of /proc/<pid>/stat's CPU times on Linux.
const userHz = 100

// processCPU is the CPU time process pid has used so far, from
// /proc/<pid>/stat (0 once it has been reaped, or off Linux).
func processCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The command name, in parentheses, may hold spaces: the fields
	// counted from the state (field 3) follow its last ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0
	}
	return time.Duration(utime+stime) * time.Second / userHz
}
