package contract

import (
	"encoding/json"
	"strings"
	"time"

	"octflow/exam"
)

// ExamInput starts an exam's pipeline: the submission and the policy it
// runs under, both resolved and validated by the gateway. The workflow
// trusts them as given; nothing is re-defaulted on replay.
type ExamInput struct {
	Submission exam.Submission `json:"submission"`
	Policy     exam.Policy     `json:"policy"`
	// Rerun is set on an admin's new run of the exam: of a DEAD exam,
	// or of a COMPLETED one whose report it supersedes.
	Rerun *Rerun `json:"rerun,omitempty"`
	// Export is set when the exam's campus sends results to a PACS: the
	// pipeline starts the exam's ExportWorkflow once the report exists.
	Export bool `json:"export,omitempty"`
}

// Rerun says which run a new run of the exam follows, and who asked.
type Rerun struct {
	PreviousRunID string    `json:"previousRunId"`
	By            string    `json:"by"`
	At            time.Time `json:"at"`
	// Supersedes is the run whose report this run's report replaces, on
	// an admin's explicit supersede (the only way a report is replaced):
	// the report stage overwrites that run's report and no other, the
	// exam's review and export follow the new report. Empty on a rerun
	// of a DEAD exam whose report never existed. A rerun of a DEAD
	// superseding run carries it on.
	Supersedes string `json:"supersedes,omitempty"`
	// Reason is the admin's reason for the supersede (at most
	// MaxSupersedeReason bytes), which the new report states.
	Reason string `json:"reason,omitempty"`
}

// MaxSupersedeReason bounds a supersede's reason, in bytes.
const MaxSupersedeReason = 200

// Superseding reports whether the run replaces another run's report.
func (r *Rerun) Superseding() bool { return r != nil && r.Supersedes != "" }

// ExamResult is what the pipeline returns once the report exists.
type ExamResult struct {
	ExamID  string       `json:"examId"`
	Report  ReportKeys   `json:"report"`
	Summary exam.Summary `json:"summary"`
	// NotifyFailure is the report-ready push's last try when the push
	// failed for good (the report stands; the exam is COMPLETED).
	NotifyFailure *Attempt `json:"notifyFailure,omitempty"`
}

// ReportKeys point at an exam's report objects.
type ReportKeys struct {
	JSONKey string `json:"jsonKey"`
	PDFKey  string `json:"pdfKey"`
}

// Outcome is how one attempt of a stage ended, as the workflow
// classified it.
type Outcome string

// The outcomes of an attempt.
const (
	// Done: the stage did its work.
	Done Outcome = "done"
	// Failed: the stage failed by its own error; it spends one of the
	// policy's MaxAttempts and is retried after a jittered backoff while
	// any are left.
	Failed Outcome = "failed"
	// Lost: the attempt ended without an answer (its node died or hung:
	// heartbeat or stage timeout, or the node handed it back on restart);
	// it spends one of the policy's LostAttempts, then MaxAttempts.
	Lost Outcome = "lost"
	// Unreachable: the stage could not reach a backing service; it is
	// rescheduled after a backoff for up to the policy's InfraRetryFor
	// without spending attempts.
	Unreachable Outcome = "unreachable"
	// Aged: no node took the stage within its bucket's aging threshold;
	// it is scheduled again one bucket up.
	Aged Outcome = "aged"
	// Unclaimed: the node that holds the exam's data did not take the
	// stage in time; it goes back to the shared queue.
	Unclaimed Outcome = "unclaimed"
	// Refused: the stage failed for good (invalid input, a panic, a
	// report that exists): no retry can help.
	Refused Outcome = "refused"
	// Superseded: the attempt ran on a degraded node past its deadline,
	// another run of the stage (a hedge) finished first, and this one was
	// cancelled. It spends nothing.
	Superseded Outcome = "superseded"
)

// Attempt is one attempt of a stage: where it was scheduled, where it
// ran and how it ended.
type Attempt struct {
	Stage exam.Stage `json:"stage"`
	// Try counts the stage's schedules in this run, from 1 (every
	// outcome counts, aging and affinity fallbacks too); the activity ID
	// is the stage and its try (ActivityID).
	Try int32 `json:"try"`
	// Number is the attempt this try was: one more than the tries of
	// the stage before it that spent an attempt (Outcome.Spends).
	Number int32         `json:"number"`
	Queue  string        `json:"queue"`
	Bucket exam.Priority `json:"bucket,omitempty"`
	// Node is the node that ran it, when known, and GPU the GPU it
	// computed on (a completed GPU stage).
	Node        string    `json:"node,omitempty"`
	GPU         *int      `json:"gpu,omitempty"`
	Outcome     Outcome   `json:"outcome"`
	FailureType string    `json:"failureType,omitempty"`
	Failure     string    `json:"failure,omitempty"`
	ScheduledAt time.Time `json:"scheduledAt"`
	EndedAt     time.Time `json:"endedAt"`
	// RetryAfter is the wait before the stage's next try (0: at once).
	RetryAfter time.Duration `json:"retryAfter,omitempty"`
	// Hedge says why this try was scheduled beside the one before it,
	// still in flight on a degraded node ("": it was not a hedge).
	Hedge string `json:"hedge,omitempty"`
}

// Spends reports whether a try that ended so spends one of the stage's
// attempts: a failure of its own or a lost node. Aging, a fallback from
// the node that holds the data and an unreachable backing service do not.
func (o Outcome) Spends() bool { return o == Failed || o == Lost }

// RetrySummary is what the exam workflow names the timer of a retry's
// wait by: how the try it follows ended, as JSON (its stage, attempt
// number, outcome, failure type and node). The wait is where a retried
// try's record is in the history while the exam is in RETRY_WAIT, so
// the exam's timeline reads it there (AttemptOfRetrySummary) instead of
// classifying the failure again; the failure's text stays in the
// try's own event. Short, since Temporal bounds a summary (400 bytes by
// default, sealed by the payload codec): the type and the node are cut
// to maxNoteField bytes. "" only if the note could not be marshalled.
func RetrySummary(a Attempt) string {
	b, err := json.Marshal(retryNote{Stage: a.Stage, Number: a.Number, Outcome: a.Outcome,
		Type: cut(a.FailureType, maxNoteField), Node: cut(a.Node, maxNoteField)})
	if err != nil {
		return ""
	}
	return string(b)
}

// AttemptOfRetrySummary reads a retry timer's summary (RetrySummary)
// back into the attempt it names; false for any other timer's.
func AttemptOfRetrySummary(summary string) (Attempt, bool) {
	var n retryNote
	if json.Unmarshal([]byte(summary), &n) != nil || n.Stage == "" || n.Outcome == "" || n.Outcome == Done {
		return Attempt{}, false
	}
	return Attempt{Stage: n.Stage, Number: n.Number, Outcome: n.Outcome, FailureType: n.Type, Node: n.Node}, true
}

// retryNote is the part of an attempt a retry wait's timer carries.
type retryNote struct {
	Stage   exam.Stage `json:"stage"`
	Number  int32      `json:"attempt"`
	Outcome Outcome    `json:"outcome"`
	Type    string     `json:"type,omitempty"`
	Node    string     `json:"node,omitempty"`
}

// maxNoteField bounds a retry note's free-text fields, in bytes.
const maxNoteField = 32

// cut is s shortened to at most n bytes, without a broken rune at its end.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "")
}
