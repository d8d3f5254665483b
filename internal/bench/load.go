package bench

import (
	"time"

	"octflow/contract"
	"octflow/lifecycle"
)

// loadWindow is how finely the benchmark reports the GPUs' load.
const loadWindow = 10 * time.Second

// StageLoad is the GPUs' load over one window of the burst: how many
// GPUs were held on average (by stages that completed, from their start
// to the GPU's release: the time of an attempt that failed or was lost
// is not known and not counted), and how many GPU stages waited on
// average (queued, or taken by a node and waiting for a GPU). GPUs
// under the fleet's count while stages wait means they idled for the
// scheduler, not for want of work.
type StageLoad struct {
	GPUsBusy float64 `json:"gpusBusy"`
	Waiting  float64 `json:"waiting"`
}

// addSpan adds to each window from start the share of it that [from, to)
// covers, in the field pick chooses.
func addSpan(load []StageLoad, start, from, to time.Time, pick func(*StageLoad) *float64) []StageLoad {
	a, b := max(from.Sub(start), 0), to.Sub(start)
	for a < b {
		w := int(a / loadWindow)
		end := min(b, time.Duration(w+1)*loadWindow)
		for len(load) <= w {
			load = append(load, StageLoad{})
		}
		*pick(&load[w]) += (end - a).Seconds() / loadWindow.Seconds()
		a = end
	}
	return load
}

func busy(l *StageLoad) *float64    { return &l.GPUsBusy }
func waiting(l *StageLoad) *float64 { return &l.Waiting }

// gpuLoad adds one exam to load: the spans its stages held a GPU, and the
// time its GPU stages waited, read from its timeline until its next move.
func gpuLoad(load []StageLoad, start time.Time, held []contract.Span, tl []lifecycle.Entry) []StageLoad {
	for _, s := range held {
		load = addSpan(load, start, s.From, s.To, busy)
	}
	for i := 0; i+1 < len(tl); i++ {
		if e := tl[i]; shipped().GPU(e.Stage) && (e.To == lifecycle.Queued || e.To == lifecycle.Claimed) {
			load = addSpan(load, start, e.At, tl[i+1].At, waiting)
		}
	}
	return load
}

// heldGPUSeconds is how long the stages that completed held their GPUs.
func heldGPUSeconds(load []StageLoad) float64 {
	var s float64
	for _, l := range load {
		s += l.GPUsBusy * loadWindow.Seconds()
	}
	return s
}
