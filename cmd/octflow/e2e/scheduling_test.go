package e2e

// Scheduling on the real embedded server: the seven states as the API
// shows them, jittered retries after simultaneous failures, the buckets'
// shares of a saturated GPU queue, aging, and a scan damaged in storage.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"octflow/api"
	"octflow/api/intake"
	"octflow/contract"
	"octflow/exam"
	"octflow/gpuworker"
	"octflow/imaging"
	"octflow/internal/devsystem"
	"octflow/lifecycle"
)

// testPseudonymKey is the pseudonym key of every harness's stack.
const testPseudonymKey = "octflow-test-pseudonym-key-0001"

// isExam reports whether the stage running in ctx is the demo campus's
// exam examID (a device's exam ID; workflow IDs carry its reference).
func isExam(ctx context.Context, examID string) bool {
	id := activity.GetInfo(ctx).WorkflowExecution.ID
	campus, ref, _ := strings.Cut(strings.TrimPrefix(id, "exam/"), "/")
	return ref == intake.NewPseudonymizer([]byte(testPseudonymKey)).Exam(campus, examID)
}

func tiny(seed uint64) imaging.PhantomOptions {
	return imaging.PhantomOptions{Seed: seed, Frames: 3, Rows: 96, Cols: 64}
}

func TestEachOfTheSevenStatesIsObservedThroughTheAPI(t *testing.T) {
	claimed, executing := make(chan struct{}), make(chan struct{})
	h := newHarness(t, 0, func(c *devsystem.Config) {
		c.APIOnly = true
		c.WorkerInterceptors = withFaults(func(ctx context.Context, _ string, stage exam.Stage) error {
			switch attempt := contract.TryOf(activity.GetInfo(ctx).ActivityID); {
			case isExam(ctx, "dead-1"):
				return temporal.NewNonRetryableApplicationError("scan is not an OCT volume", "InvalidVolume", nil)
			case !isExam(ctx, "states-1") || stage != exam.Denoise:
			case attempt == 1:
				<-claimed // picked up, no progress reported yet
				return temporal.NewApplicationErrorWithOptions("simulated CUDA out of memory", "StageFailed",
					temporal.ApplicationErrorOptions{NextRetryDelay: 3 * time.Second})
			}
			return nil
		})
		// Held once it reports its start on its GPU: EXECUTING.
		c.SimulatedCompute = func(ctx context.Context, _ string, stage exam.Stage) error {
			if isExam(ctx, "states-1") && stage == exam.Denoise {
				<-executing
			}
			return nil
		}
	})
	ctx := context.Background()
	_, scan := phantomDICOM(t, tiny(51))
	seen := map[lifecycle.State]bool{}
	expect := func(want lifecycle.State) {
		t.Helper()
		st := h.waitFor("states-1", time.Minute, func(s *api.ExamStatus) bool { return s.State == want })
		seen[st.State] = true
		t.Logf("%-10s stage=%s attempt=%d node=%s", st.State, st.Stage, st.Attempt, st.Node)
	}

	if _, code, err := h.device.Submit(ctx, intake.Meta{ExamID: "states-1"}, scan); err != nil || code != http.StatusAccepted {
		t.Fatalf("submit: %d %v", code, err)
	}
	expect(lifecycle.Created) // no workflow worker yet
	h.startParts(true)
	expect(lifecycle.Queued) // no GPU node yet
	h.startParts(false, gpuworker.Config{NodeID: "gpu-states"})
	expect(lifecycle.Claimed)
	close(claimed)
	st := h.waitFor("states-1", time.Minute, func(s *api.ExamStatus) bool { return s.State == lifecycle.RetryWait })
	seen[st.State] = true
	if st.LastFailure == nil || st.LastFailure.Message != "simulated CUDA out of memory" || st.Attempt != 2 {
		t.Errorf("RETRY_WAIT status without the failure: %+v", st)
	}
	expect(lifecycle.Executing)
	close(executing)
	expect(lifecycle.Completed)

	if _, code, err := h.device.Submit(ctx, intake.Meta{ExamID: "dead-1"}, scan); err != nil || code != http.StatusAccepted {
		t.Fatalf("submit: %d %v", code, err)
	}
	dead := h.waitTerminal("dead-1")
	seen[dead.State] = true
	if dead.State != lifecycle.Dead || dead.LastFailure == nil || !strings.Contains(dead.LastFailure.Message, "not an OCT volume") {
		t.Errorf("dead exam status %+v", dead)
	}
	if len(seen) != 7 {
		t.Errorf("observed %d states: %v", len(seen), seen)
	}
}

