package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"octflow/api"
	"octflow/api/intake"
	"octflow/internal/devstack"
	"octflow/internal/devsystem"
	"octflow/lifecycle"
	"octflow/octdicom/hostile"
)

// The bounds the siege test holds `octflow dev` to (docs/security.md
// states them).
const (
	// siegePeakRSS bounds the whole process's peak memory: the embedded
	// Temporal server, S3 endpoint, gateway, workers and a GPU node.
	siegePeakRSS = 1 << 30
	// siegeReadsPerSecond bounds the Temporal reads the gateway's
	// notification streams and metrics make a second (queries and
	// visibility lists and counts), whatever the number of streams and
	// scrapes.
	siegeReadsPerSecond = 25
)

// TestAHostileClientLeavesOctflowDevStanding runs, against a real
// `octflow dev` process, at once: the hostile corpus with a device token
// and with no token at all, 500 event streams per client, 300
// concurrent codec sign-ins with a wrong token, and 300 concurrent
// scrapes of the metrics listener; meanwhile another campus's device
// sends a real exam. The process must stay up, answer every request
// with a deliberate status, complete the other exam, stay under
// siegePeakRSS, and keep its Temporal reads under siegeReadsPerSecond.
func TestAHostileClientLeavesOctflowDevStanding(t *testing.T) {
	if testing.Short() {
		t.Skip("starts octflow dev and loads it")
	}
	dev := startDev(t, 1)
	cmd, base, metrics, secrets := dev.cmd, dev.base, dev.metrics, dev.secrets
	if len(secrets.Devices) < 2 || len(secrets.Clinicians) < 2 {
		t.Fatalf("dev tokens: %+v", secrets)
	}
	attacker, other := secrets.Devices[0], secrets.Devices[1]
	var otherClinician string
	for _, c := range secrets.Clinicians {
		if c.Campus == other.Campus {
			otherClinician = c.Token
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	readsBefore, start := temporalReads(t, metrics), time.Now()
	rssBefore := peakRSS(t, cmd.Process.Pid)
	var (
		mu     sync.Mutex
		counts = map[string]map[int]int{} // what each kind of request was answered
		wg     sync.WaitGroup
	)
	note := func(kind string, code int) {
		mu.Lock()
		defer mu.Unlock()
		if counts[kind] == nil {
			counts[kind] = map[int]int{}
		}
		counts[kind][code]++
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	// Streams are held open until the siege ends, then cut.
	streams, cutStreams := context.WithCancel(ctx)
	defer cutStreams()
	for _, token := range []string{attacker.Token, "", secrets.Clinician} {
		who := map[string]string{attacker.Token: "device", "": "anonymous", secrets.Clinician: "clinician"}[token]
		for _, f := range hostile.Files() {
			wg.Go(func() {
				// A determined attacker sends again while told to wait, so
				// every file of the corpus reaches the gateway's checks.
				c := &api.Client{Base: base, Token: token}
				for try := 0; ; try++ {
					_, code, _ := c.Submit(ctx, intake.Meta{ExamID: "siege-" + f.Name}, f.Data)
					if (code != http.StatusTooManyRequests && code != http.StatusServiceUnavailable) || try == 100 {
						note(who+" upload", code)
						return
					}
					time.Sleep(100 * time.Millisecond)
				}
			})
		}
		for range 500 {
			wg.Go(func() {
				req, _ := http.NewRequestWithContext(streams, http.MethodGet, base+"/v1/notifications", nil)
				if token != "" {
					req.Header.Set("Authorization", "Bearer "+token)
				}
				resp, err := client.Do(req)
				if err != nil {
					note(who+" stream", -1)
					return
				}
				defer resp.Body.Close()
				note(who+" stream", resp.StatusCode)
				io.Copy(io.Discard, resp.Body) // held until the siege ends
			})
		}
	}
	for range 300 {
		wg.Go(func() {
			form := url.Values{"token": {"not-a-token"}}.Encode()
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/codec/login", strings.NewReader(form))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			note("login", do(client, req))
		})
		wg.Go(func() {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, metrics, nil)
			note("scrape", do(client, req))
		})
	}
	// Meanwhile another campus's device sends a real exam.
	_, scan := phantomDICOM(t, tiny(241))
	otherDevice := &api.Client{Base: base, Token: other.Token}
	for try := 0; ; try++ {
		_, code, err := otherDevice.Submit(ctx, intake.Meta{ExamID: "bystander-1"}, scan)
		if code == http.StatusAccepted || code == http.StatusOK {
			break
		}
		if code != http.StatusServiceUnavailable || try == 20 {
			t.Fatalf("the other campus's exam under siege: %d %v", code, err)
		}
		time.Sleep(time.Second)
	}
	st := waitExam(t, &api.Client{Base: base, Token: otherClinician}, "bystander-1", 2*time.Minute,
		func(s *api.ExamStatus) bool { return s.State.Terminal() })
	if st.State != lifecycle.Completed {
		t.Errorf("the other campus's exam ended %s: %+v", st.State, st.LastFailure)
	}
	time.Sleep(3 * time.Second) // streams held a while: their polls count
	elapsed := time.Since(start)
	reads := temporalReads(t, metrics) - readsBefore
	cutStreams()
	wg.Wait()
	rssAfter := peakRSS(t, cmd.Process.Pid)

	if err := cmd.Process.Signal(syscall.Signal(0)); err != nil {
		t.Fatalf("octflow dev died: %v", err)
	}
	t.Logf("answers: %v", counts)
	t.Logf("peak RSS %d MiB before the siege, %d MiB after (bound %d MiB); Temporal reads %.0f in %s: %.1f/s (bound %d/s)",
		rssBefore>>20, rssAfter>>20, siegePeakRSS>>20, reads, elapsed.Round(time.Second), reads/elapsed.Seconds(), siegeReadsPerSecond)
	if rssAfter > siegePeakRSS {
		t.Errorf("peak RSS %d MiB, over the bound of %d MiB", rssAfter>>20, siegePeakRSS>>20)
	}
	if rate := reads / elapsed.Seconds(); rate > siegeReadsPerSecond {
		t.Errorf("%.1f Temporal reads a second under siege, over the bound of %d", rate, siegeReadsPerSecond)
	}
	// Every request got a deliberate answer.
	allowed := map[string][]int{
		"device upload":    {http.StatusUnprocessableEntity, http.StatusRequestEntityTooLarge, http.StatusBadRequest},
		"anonymous upload": {http.StatusUnauthorized},
		"clinician upload": {http.StatusForbidden},
		"device stream":    {http.StatusForbidden},
		"anonymous stream": {http.StatusUnauthorized},
		"clinician stream": {http.StatusOK, http.StatusTooManyRequests},
		"login":            {http.StatusUnauthorized, http.StatusTooManyRequests},
		"scrape":           {http.StatusOK},
	}
	for kind, got := range counts {
		for code, n := range got {
			if !containsInt(allowed[kind], code) {
				t.Errorf("%d %s requests answered %d", n, kind, code)
			}
		}
	}
	if n := counts["clinician stream"][http.StatusOK]; n == 0 || n > 8 {
		t.Errorf("%d of one token's 500 streams were held open, want 1 to 8", n)
	}
	if n := counts["device upload"][http.StatusUnprocessableEntity]; n < len(hostile.Files())/2 {
		t.Errorf("only %d hostile uploads were examined and refused 422", n)
	}
}

func containsInt(xs []int, x int) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// do sends req and returns its status (-1: no answer), reading the body.
func do(c *http.Client, req *http.Request) int {
	resp, err := c.Do(req)
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}

func waitUp(t *testing.T, url string) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if resp, err := http.Get(url); err == nil {
			resp.Body.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatal(url + " did not come up")
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// temporalReads sums the Temporal calls the process made that read what
// Temporal holds for the gateway — workflow queries and visibility
// lists and counts — from the SDK's request counter.
func temporalReads(t *testing.T, metricsURL string) float64 {
	t.Helper()
	resp, err := http.Get(metricsURL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var sum float64
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "temporal_request{") && !strings.HasPrefix(line, "temporal_request_total{") {
			continue
		}
		for _, op := range []string{"QueryWorkflow", "ListWorkflow", "CountWorkflow", "ScanWorkflow"} {
			if strings.Contains(line, `operation="`+op) {
				f := strings.Fields(line)
				v, err := strconv.ParseFloat(f[len(f)-1], 64)
				if err != nil {
					t.Fatalf("metric line %q: %v", line, err)
				}
				sum += v
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(fmt.Errorf("read metrics: %w", err))
	}
	return sum
}

// devProcess is a real `octflow dev` process on free loopback ports,
// its data dir the test's own.
type devProcess struct {
	cmd           *exec.Cmd
	base, metrics string // the api's URL and the metrics listener's /metrics
	secrets       devsystem.Secrets
}

// startDev starts `octflow dev` with gpuNodes simulated GPU nodes, waits
// until it answers, and stops it (SIGTERM) when the test ends, showing
// its output if the test failed.
func startDev(t *testing.T, gpuNodes int) *devProcess {
	t.Helper()
	dir := t.TempDir()
	addrs, err := devstack.FreeAddrs("127.0.0.1", 4)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "OCTFLOW_TEST_AS_MAIN=dev --data-dir "+dir+" --api-addr "+addrs[0]+
		" --temporal-addr "+addrs[1]+" --s3-addr "+addrs[2]+" --metrics-addr "+addrs[3]+
		" --ui-addr off --gpu-nodes "+strconv.Itoa(gpuNodes)+" --log-level warn")
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
		if t.Failed() {
			t.Logf("octflow dev:\n%s", out.String())
		}
	})
	d := &devProcess{cmd: cmd, base: "http://" + addrs[0], metrics: "http://" + addrs[3] + "/metrics"}
	waitUp(t, d.base+"/healthz")
	b, err := os.ReadFile(filepath.Join(dir, "dev-tokens.json"))
	if err != nil || json.Unmarshal(b, &d.secrets) != nil {
		t.Fatalf("dev tokens: %v", err)
	}
	return d
}
