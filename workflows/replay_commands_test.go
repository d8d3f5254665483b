package workflows

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// commandLog notes, while a history replays, what the workflow code asks
// for that Temporal's replayer does not compare with the history: each
// activity's retry classification and timeouts, each timer's duration
// and summary (a retry wait's names the attempt it follows).
type commandLog struct {
	interceptor.WorkerInterceptorBase
	activities []string
	timers     []string
}

func (l *commandLog) InterceptWorkflow(ctx workflow.Context, next interceptor.WorkflowInboundInterceptor) interceptor.WorkflowInboundInterceptor {
	return &logInbound{WorkflowInboundInterceptorBase: interceptor.WorkflowInboundInterceptorBase{Next: next}, log: l}
}

type logInbound struct {
	interceptor.WorkflowInboundInterceptorBase
	log *commandLog
}

func (i *logInbound) Init(outbound interceptor.WorkflowOutboundInterceptor) error {
	return i.Next.Init(&logOutbound{WorkflowOutboundInterceptorBase: interceptor.WorkflowOutboundInterceptorBase{Next: outbound}, log: i.log})
}

type logOutbound struct {
	interceptor.WorkflowOutboundInterceptorBase
	log *commandLog
}

func (o *logOutbound) ExecuteActivity(ctx workflow.Context, activityType string, args ...any) workflow.Future {
	opts := workflow.GetActivityOptions(ctx)
	var final []string
	if opts.RetryPolicy != nil {
		final = slices.Clone(opts.RetryPolicy.NonRetryableErrorTypes)
	}
	// Unset, the server takes the schedule-to-start timeout from the
	// schedule-to-close one, and records that.
	scheduleToStart := opts.ScheduleToStartTimeout
	if scheduleToStart == 0 {
		scheduleToStart = opts.ScheduleToCloseTimeout
	}
	o.log.activities = append(o.log.activities, activityKey(activityType, final, opts.StartToCloseTimeout,
		scheduleToStart, opts.HeartbeatTimeout))
	return o.Next.ExecuteActivity(ctx, activityType, args...)
}

func (o *logOutbound) NewTimer(ctx workflow.Context, d time.Duration) workflow.Future {
	o.log.timers = append(o.log.timers, timerKey(d, ""))
	return o.Next.NewTimer(ctx, d)
}

func (o *logOutbound) NewTimerWithOptions(ctx workflow.Context, d time.Duration, opts workflow.TimerOptions) workflow.Future {
	o.log.timers = append(o.log.timers, timerKey(d, opts.Summary))
	return o.Next.NewTimerWithOptions(ctx, d, opts)
}

// timerKey is what a timer must keep: its duration and its summary.
func timerKey(d time.Duration, summary string) string { return fmt.Sprintf("%s %s", d, summary) }

// activityKey is what an activity's schedule must keep from one version
// of the code to the next: its type, the failures it never retries, its
// timeouts.
func activityKey(activityType string, final []string, startToClose, scheduleToStart, heartbeat time.Duration) string {
	slices.Sort(final)
	return fmt.Sprintf("%s final=%s startToClose=%s scheduleToStart=%s heartbeat=%s",
		activityType, strings.Join(final, ","), startToClose, scheduleToStart, heartbeat)
}

// TestReplayedCommandsKeepTheirTimersAndRetryClassification replays every
// recorded history and compares what Temporal's own replay check does
// not: each activity's non-retryable failure types and timeouts, and
// each timer's duration and summary, in order, against the recorded
// events. A change of a timer's length, of which failures a stage
// retries or of how the workflow records a retried attempt (its outcome,
// its number) would otherwise replay cleanly and change running exams'
// behaviour or their timelines.
func TestReplayedCommandsKeepTheirTimersAndRetryClassification(t *testing.T) {
	files, err := filepath.Glob("testdata/*_*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no recorded histories: %v", err)
	}
	dc, fc := corpusConverters(t)
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			log := &commandLog{}
			r, err := worker.NewWorkflowReplayerWithOptions(worker.WorkflowReplayerOptions{DataConverter: dc, FailureConverter: fc,
				Interceptors: []interceptor.WorkerInterceptor{log}})
			if err != nil {
				t.Fatal(err)
			}
			if err := Register(r, shipped()); err != nil {
				t.Fatal(err)
			}
			if err := r.ReplayWorkflowHistoryFromJSONFile(nil, f); err != nil {
				t.Fatalf("replaying %s: %v", f, err)
			}
			file, err := os.Open(f)
			if err != nil {
				t.Fatal(err)
			}
			defer file.Close()
			h, err := client.HistoryFromJSON(file, client.HistoryJSONOptions{})
			if err != nil {
				t.Fatal(err)
			}
			var activities []string
			var timers []string
			for _, ev := range h.GetEvents() {
				switch ev.GetEventType() {
				case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
					a := ev.GetActivityTaskScheduledEventAttributes()
					activities = append(activities, activityKey(a.GetActivityType().GetName(), slices.Clone(a.GetRetryPolicy().GetNonRetryableErrorTypes()),
						a.GetStartToCloseTimeout().AsDuration(), a.GetScheduleToStartTimeout().AsDuration(), a.GetHeartbeatTimeout().AsDuration()))
				case enumspb.EVENT_TYPE_TIMER_STARTED:
					var summary string
					if p := ev.GetUserMetadata().GetSummary(); p != nil {
						if err := dc.FromPayload(p, &summary); err != nil {
							t.Fatalf("timer %d's summary: %v", ev.GetEventId(), err)
						}
					}
					timers = append(timers, timerKey(ev.GetTimerStartedEventAttributes().GetStartToFireTimeout().AsDuration(), summary))
				}
			}
			if !slices.Equal(log.activities, activities) {
				t.Errorf("activities scheduled differ from the recording:\nnow:      %q\nrecorded: %q", log.activities, activities)
			}
			if !slices.Equal(log.timers, timers) {
				t.Errorf("timers differ from the recording:\nnow:      %q\nrecorded: %q", log.timers, timers)
			}
		})
	}
}