func TestSimultaneousFailuresRetryOverTheJitterWindow(t *testing.T) {
	const n = 30
	window := 10 * time.Second
	var mu sync.Mutex
	arrived, released := 0, make(chan struct{})
	var releasedAt time.Time
	retryStarts := []time.Time{}
	maxAttempt := int32(0)
	h := newHarness(t, 1, func(c *devsystem.Config) {
		c.GPUsPerNode = n // every first attempt in flight at once
		// The node's breaker would rightly trip on 30 failures; this test
		// is about the retries' timing, not the breaker.
		c.Breaker.MinSamples = 1000
		c.Policy.RetryBase, c.Policy.RetryCap = window, window
		c.WorkerInterceptors = withFaults(func(ctx context.Context, _ string, stage exam.Stage) error {
			if stage != exam.Denoise {
				return nil
			}
			attempt := contract.TryOf(activity.GetInfo(ctx).ActivityID)
			mu.Lock()
			maxAttempt = max(maxAttempt, attempt)
			if attempt > 1 {
				retryStarts = append(retryStarts, time.Now())
				mu.Unlock()
				return nil
			}
			if arrived++; arrived == n {
				releasedAt = time.Now()
				close(released)
			}
			mu.Unlock()
			select { // all n fail at the same instant
			case <-released:
			case <-time.After(time.Minute):
			}
			return errors.New("simulated CUDA out of memory")
		})
	})
	ctx := context.Background()
	_, scan := phantomDICOM(t, tiny(61))
	for i := range n {
		if _, code, err := h.device.Submit(ctx, intake.Meta{ExamID: fmt.Sprintf("storm-%02d", i)}, scan); err != nil || code != http.StatusAccepted {
			t.Fatalf("submit %d: %d %v", i, code, err)
		}
	}
	for i := range n {
		if st := h.waitTerminal(fmt.Sprintf("storm-%02d", i)); st.State != lifecycle.Completed {
			t.Fatalf("exam %d ended %s", i, st.State)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(retryStarts) != n || maxAttempt > 3 {
		t.Fatalf("%d retries (want %d), highest attempt %d (want ≤ 3)", len(retryStarts), n, maxAttempt)
	}
	perSecond := map[int]int{}
	var offsets []float64
	for _, s := range retryStarts {
		d := s.Sub(releasedAt).Seconds()
		offsets = append(offsets, d)
		perSecond[int(d)]++
	}
	slices.Sort(offsets)
	// Full jitter over [0, 10 s): about 3 of 30 per second. Lockstep
	// would put all 30 in one second; 12 or more in one second has
	// probability below 1e-4 per second under Binomial(30, 0.1).
	busiest := 0
	for _, k := range perSecond {
		busiest = max(busiest, k)
	}
	t.Logf("retry offsets (s): first %.2f, median %.2f, last %.2f; busiest second holds %d of %d",
		offsets[0], offsets[n/2], offsets[n-1], busiest, n)
	if busiest >= 12 {
		t.Errorf("%d retries in one second: %v", busiest, perSecond)
	}
	if offsets[n-1]-offsets[0] < window.Seconds()/2 {
		t.Errorf("retries span %.1f s, want them spread over the %s window", offsets[n-1]-offsets[0], window)
	}
}

func TestBucketsShareASaturatedGPUQueue60_35_5(t *testing.T) {
	const perBucket, counted = 30, 80
	var mu sync.Mutex
	var order []string
	enough := make(chan struct{})
	h := newHarness(t, 0, func(c *devsystem.Config) {
		c.WorkerInterceptors = withFaults(func(ctx context.Context, _ string, stage exam.Stage) error {
			if !shipped().GPU(stage) {
				return nil
			}
			mu.Lock()
			defer mu.Unlock()
			if order = append(order, string(contract.BucketOfKey(activity.GetInfo(ctx).Priority.FairnessKey))); len(order) == counted {
				close(enough)
			}
			return nil
		})
	})
	ctx := context.Background()
	// Both campuses send alike, so every campus waits in every bucket:
	// the shares are then the buckets' own (decision 0023).
	s := h.sys.Secrets
	devices := []*api.Client{h.device, {Base: h.sys.App.APIURL(), Token: s.Devices[1].Token, HTTP: h.http}}
	clinicians := []*api.Client{h.clin, {Base: h.sys.App.APIURL(), Token: s.Clinicians[1].Token, HTTP: h.http}}
	_, scan := phantomDICOM(t, tiny(71))
	for i := range perBucket {
		for _, b := range []exam.Priority{exam.Urgent, exam.Normal, exam.Low} {
			id := fmt.Sprintf("%s-%02d", b, i)
			if _, code, err := devices[i%2].Submit(ctx, intake.Meta{ExamID: id, Priority: string(b)}, scan); err != nil || code != http.StatusAccepted {
				t.Fatalf("submit %s: %d %v", id, code, err)
			}
		}
	}
	// Every exam's first stage waits on the GPU queue before the one
	// node with one GPU starts.
	for _, b := range []string{"urgent", "normal", "low"} {
		for i := perBucket - 2; i < perBucket; i++ {
			waitExam(t, clinicians[i%2], fmt.Sprintf("%s-%02d", b, i), time.Minute, func(s *api.ExamStatus) bool {
				return s.State == lifecycle.Queued && s.Stage == exam.Denoise
			})
		}
	}
	// Visibility (the per-bucket counts) is eventually consistent, and
	// Temporal's backlog count approximate: poll until they settle.
	var queues api.QueuesView
	settled := func() bool {
		h.getJSON(h.sys.Secrets.Admin, "/v1/queues", http.StatusOK, &queues)
		for _, b := range []exam.Priority{exam.Urgent, exam.Normal, exam.Low} {
			if queues.ScheduledExams[b] != perBucket {
				return false
			}
		}
		gpu := queues.Queues[0]
		return gpu.Queue == exam.GPUQueue && gpu.Backlog >= 3*perBucket-5 && gpu.Backlog <= 3*perBucket+5
	}
	for deadline := time.Now().Add(15 * time.Second); !settled() && time.Now().Before(deadline); {
		time.Sleep(200 * time.Millisecond)
	}
	if !settled() {
		t.Errorf("/v1/queues: %+v, want %d queued exams per bucket and a GPU backlog of about %d", queues, perBucket, 3*perBucket)
	}
	h.startParts(false, gpuworker.Config{NodeID: "gpu-shares"})
	select {
	case <-enough:
	case <-time.After(3 * time.Minute):
		t.Fatal("the GPU node did not dispatch enough stages")
	}
	mu.Lock()
	first := slices.Clone(order[:counted])
	mu.Unlock()
	// In the first 80 dispatches no bucket runs dry (each holds 120
	// stages), so all three stay backlogged throughout.
	share := map[string]float64{}
	for _, b := range first {
		share[b] += 100.0 / counted
	}
	t.Logf("shares of the first %d GPU dispatches: urgent %.0f%%, normal %.0f%%, low %.0f%%", counted, share["urgent"], share["normal"], share["low"])
	for b, want := range map[string]float64{"urgent": 60, "normal": 35, "low": 5} {
		if math.Abs(share[b]-want) > 10 {
			t.Errorf("%s got %.0f%% of dispatches, want %.0f ± 10", b, share[b], want)
		}
	}
	if share["low"] == 0 {
		t.Error("low priority starved")
	}
}

// Inside a bucket the campuses share dispatch (decision 0023): campus A
// sends a burst of normal exams, then campus B sends two, and then one
// GPU node starts; B's exams complete while most of A's burst still
// waits. Under first come, first served inside the bucket, B's would run
// after every one of A's.
func TestACampusBurstDoesNotHoldBackAnotherCampus(t *testing.T) {
	const burst = 16
	h := newHarness(t, 0)
	ctx := context.Background()
	s := h.sys.Secrets
	deviceB := &api.Client{Base: h.sys.App.APIURL(), Token: s.Devices[1].Token, HTTP: h.http}
	clinB := &api.Client{Base: h.sys.App.APIURL(), Token: s.Clinicians[1].Token, HTTP: h.http}
	// Large enough that the GPU, not the round trips between stages, is what
	// the exams wait for.
	_, scan := phantomDICOM(t, imaging.PhantomOptions{Seed: 91, Frames: 8, Rows: 192, Cols: 128})
	for i := range burst {
		id := fmt.Sprintf("burst-%02d", i)
		if _, code, err := h.device.Submit(ctx, intake.Meta{ExamID: id, Priority: "normal"}, scan); err != nil || code != http.StatusAccepted {
			t.Fatalf("campus A submit %s: %d %v", id, code, err)
		}
	}
	h.waitFor(fmt.Sprintf("burst-%02d", burst-1), time.Minute, func(s *api.ExamStatus) bool { return s.State == lifecycle.Queued && s.Stage == exam.Denoise })
	others := []string{"other-1", "other-2"}
	for _, id := range others {
		if _, code, err := deviceB.Submit(ctx, intake.Meta{ExamID: id, Priority: "normal"}, scan); err != nil || code != http.StatusAccepted {
			t.Fatalf("campus B submit %s: %d %v", id, code, err)
		}
		waitExam(t, clinB, id, time.Minute, func(s *api.ExamStatus) bool { return s.State == lifecycle.Queued && s.Stage == exam.Denoise })
	}
	h.startParts(false, gpuworker.Config{NodeID: "gpu-campuses"})
	for _, id := range others {
		if st := waitExam(t, clinB, id, 3*time.Minute, func(s *api.ExamStatus) bool { return s.State.Terminal() }); st.State != lifecycle.Completed {
			t.Fatalf("campus B's %s ended %s", id, st.State)
		}
	}
	var done int
	for i := range burst {
		if st, err := h.clin.Status(ctx, fmt.Sprintf("burst-%02d", i)); err == nil && st.State.Terminal() {
			done++
		}
	}
	t.Logf("campus B's two exams completed when %d of campus A's %d had", done, burst)
	if done > burst/2 {
		t.Errorf("campus B's two exams completed only after %d of campus A's %d: want them done while most of the burst still waits", done, burst)
	}
	for i := range burst {
		if st := h.waitTerminal(fmt.Sprintf("burst-%02d", i)); st.State != lifecycle.Completed {
			t.Errorf("campus A's burst-%02d ended %s", i, st.State)
		}
	}
}

func TestLowPriorityStageIsPromotedAfterAgingThreshold(t *testing.T) {
	aging := 2 * time.Second
	h := newHarness(t, 0, func(c *devsystem.Config) {
		c.Policy.Aging = map[exam.Priority]time.Duration{exam.Low: aging, exam.Normal: aging}
	})
	ctx := context.Background()
	_, scan := phantomDICOM(t, tiny(81))
	submitted := time.Now()
	if _, code, err := h.device.Submit(ctx, intake.Meta{ExamID: "aging-1", Priority: "low"}, scan); err != nil || code != http.StatusAccepted {
		t.Fatalf("submit: %d %v", code, err)
	}
	// No GPU node: the stage waits, is promoted to normal, then urgent.
	st := h.waitFor("aging-1", time.Minute, func(s *api.ExamStatus) bool { return s.EffectivePriority == exam.Urgent })
	waited := time.Since(submitted)
	if st.Priority != exam.Low || st.State != lifecycle.Queued || waited < 2*aging {
		t.Errorf("status %+v after %s: want submitted low, queued as urgent after two thresholds", st, waited)
	}
	h.startParts(false, gpuworker.Config{NodeID: "gpu-aging"})
	if st := h.waitTerminal("aging-1"); st.State != lifecycle.Completed {
		t.Fatalf("exam ended %s", st.State)
	}
	var events []lifecycle.Entry
	h.getJSON(h.sys.Secrets.Clinician, "/v1/exams/aging-1/events", http.StatusOK, &events)
	var promotions []string
	for _, e := range events {
		if from, ok := e.Info["promotedFrom"]; ok {
			promotions = append(promotions, fmt.Sprintf("%s→%s", from, e.Info["bucket"]))
		}
	}
	if !slices.Equal(promotions, []string{"low→normal", "normal→urgent"}) {
		t.Errorf("promotions in the timeline: %v", promotions)
	}
	t.Log(h.waitMetric("octflow_promotions_total", `from="low"`, `to="normal"`))
}

// TestLowPriorityExamsArePromotedUnderASteadyStream saturates one GPU
// with a backlog and a steady stream of urgent and normal exams, with
// low exams behind them. Aging is proven by what the timelines record,
// not by how long anything took: with aging on, each low exam still
// queued when its threshold passed is promoted before it starts (and
// none earlier); the control, the same scenario with aging off, shows
// that low exams did wait past the threshold there, unpromoted.
func TestLowPriorityExamsArePromotedUnderASteadyStream(t *testing.T) {
	threshold := 3 * time.Second
	for _, aging := range []bool{true, false} {
		t.Run(map[bool]string{true: "aging on", false: "aging off (control)"}[aging], func(t *testing.T) {
			h := newHarness(t, 0, func(c *devsystem.Config) {
				c.Policy.Aging = map[exam.Priority]time.Duration{}
				if aging {
					c.Policy.Aging = map[exam.Priority]time.Duration{exam.Low: threshold, exam.Normal: threshold}
				}
				c.WorkerInterceptors = withFaults(func(ctx context.Context, _ string, stage exam.Stage) error {
					if shipped().GPU(stage) {
						// Simulated GPU time (this test's stages only sleep
						// on top of their real work), so the one GPU stays
						// saturated by the stream.
						time.Sleep(60 * time.Millisecond)
					}
					return nil
				})
			})
			ctx := context.Background()
			// Large enough that the GPU, not the round trips between stages, is what
			// the exams wait for.
			_, scan := phantomDICOM(t, imaging.PhantomOptions{Seed: 91, Frames: 8, Rows: 192, Cols: 128})
			submit := func(id string, p exam.Priority) {
				t.Helper()
				if _, code, err := h.device.Submit(ctx, intake.Meta{ExamID: id, Priority: string(p)}, scan); err != nil || code != http.StatusAccepted {
					t.Fatalf("submit %s: %d %v", id, code, err)
				}
			}
			for i := range 10 {
				submit(fmt.Sprintf("urgent-%02d", i), exam.Urgent)
				submit(fmt.Sprintf("normal-%02d", i), exam.Normal)
			}
			const lows = 8
			for i := range lows {
				submit(fmt.Sprintf("low-%d", i), exam.Low)
			}
			h.startParts(false, gpuworker.Config{NodeID: "gpu-stream"})
			streamEnd := time.Now().Add(4 * threshold)
			for i := 10; time.Now().Before(streamEnd); i++ {
				submit(fmt.Sprintf("urgent-%02d", i), exam.Urgent)
				submit(fmt.Sprintf("normal-%02d", i), exam.Normal)
				time.Sleep(time.Second)
			}
			promoted, waitedPast := 0, 0
			for i := range lows {
				id := fmt.Sprintf("low-%d", i)
				if st := h.waitFor(id, 3*time.Minute, func(s *api.ExamStatus) bool { return s.State.Terminal() }); st.State != lifecycle.Completed {
					t.Fatalf("%s ended %s", id, st.State)
				}
				var events []lifecycle.Entry
				h.getJSON(h.sys.Secrets.Clinician, "/v1/exams/"+id+"/events", http.StatusOK, &events)
				queued, started := firstEntry(events, lifecycle.Queued, exam.Denoise), firstEntry(events, lifecycle.Executing, exam.Denoise)
				if queued == nil || started == nil {
					t.Fatalf("%s: no first GPU stage in its timeline: %+v", id, events)
				}
				if started.At.Sub(queued.At) > threshold {
					waitedPast++
				}
				mine := 0
				for _, e := range events {
					from, ok := e.Info["promotedFrom"]
					if !ok {
						continue
					}
					promoted++
					if e.Stage != exam.Denoise {
						continue // later stages age in their own queue wait
					}
					mine++
					switch {
					case !aging:
						t.Errorf("%s promoted %s→%s with aging off", id, from, e.Info["bucket"])
					case e.At.After(started.At):
						t.Errorf("%s promoted after it had started", id)
					case e.At.Sub(queued.At) < threshold-100*time.Millisecond:
						t.Errorf("%s promoted after %s in the queue, before its %s threshold", id, e.At.Sub(queued.At), threshold)
					}
				}
				if aging && mine == 0 && started.At.Sub(queued.At) > threshold+time.Second {
					t.Errorf("%s waited %s for its first GPU stage and was never promoted", id, started.At.Sub(queued.At))
				}
			}
			t.Logf("%d of %d low exams waited past the %s threshold; %d promotions", waitedPast, lows, threshold, promoted)
			if aging && promoted == 0 {
				t.Error("no low exam was promoted")
			}
			if !aging && waitedPast == 0 {
				t.Error("the control did not saturate the GPU: no low exam waited past the threshold")
			}
		})
	}
}

func firstEntry(events []lifecycle.Entry, to lifecycle.State, stage exam.Stage) *lifecycle.Entry {
	for i := range events {
		if events[i].To == to && events[i].Stage == stage {
			return &events[i]
		}
	}
	return nil
}

// TestAScanDamagedInStorageEndsDeadWithTheReason damages a stored scan
// after the upload was accepted: the denoise stage finds it unreadable,
// and the exam ends DEAD at once (no retries) with the reader's reason.
func TestAScanDamagedInStorageEndsDeadWithTheReason(t *testing.T) {
	h := newHarness(t, 0, func(c *devsystem.Config) { c.APIOnly = true })
	ctx := context.Background()
	_, scan := phantomDICOM(t, tiny(61))
	if _, code, err := h.device.Submit(ctx, intake.Meta{ExamID: "damaged-1"}, scan); err != nil || code != http.StatusAccepted {
		t.Fatalf("submit: %d %v", code, err)
	}
	keys, err := h.store.List(ctx, h.objects("damaged-1")+"scan-")
	if err != nil || len(keys) != 1 {
		t.Fatalf("stored scan: %v %v", keys, err)
	}
	// The bytes rot: the pixel data loses its second half.
	damaged := scan[:len(scan)-len(scan)/4]
	if err := h.store.Put(ctx, keys[0], bytes.NewReader(damaged), int64(len(damaged)), "application/dicom"); err != nil {
		t.Fatal(err)
	}
	h.startParts(true, gpuworker.Config{NodeID: "gpu-damaged"})
	dead := h.waitTerminal("damaged-1")
	if dead.State != lifecycle.Dead || dead.Stage != exam.Denoise || dead.LastFailure == nil ||
		!strings.Contains(dead.LastFailure.Message, "invalid OCT volume") {
		t.Fatalf("status = %+v, want DEAD at denoise with the reader's reason", dead)
	}
	// Temporal records the last attempt of an activity: it must be the first.
	it := h.sys.App.Client().GetWorkflowHistory(ctx, h.examWF("damaged-1"), "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		if a := ev.GetActivityTaskStartedEventAttributes(); a != nil && a.GetAttempt() != 1 {
			t.Errorf("a stage ran %d attempts; a bad volume must not be retried", a.GetAttempt())
		}
	}
	t.Logf("DEAD: %s", dead.LastFailure.Message)
}

func TestUrgentExamsOvertakeABacklogAndLowStillCompletes(t *testing.T) {
	const backlog, urgent = 16, 4
	h := newHarness(t, 0, func(c *devsystem.Config) {
		c.WorkerInterceptors = withFaults(func(_ context.Context, _ string, stage exam.Stage) error {
			if shipped().GPU(stage) {
				time.Sleep(150 * time.Millisecond) // simulated GPU time: one GPU stays saturated
			}
			return nil
		})
	})
	h.startParts(false, gpuworker.Config{NodeID: "gpu-busy"})
	ctx := context.Background()
	// Large enough that the GPU, not the round trips between stages, is what
	// the exams wait for.
	_, scan := phantomDICOM(t, imaging.PhantomOptions{Seed: 91, Frames: 8, Rows: 192, Cols: 128})
	submit := func(id string, b exam.Priority) {
		if _, code, err := h.device.Submit(ctx, intake.Meta{ExamID: id, Priority: string(b)}, scan); err != nil || code != http.StatusAccepted {
			t.Fatalf("submit %s: %d %v", id, code, err)
		}
	}
	var behind []string
	for i := range backlog {
		id, b := fmt.Sprintf("normal-%02d", i), exam.Normal
		if i%2 == 1 {
			id, b = fmt.Sprintf("low-%02d", i), exam.Low
		}
		submit(id, b)
		behind = append(behind, id)
	}
	// The GPU is busy with the backlog when the urgent exams come.
	h.waitFor(behind[0], time.Minute, func(s *api.ExamStatus) bool { return s.State == lifecycle.Executing || s.State == lifecycle.Completed })
	urgentAt := time.Now()
	var urgents []string
	for i := range urgent {
		id := fmt.Sprintf("urgent-%02d", i)
		submit(id, exam.Urgent)
		urgents = append(urgents, id)
	}

	// When each exam's first GPU stage started, and when its report was done.
	firstGPU, reported := map[string]time.Time{}, map[string]time.Time{}
	for _, id := range append(slices.Clone(behind), urgents...) {
		if st := h.waitTerminal(id); st.State != lifecycle.Completed {
			t.Fatalf("%s ended %s: %+v", id, st.State, st.LastFailure)
		}
		var events []lifecycle.Entry
		h.getJSON(h.sys.Secrets.Clinician, "/v1/exams/"+id+"/events", http.StatusOK, &events)
		for _, e := range events {
			if e.To == lifecycle.Executing && shipped().GPU(e.Stage) && firstGPU[id].IsZero() {
				firstGPU[id] = e.At
			}
			if e.To == lifecycle.Completed && reported[id].IsZero() {
				reported[id] = e.At
			}
		}
	}
	// The backlog still waiting for the GPU when the urgent exams came.
	var waiting []string
	for _, id := range behind {
		if firstGPU[id].After(urgentAt) {
			waiting = append(waiting, id)
		}
	}
	if len(waiting) < backlog/2 {
		t.Fatalf("only %d of %d backlog exams were still waiting when the urgent ones came; the GPU was not saturated", len(waiting), backlog)
	}
	// Fairness gives urgent 60 % of the dispatches while it waits (not
	// all), so each urgent exam must beat most of the waiting backlog to
	// the GPU, and to its report.
	ahead := func(at map[string]time.Time, id string) int {
		n := 0
		for _, w := range waiting {
			if at[id].Before(at[w]) {
				n++
			}
		}
		return n
	}
	for _, id := range urgents {
		t.Logf("%s: first GPU stage ahead of %d and report ahead of %d of the %d waiting backlog exams",
			id, ahead(firstGPU, id), ahead(reported, id), len(waiting))
		if n := ahead(firstGPU, id); n*4 < len(waiting)*3 {
			t.Errorf("%s reached the GPU ahead of only %d of %d waiting backlog exams", id, n, len(waiting))
		}
		if n := ahead(reported, id); n*4 < len(waiting)*3 {
			t.Errorf("%s got its report ahead of only %d of %d waiting backlog exams", id, n, len(waiting))
		}
	}
}
