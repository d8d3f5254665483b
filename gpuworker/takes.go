package gpuworker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.uber.org/zap"

	"octflow/contract"
)

// Takes is a node's note of the stage attempts it holds: one small file
// per attempt in a directory of the node's own, written as the stage
// starts on the node (before its first heartbeat), rewritten with each
// heartbeat that says something new, and removed once the stage has
// returned. A node killed outright (OOM, kill -9, a driver fault) leaves
// the files of what it held behind; when it starts again on the same
// directory, HandBack gives each such attempt back: its last
// heartbeat, then a NodeLost failure that asks for a retry at once.
//
// It is there to shorten recovery: without it, the workflow hears of a
// lost attempt only after its heartbeat timeout (30 s in production).
// Temporal checks the attempt in each note's task token, so an attempt
// that ended meanwhile (completed, or timed out and retried elsewhere)
// is left alone. The files are not synced: a
// process killed keeps what it wrote; a machine that loses power loses
// the notes, and its attempts fall back to the heartbeat timeout.
type Takes struct {
	dir  string
	node string
	lock *os.File
	log  *zap.Logger
}

// takeNote is one held attempt, as a file says it.
type takeNote struct {
	TaskToken  []byte             `json:"taskToken"`
	WorkflowID string             `json:"workflowId"`
	ActivityID string             `json:"activityId"`
	Attempt    int32              `json:"attempt"`
	Beat       contract.Heartbeat `json:"beat"`
}

// OpenTakes opens node's take notes in dir, creating it. Only one process
// may hold a directory: a second node started with the same one (the same
// node ID twice on a machine) is refused.
func OpenTakes(dir, node string, log *zap.Logger) (*Takes, error) {
	if log == nil {
		log = zap.NewNop()
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("take notes: %w", err)
	}
	lock, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("take notes: %w", err)
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		lock.Close()
		return nil, fmt.Errorf("take notes %s: another node process holds them (is node %s running twice?): %w", dir, node, err)
	}
	return &Takes{dir: dir, node: node, lock: lock, log: log}, nil
}

// Close lets another process open the notes.
func (t *Takes) Close() error { return t.lock.Close() }

// Hold notes the stage attempt of ctx, with its first heartbeat
// (activities.TakeLog).
func (t *Takes) Hold(ctx context.Context, beat contract.Heartbeat) (note func(contract.Heartbeat), drop func()) {
	info := activity.GetInfo(ctx)
	return t.hold(takeNote{TaskToken: info.TaskToken, WorkflowID: info.WorkflowExecution.ID,
		ActivityID: info.ActivityID, Attempt: info.Attempt, Beat: beat})
}

func (t *Takes) hold(n takeNote) (note func(contract.Heartbeat), drop func()) {
	sum := sha256.Sum256(n.TaskToken)
	path := filepath.Join(t.dir, hex.EncodeToString(sum[:12])+".json")
	var mu sync.Mutex
	dropped := false
	write := func() {
		b, err := json.Marshal(n)
		if err == nil {
			tmp := path + ".tmp"
			if err = os.WriteFile(tmp, b, 0o600); err == nil {
				err = os.Rename(tmp, path) // a kill mid-write leaves the note before
			}
		}
		if err != nil {
			t.log.Warn("cannot note a held stage; if the node dies it waits out its heartbeat timeout",
				zap.String("stage", string(n.Beat.Stage)), zap.Error(err))
		}
	}
	write()
	note = func(b contract.Heartbeat) {
		mu.Lock()
		defer mu.Unlock()
		if !dropped {
			n.Beat = b
			write()
		}
	}
	drop = func() {
		mu.Lock()
		defer mu.Unlock()
		dropped = true
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			t.log.Warn("cannot remove a take note", zap.Error(err))
		}
	}
	return note, drop
}

// Completer is what HandBack needs of a Temporal client.
type Completer interface {
	RecordActivityHeartbeat(ctx context.Context, taskToken []byte, details ...any) error
	CompleteActivity(ctx context.Context, taskToken []byte, result any, err error) error
}

// HandBack gives Temporal back every attempt that an earlier run of the
// node left noted, and removes the notes; it returns how many Temporal
// took back. Call it before the node polls. A note it cannot read, or
// whose attempt has ended, is removed all the same: the attempt is then
// Temporal's to time out, as without notes.
func (t *Takes) HandBack(ctx context.Context, c Completer) int {
	paths, _ := filepath.Glob(filepath.Join(t.dir, "*.json"))
	tmps, _ := filepath.Glob(filepath.Join(t.dir, "*.tmp"))
	for _, p := range tmps {
		os.Remove(p)
	}
	handed := 0
	for _, p := range paths {
		var n takeNote
		b, err := os.ReadFile(p)
		if err == nil {
			err = json.Unmarshal(b, &n)
		}
		if err == nil && len(n.TaskToken) == 0 {
			err = errors.New("no task token")
		}
		if err == nil {
			err = t.handBack(ctx, c, n)
		}
		log := t.log.With(zap.String("workflowId", n.WorkflowID), zap.String("stage", string(n.Beat.Stage)),
			zap.Int32("attempt", n.Attempt))
		if err != nil {
			log.Info("a stage held before the node's restart was not handed back", zap.Error(err))
		} else {
			log.Info("handed back a stage held before the node's restart")
			handed++
		}
		os.Remove(p)
	}
	return handed
}

// handBackRetryDelay is when the exam workflow retries a handed-back
// attempt: at once (without a delay of its own the failure would wait
// the workflow's jittered backoff).
const handBackRetryDelay = time.Millisecond

func (t *Takes) handBack(ctx context.Context, c Completer, n takeNote) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	// The heartbeat first: the server keeps it with the attempt, so the
	// exam's history says where the lost attempt was and since when.
	if err := c.RecordActivityHeartbeat(ctx, n.TaskToken, n.Beat); err != nil {
		return fmt.Errorf("heartbeat: %w", err)
	}
	lost := temporal.NewApplicationErrorWithOptions(
		fmt.Sprintf("%s was lost with node %s, which was stopped abruptly and has started again", n.Beat.Stage, t.node),
		contract.ErrTypeNodeLost, temporal.ApplicationErrorOptions{
			NextRetryDelay: handBackRetryDelay,
			Details:        []any{contract.FailureDetails{Node: t.node}},
		})
	if err := c.CompleteActivity(ctx, n.TaskToken, nil, lost); err != nil {
		return fmt.Errorf("fail: %w", err)
	}
	return nil
}

// DefaultTakesDir is where node keeps its take notes unless told: a
// directory of its own under the system's temporary directory.
func DefaultTakesDir(node string) string {
	safe := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_', r == '.', r == '@':
			return r
		}
		return '_'
	}, node)
	return filepath.Join(os.TempDir(), "octflow-takes", "node-"+safe) // never "." or ".."

}
