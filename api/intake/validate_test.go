package intake

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"octflow/api/problems"
	"octflow/imaging"
	"octflow/internal/testwait"
	"octflow/octdicom"
	"octflow/octdicom/hostile"
)

// TestTheByteBudget: takers are charged what they ask, wait while it
// does not fit, are admitted in order of arrival (a large one is not
// passed over by smaller ones), and one whose context ends is charged
// nothing.
func TestTheByteBudget(t *testing.T) {
	ctx := context.Background()
	b := newByteBudget(10)
	give6, err := b.take(ctx, 6)
	if err != nil || b.inUse() != 6 {
		t.Fatalf("take 6 of 10: %v, %d in use", err, b.inUse())
	}
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if _, err := b.take(short, 5); !errors.Is(err, context.DeadlineExceeded) || b.inUse() != 6 {
		t.Fatalf("take 5 with 4 free: %v, %d in use; want to wait, charged nothing", err, b.inUse())
	}
	// A waiter for 8, then one for 3 that would fit now: the 3 waits
	// its turn behind the 8 (and, 8 and 3 being over 10, until the 8
	// gives back).
	order := make(chan int64, 2)
	var wg sync.WaitGroup
	for i, n := range []int64{8, 3} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			give, err := b.take(ctx, n)
			if err != nil {
				t.Error(err)
				return
			}
			order <- n
			give()
		}()
		testwait.Until(t, "a waiter queues", func() bool { b.mu.Lock(); defer b.mu.Unlock(); return len(b.waiters) == i+1 })
	}
	select {
	case n := <-order:
		t.Fatalf("%d admitted while 6 of 10 are held and 8 wait first", n)
	case <-time.After(20 * time.Millisecond):
	}
	give6()
	wg.Wait()
	if first, second := <-order, <-order; first != 8 || second != 3 {
		t.Errorf("admitted %d then %d; want 8 then 3", first, second)
	}
	if b.inUse() != 0 {
		t.Errorf("%d in use after all gave back", b.inUse())
	}
}

// TestValidationIsChargedWhatTheScanDeclares: an upload is validated
// only with its scan's octdicom.Declared.Peak free in the budget (else
// 503 with Retry-After once Wait is over), and one that could never fit
// is refused 413 at once.
func TestValidationIsChargedWhatTheScanDeclares(t *testing.T) {
	var scan bytes.Buffer
	p := imaging.NewPhantom(imaging.PhantomOptions{Seed: 1, Frames: 3, Rows: 64, Cols: 16})
	if err := octdicom.WriteDICOM(&scan, p.Volume, octdicom.Header{SOPInstanceUID: "1.2"}); err != nil {
		t.Fatal(err)
	}
	head, err := octdicom.PreScan(bytes.NewReader(scan.Bytes()), int64(scan.Len()))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name           string
		budget, held   int64
		wait           time.Duration // Limits.Wait
		status         int
		wantRetryAfter bool
	}{
		{"fits", 2 * head.Peak, head.Peak, 50 * time.Millisecond, 0, false},
		{"must wait", 2 * head.Peak, head.Peak + 1, 50 * time.Millisecond, http.StatusServiceUnavailable, true},
		// A Wait far longer than any intake under load: one that waited
		// for its turn would show it plainly.
		{"never fits", head.Peak - 1, 0, time.Minute, http.StatusRequestEntityTooLarge, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			in := intakeFor(t, Limits{ValidationBytes: c.budget, Wait: c.wait})
			give, err := in.budget.take(context.Background(), c.held)
			if err != nil {
				t.Fatal(err)
			}
			defer give()
			start := time.Now()
			rec, err := submitTo(in, scan.Bytes())
			var prob *problems.Problem
			switch {
			case c.status == 0 && err != nil:
				t.Fatalf("intake: %v", err)
			case c.status != 0 && (!errors.As(err, &prob) || prob.Status != c.status):
				t.Fatalf("intake: %v, want %d", err, c.status)
			}
			if got := rec.Header().Get("Retry-After") != ""; got != c.wantRetryAfter {
				t.Errorf("Retry-After set %v, want %v", got, c.wantRetryAfter)
			}
			if c.status == http.StatusRequestEntityTooLarge && time.Since(start) >= c.wait {
				t.Errorf("a scan that never fits waited %v for its turn", time.Since(start))
			}
			if in.budget.inUse() != c.held {
				t.Errorf("%d bytes in use after the intake, want the %d held", in.budget.inUse(), c.held)
			}
		})
	}
}

// TestHostileScansAreRefusedBeforeTheBudget: every hostile file is a
// 422 invalid volume, charged nothing.
func TestHostileScansAreRefusedBeforeTheBudget(t *testing.T) {
	in := intakeFor(t, Limits{})
	for _, f := range hostile.Files() {
		if len(f.Data) > 4<<20 {
			continue
		}
		_, err := submitTo(in, f.Data)
		var prob *problems.Problem
		if !errors.As(err, &prob) || prob.Status != http.StatusUnprocessableEntity || !strings.Contains(prob.Detail, "invalid OCT volume") {
			t.Errorf("%s: %v, want 422 invalid volume", f.Name, err)
		}
	}
	if in.budget.inUse() != 0 {
		t.Errorf("%d bytes in use", in.budget.inUse())
	}
}

// intakeFor is an intake of north's devices within limits, for scans of
// up to 32 MiB.
func intakeFor(t testing.TB, limits Limits) *Intake {
	return newIntake(t, Config{Campuses: []string{"north"}, MaxScanBytes: 32 << 20, Uploads: limits})
}

// submitTo runs the intake of one upload of scan.
func submitTo(in *Intake, scan []byte) (*httptest.ResponseRecorder, error) {
	rec, up, clean, err := take(in, "north", Meta{ExamID: "E-1"}, scan)
	up.Close()
	clean.Close()
	return rec, err
}

// BenchmarkHostileCorpusPeakRSS sends the whole hostile corpus at once,
// each file from its own goroutine, through the intake, b.N times, and
// reports the process's peak RSS (VmHWM, reset first where the kernel
// allows) over it.
func BenchmarkHostileCorpusPeakRSS(b *testing.B) {
	in := intakeFor(b, Limits{Validating: 64})
	files := hostile.Files()
	_ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) // reset VmHWM
	start := procStatus(b, "VmRSS")
	for b.Loop() {
		var wg sync.WaitGroup
		for _, f := range files {
			wg.Go(func() {
				if _, err := submitTo(in, f.Data); err == nil {
					b.Errorf("%s accepted", f.Name)
				}
			})
		}
		wg.Wait()
	}
	b.ReportMetric(float64(start)/1024, "start-RSS-MiB")
	b.ReportMetric(float64(procStatus(b, "VmHWM"))/1024, "peak-RSS-MiB")
}

// procStatus is a /proc/self/status field in kB.
func procStatus(b *testing.B, field string) int64 {
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		b.Skip("no /proc/self/status")
	}
	for line := range strings.Lines(string(status)) {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				b.Fatal(err)
			}
			return n
		}
	}
	b.Fatalf("no %s in /proc/self/status", field)
	return 0
}
