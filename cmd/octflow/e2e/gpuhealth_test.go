package e2e

import (
	"context"
	"net/http"
	"slices"
	"testing"
	"time"

	"octflow/api"
	"octflow/api/intake"
	"octflow/exam"
	"octflow/gpuworker"
	"octflow/lifecycle"
)

// A GPU with a fault (here thermal throttling, as a simulated GPU is
// told to report it) takes no stage: the fleet view and the metrics say
// why, the exam waits, and the node takes it once the fault clears.
func TestAGPUWithAFaultTakesNoStageUntilItClears(t *testing.T) {
	h := newHarness(t, 0)
	inv := gpuworker.NewSimulatedInventory(gpuworker.SimulatedGPUs{Count: 1})
	inv.SetFaults(0, exam.FaultThermal)
	h.startParts(false, gpuworker.Config{NodeID: "gpu-hot", GPUs: inv})
	_, scan := phantomDICOM(t, tiny(95))
	if _, code, err := h.device.Submit(context.Background(), intake.Meta{ExamID: "hot-1", Priority: "urgent"}, scan); err != nil || code != http.StatusAccepted {
		t.Fatalf("submit: %d %v", code, err)
	}
	reported := func(want []exam.GPUFault) bool {
		var nodes []api.NodeView
		h.getJSON(h.sys.Secrets.Admin, "/v1/nodes", http.StatusOK, &nodes)
		for _, n := range nodes {
			if n.NodeID == "gpu-hot" && len(n.GPUs) == 1 {
				return slices.Equal(n.GPUs[0].Faults, want) && n.GPUs[0].Healthy == (len(want) == 0)
			}
		}
		return false
	}
	for deadline := time.Now().Add(30 * time.Second); !reported([]exam.GPUFault{exam.FaultThermal}); {
		if time.Now().After(deadline) {
			t.Fatal("the fleet view never showed the GPU's thermal fault")
		}
		time.Sleep(200 * time.Millisecond)
	}
	gauges := func() map[string]float64 {
		fams := h.scrape()
		out := samples(fams["octflow_gpu_healthy"])
		for k, v := range samples(fams["octflow_gpu_fault"]) {
			out["fault:"+k] = v
		}
		return out
	}
	g := gauges()
	if g["gpu=0,node=gpu-hot"] != 0 || g["fault:fault=thermal,gpu=0,node=gpu-hot"] != 1 || g["fault:fault=xid,gpu=0,node=gpu-hot"] != 0 {
		t.Errorf("metrics of the hot GPU: %v; want octflow_gpu_healthy 0, octflow_gpu_fault thermal 1 and xid 0", g)
	}
	// The exam waits for a GPU: its first stage stays queued.
	h.waitFor("hot-1", time.Minute, func(s *api.ExamStatus) bool { return s.State == lifecycle.Queued && s.Stage == exam.Denoise })
	time.Sleep(3 * time.Second)
	if st, err := h.clin.Status(context.Background(), "hot-1"); err != nil || st.State != lifecycle.Queued {
		t.Fatalf("with its only GPU throttled, the exam is %+v (%v); want it queued", st, err)
	}
	inv.SetFaults(0)
	if st := h.waitTerminal("hot-1"); st.State != lifecycle.Completed {
		t.Fatalf("once the fault cleared the exam ended %s", st.State)
	}
	for deadline := time.Now().Add(30 * time.Second); !reported(nil); {
		if time.Now().After(deadline) {
			t.Fatal("the fleet view never showed the GPU healthy again")
		}
		time.Sleep(200 * time.Millisecond)
	}
}
