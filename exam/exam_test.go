package exam

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestValidateIDRefusesWhatCannotBeAKey(t *testing.T) {
	for _, id := range []string{"E-2026-0001", "a", "exam_1.b"} {
		if err := ValidateID(id); err != nil {
			t.Errorf("ValidateID(%q) = %v", id, err)
		}
	}
	for _, id := range []string{"", "../etc", "a/b", "-x", "with space", string(make([]byte, 200))} {
		if ValidateID(id) == nil {
			t.Errorf("ValidateID(%q) accepted", id)
		}
	}
}

func TestKeysSeparateCampusesAndScans(t *testing.T) {
	north, south := Ref{Campus: "north", ID: "E1"}, Ref{Campus: "south", ID: "E1"}
	a, b := ScanKey(north, "aaaaaaaaaaaaaaaaaaaa"), ScanKey(north, "bbbbbbbbbbbbbbbbbbbb")
	if a == b {
		t.Fatalf("different scans share key %s", a)
	}
	if a != "exams/north/E1/scan-aaaaaaaaaaaaaaaa.dcm" {
		t.Errorf("ScanKey = %s", a)
	}
	if ReportJSONKey(north) == ReportJSONKey(south) {
		t.Error("two campuses' E1 share a report key")
	}
}

func TestCampusNamesCannotEscapeAKey(t *testing.T) {
	for _, c := range []string{"north", "campus-2", "a"} {
		if err := ValidateCampus(c); err != nil {
			t.Errorf("ValidateCampus(%q) = %v", c, err)
		}
	}
	for _, c := range []string{"", "North", "../x", "a/b", "-x", "a b", "a_b", string(make([]byte, 64))} {
		if ValidateCampus(c) == nil {
			t.Errorf("ValidateCampus(%q) accepted", c)
		}
	}
}

func TestPolicyValidateNamesEverySettingThatCannotWork(t *testing.T) {
	if err := DefaultPolicy().Validate(); err != nil {
		t.Fatalf("the production policy does not validate: %v", err)
	}
	p := DefaultPolicy()
	p.RetryBase, p.RetryCap = 10*time.Minute, time.Minute
	p.HeartbeatTimeout = p.StageTimeout
	p.Weights = map[Priority]float32{Urgent: 60, Normal: 35}
	p.Aging = map[Priority]time.Duration{Urgent: time.Minute, Low: -time.Second}
	p.MaxAttempts = 0
	p.CampusWeights = map[string]float32{"north": 1, "Bad Name": 1, "south": 0, "west": 11}
	p.CampusShare = 1.5
	p.OwnGPUs = []string{"north", "North Wing"}
	p.GPUQueue = "oct-gpu-node-gpu-0"
	err := p.Validate()
	var fields []string
	for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
		var pe *PolicyError
		if !errors.As(e, &pe) {
			t.Fatalf("%v is not a PolicyError", e)
		}
		fields = append(fields, pe.Field)
	}
	want := []string{"maxAttempts", "retryCap", "heartbeatTimeout", "weights", "aging", "aging", "campusShare", "campusWeights", "campusWeights", "campusWeights", "ownGpus", "gpuQueue"}
	if !slices.Equal(fields, want) {
		t.Errorf("fields %v, want %v (%v)", fields, want, err)
	}
	// A campus's part is above 0: an exam of no part would weigh nothing.
	p = DefaultPolicy()
	p.CampusShare = 0
	if err := p.Validate(); err == nil || !strings.Contains(err.Error(), "campusShare") {
		t.Errorf("a campus part of 0: %v, want it refused", err)
	}
	// Zero is a setting, not a request for the default.
	p = DefaultPolicy()
	p.UrgentSLA, p.ReviewReminder, p.InfraRetryFor, p.Aging = 0, 0, 0, nil
	if err := p.Validate(); err != nil {
		t.Errorf("zeros that mean 'off' were refused: %v", err)
	}
}

// A campus with GPUs of its own has its exams' GPU stages on its own
// queue; other campuses' and the CPU stages stay where they were.
func TestACampusWithItsOwnGPUsHasItsGPUStagesOnItsOwnQueue(t *testing.T) {
	p := DefaultPolicy()
	p.OwnGPUs = []string{"north"}
	north, south := p.ForCampus("north", nil), p.ForCampus("south", nil)
	if north.OwnGPUs != nil || south.OwnGPUs != nil {
		t.Errorf("an exam's policy carries the campuses' list: %v %v", north.OwnGPUs, south.OwnGPUs)
	}
	gpu, cpu := StageSpec{Stage: Denoise, GPU: true, GPUMemoryMiB: 1}, StageSpec{Stage: Render}
	for _, tc := range []struct {
		pol   Policy
		stage StageSpec
		want  string
	}{
		{north, gpu, CampusGPUQueue("north")},
		{north, cpu, CPUQueue},
		{south, gpu, GPUQueue},
		{DefaultPolicy(), gpu, GPUQueue},
		{DefaultPolicy(), cpu, CPUQueue},
	} {
		if got := tc.pol.StageQueue(tc.stage); got != tc.want {
			t.Errorf("%s under %q: %s, want %s", tc.stage.Stage, tc.pol.GPUQueue, got, tc.want)
		}
	}
	if err := north.Validate(); err != nil {
		t.Errorf("north's exam policy: %v", err)
	}
}

