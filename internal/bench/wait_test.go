package bench

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
)

// countsClient answers visibility counts from a script: one per call,
// the last one again once the script is spent.
type countsClient struct {
	client.Client
	counts []int64
	calls  int
}

func (c *countsClient) CountWorkflow(context.Context, *workflowservice.CountWorkflowExecutionsRequest) (*workflowservice.CountWorkflowExecutionsResponse, error) {
	n := c.counts[min(c.calls, len(c.counts)-1)]
	c.calls++
	return &workflowservice.CountWorkflowExecutionsResponse{Count: n}, nil
}

func TestWaitExamsWaitsWhileTheBurstMovesAndStopsWhenItStalls(t *testing.T) {
	stall := 2500 * time.Millisecond // polled once a second
	cases := []struct {
		name     string
		counts   []int64
		wantErr  string
		minCalls int
	}{
		// Five seconds in all, longer than stall, but one more exam
		// finishes each second.
		{"a slow burst that keeps moving", []int64{0, 1, 2, 3, 4, 5}, "", 6},
		{"a burst that stops", []int64{0, 1, 2}, "2 of 5 exams of demo-campus finished, none in the last 2.5s", 4},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tc := &countsClient{counts: c.counts}
			err := waitExams(context.Background(), tc, []string{"demo-campus"}, 5, stall)
			switch {
			case c.wantErr == "" && err != nil:
				t.Fatalf("err = %v, want the burst waited for", err)
			case c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)):
				t.Fatalf("err = %v, want %q", err, c.wantErr)
			}
			if tc.calls < c.minCalls {
				t.Errorf("counted %d times, want at least %d", tc.calls, c.minCalls)
			}
		})
	}
}
