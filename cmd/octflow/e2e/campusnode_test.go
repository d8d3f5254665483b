package e2e

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"

	"octflow/api"
	"octflow/api/intake"
	"octflow/cmd/octflow/internal/cli"
	"octflow/codec"
	"octflow/contract"
	"octflow/exam"
	"octflow/internal/devsystem"
	"octflow/lifecycle"
)

// A campus whose exams run only on its own GPU nodes (OCTFLOW_CAMPUS_OWN_GPUS):
// a node bound to it, holding that campus's payload keys only (octflow
// node-keys), runs every GPU stage of its exams and none of another
// campus's, and cannot open the other campus's payloads in Temporal's
// history; the other campus's exams run on the shared node.
func TestACampusBoundNodeRunsItsCampusAloneAndOpensNoOtherCampus(t *testing.T) {
	h := newHarness(t, 1, func(c *devsystem.Config) { c.Policy.OwnGPUs = []string{devsystem.SecondCampus} })
	ctx := context.Background()
	s := h.sys.Secrets
	a, b := s.Campus, devsystem.SecondCampus
	keys, err := cli.NodeKeys(s.CodecKeysFile, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	keysFile := filepath.Join(t.TempDir(), "codec-keys.json")
	if err := os.WriteFile(keysFile, keys, 0o600); err != nil {
		t.Fatal(err)
	}
	h.spawnNode("gpu-b-1", 10*time.Second, "OCTFLOW_CODEC_KEYS_FILE="+keysFile, "OCTFLOW_NODE_CAMPUS="+b)
	if v := h.nodes()["gpu-b-1"]; v.Status != "up" {
		t.Fatalf("the bound node: %+v", v)
	}

	deviceB := &api.Client{Base: h.sys.App.APIURL(), Token: s.Devices[1].Token}
	clinB := &api.Client{Base: h.sys.App.APIURL(), Token: s.Clinicians[1].Token}
	_, scanA := phantomDICOM(t, tiny(261))
	_, scanB := phantomDICOM(t, tiny(262))
	for _, d := range []struct {
		c    *api.Client
		scan []byte
	}{{h.device, scanA}, {deviceB, scanB}} {
		if _, code, err := d.c.Submit(ctx, intake.Meta{ExamID: "OWN-1"}, d.scan); code != http.StatusAccepted {
			t.Fatalf("submit: %d %v", code, err)
		}
	}
	for _, c := range []*api.Client{h.clin, clinB} {
		if st := h.waitForClient(c, "OWN-1", func(s *api.ExamStatus) bool { return s.State.Terminal() }); st.State != lifecycle.Completed {
			t.Fatalf("OWN-1 ended %s: %+v", st.State, st.LastFailure)
		}
	}
	pseudonyms := intake.NewPseudonymizer([]byte(s.PseudonymKey))
	wfA, wfB := contract.ExamWorkflowID(pseudonyms.ExamRef(a, "OWN-1")), contract.ExamWorkflowID(pseudonyms.ExamRef(b, "OWN-1"))
	ranOn := func(wf string) map[string]bool {
		nodes := map[string]bool{}
		for _, at := range triesOf(t, h.sys.App.Client(), h.sys.App.Converters(), wf) {
			if shipped().GPU(at.Stage) && at.Ended == "done" {
				nodes[at.Node] = true
				if wf == wfB && at.Queue != exam.CampusGPUQueue(b) && at.Queue != exam.NodeQueueOf(exam.CampusGPUQueue(b), "gpu-b-1") {
					t.Errorf("campus %s's %s was scheduled on %s", b, at.Stage, at.Queue)
				}
			}
		}
		return nodes
	}
	if got := ranOn(wfB); len(got) != 1 || !got["gpu-b-1"] {
		t.Errorf("campus %s's GPU stages ran on %v, want its own node gpu-b-1 only", b, got)
	}
	if got := ranOn(wfA); got["gpu-b-1"] || len(got) == 0 {
		t.Errorf("campus %s's GPU stages ran on %v, never on campus %s's node", a, got, b)
	}

	// The bound node's keys, against each campus's history.
	node, err := codec.Open(keysFile)
	if err != nil {
		t.Fatal(err)
	}
	opened := func(wf string) (ok, failed int) {
		iter := h.sys.App.Client().GetWorkflowHistory(ctx, wf, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for iter.HasNext() {
			ev, err := iter.Next()
			if err != nil {
				t.Fatal(err)
			}
			attrs := ev.GetActivityTaskScheduledEventAttributes()
			if attrs == nil || len(attrs.GetInput().GetPayloads()) == 0 {
				continue
			}
			if _, err := node.Decode(attrs.GetInput().GetPayloads()); err != nil {
				failed++
			} else {
				ok++
			}
		}
		return ok, failed
	}
	if ok, failed := opened(wfB); ok == 0 || failed != 0 {
		t.Errorf("the bound node opened %d of campus %s's stage inputs and failed %d, want all", ok, b, failed)
	}
	if ok, failed := opened(wfA); ok != 0 || failed == 0 {
		t.Errorf("the bound node opened %d of campus %s's stage inputs (failed %d), want none", ok, a, failed)
	}
}