func TestParseScanKeyReadsBackWhatScanKeyWrote(t *testing.T) {
	ref := Ref{Campus: "north", ID: "E-1.2"}
	got, digest, ok := ParseScanKey(ScanKey(ref, "0123456789abcdef0123"))
	if !ok || got != ref || digest != "0123456789abcdef" {
		t.Errorf("ParseScanKey = %+v %q %v", got, digest, ok)
	}
	for _, k := range []string{"exams/E1/scan-0123.dcm", "exams/north/E1/report.json", "other/north/E1/scan-1.dcm", "exams/North/E1/scan-1.dcm",
		DenoisedKey(ref), "exams/north/E1/scan-.dcm"} {
		if _, _, ok := ParseScanKey(k); ok {
			t.Errorf("ParseScanKey(%q) accepted", k)
		}
	}
}

func TestAnIntakeMarkerNamesTheScanItGuards(t *testing.T) {
	ref := Ref{Campus: "north", ID: "e-1"}
	digest := "0123456789abcdef0123456789abcdef"
	scan, ok := IntakeScanKey(IntakeKey(ref, digest))
	if !ok || scan != ScanKey(ref, digest) {
		t.Errorf("IntakeScanKey(IntakeKey) = %q %v, want %q", scan, ok, ScanKey(ref, digest))
	}
	for _, key := range []string{
		ScanKey(ref, digest), RecordKey(ref), ReportJSONKey(ref),
		"other/north/e-1/intake-0123456789abcdef.json", "exams/north/e-1/intake-.json",
	} {
		if s, ok := IntakeScanKey(key); ok {
			t.Errorf("IntakeScanKey(%q) = %q, want not a marker", key, s)
		}
	}
}

func TestAnExamsCampusShareIsItsWeightOverEveryUploadingCampus(t *testing.T) {
	p := DefaultPolicy()
	p.CampusWeights = map[string]float32{"north": 2, "south": 0.5}
	uploading := []string{"north", "south", "west"} // west: unlisted, 1
	for _, tc := range []struct {
		campus   string
		campuses []string
		want     float32
	}{
		{"north", uploading, 2 / 3.5},
		{"south", uploading, 0.5 / 3.5},
		{"west", uploading, 1 / 3.5},
		{"north", nil, 1},               // the only campus
		{"east", uploading, 1 / 4.5},    // a campus the list lacks counts once
		{"north", []string{"north"}, 1}, // listed once, counted once
	} {
		got := p.ForCampus(tc.campus, tc.campuses)
		if d := got.CampusShare - tc.want; d > 1e-6 || d < -1e-6 {
			t.Errorf("%s among %v: share %v, want %v", tc.campus, tc.campuses, got.CampusShare, tc.want)
		}
		if got.CampusWeights != nil {
			t.Errorf("%s's exam carries the campuses' weights %v", tc.campus, got.CampusWeights)
		}
		if err := got.Validate(); err != nil {
			t.Errorf("%s's policy does not validate: %v", tc.campus, err)
		}
	}
	if len(p.CampusWeights) != 2 {
		t.Errorf("ForCampus changed the policy it was called on: %v", p.CampusWeights)
	}
	if got := p.Share(Normal); got < 0.3499 || got > 0.3501 {
		t.Errorf("normal's share under 60/35/5: %v, want 0.35", got)
	}
}

// A node queue names the GPU queue it belongs to: an exam of one
// campus's own queue takes no other queue's node queue, nor the shared
// queue's, and a campus whose name starts with another's is another.
func TestANodeQueueBelongsToOneGPUQueue(t *testing.T) {
	north, north2 := CampusGPUQueue("north"), CampusGPUQueue("north-2")
	for _, tc := range []struct {
		queue, q string
		want     bool
	}{
		{GPUQueue, NodeQueueOf(GPUQueue, "gpu-0"), true},
		{GPUQueue, NodeQueue("gpu-0"), true},
		{GPUQueue, NodeQueueOf(north, "gpu-n1"), false},
		{north, NodeQueueOf(north, "gpu-n1"), true},
		{north, NodeQueue("gpu-0"), false},
		{north, NodeQueueOf(north2, "gpu-n1"), false},
		{north2, NodeQueueOf(north, "gpu-n1"), false},
		{north, north, false},
		{north, NodeQueueOf(north, ""), false},
		{GPUQueue, "oct-gpu-campus-north", false},
	} {
		if got := IsNodeQueueOf(tc.queue, tc.q); got != tc.want {
			t.Errorf("IsNodeQueueOf(%q, %q) = %v, want %v", tc.queue, tc.q, got, tc.want)
		}
	}
}

func TestAPipelineSaysWhichOfItsStagesRunOnAGPU(t *testing.T) {
	p := Pipeline{{Stage: Denoise, Activity: "Denoise", GPU: true, GPUMemoryMiB: 2048}, {Stage: Render, Activity: "RenderReport"}}
	for stage, want := range map[Stage]bool{Denoise: true, Render: false, "vessels": false} {
		if got := p.GPU(stage); got != want {
			t.Errorf("GPU(%s) = %t, want %t", stage, got, want)
		}
	}
	if spec, ok := p.OfActivity("RenderReport"); !ok || spec.Stage != Render {
		t.Errorf("OfActivity(RenderReport) = %+v, %t", spec, ok)
	}
	if _, ok := p.OfActivity("SweepScans"); ok {
		t.Error("an activity of no stage was found in the pipeline")
	}
}
