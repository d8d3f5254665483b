package api

import (
	"net/http"
	"net/http/httptest"
	"octflow/internal/testwait"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// countingCollector counts its collections and exposes their number as
// its one gauge. A collection waits for release, when set.
type countingCollector struct {
	desc    *prometheus.Desc
	mu      sync.Mutex
	n       int
	release chan struct{}
}

func newCountingCollector() *countingCollector {
	return &countingCollector{desc: prometheus.NewDesc("test_collections", "Collections so far.", nil, nil)}
}

func (c *countingCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *countingCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	c.n++
	n, release := c.n, c.release
	c.mu.Unlock()
	if release != nil {
		<-release
	} else {
		time.Sleep(20 * time.Millisecond) // a collection takes a while: scrapes pile up behind it
	}
	ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(n))
}

func (c *countingCollector) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// gathered is what one scrape of reg shows of test_collections.
func gathered(t *testing.T, reg prometheus.Gatherer) float64 {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil || len(fams) != 1 {
		t.Errorf("gather: %v %v", fams, err) // not Fatal: scrapes run in goroutines
		return -1
	}
	return fams[0].GetMetric()[0].GetGauge().GetValue()
}

// fakeClock is a settable now.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// scrapeAll runs n scrapes of reg at once and returns what each saw.
func scrapeAll(t *testing.T, reg prometheus.Gatherer, n int) []float64 {
	seen := make([]float64, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { seen[i] = gathered(t, reg) })
	}
	wg.Wait()
	return seen
}

// Any number of concurrent scrapes costs one collection per max age; a
// scrape during a collection is answered from the last one.
func TestCachedCollectorCollectsOncePerMaxAge(t *testing.T) {
	inner := newCountingCollector()
	clock := &fakeClock{t: time.Unix(1e9, 0)}
	reg := prometheus.NewRegistry()
	reg.MustRegister(newCachedCollector(inner, 10*time.Second, clock.now))

	for i, v := range scrapeAll(t, reg, 300) {
		if v != 1 {
			t.Fatalf("scrape %d saw collection %v, want 1", i, v)
		}
	}
	if n := inner.count(); n != 1 {
		t.Fatalf("300 concurrent scrapes collected %d times, want once", n)
	}
	steps := []struct {
		advance time.Duration
		want    float64
	}{
		{5 * time.Second, 1},  // fresh
		{4 * time.Second, 1},  // 9 s: fresh
		{2 * time.Second, 2},  // 11 s: stale, collected again
		{time.Second, 2},      // fresh again
		{time.Minute, 3},      // stale
		{10 * time.Second, 4}, // exactly the max age: stale
	}
	for _, s := range steps {
		clock.advance(s.advance)
		if v := gathered(t, reg); v != s.want {
			t.Errorf("after %s more: saw collection %v, want %v", s.advance, v, s.want)
		}
	}

	// A stale cache is served while the next collection runs.
	inner.mu.Lock()
	inner.release = make(chan struct{})
	inner.mu.Unlock()
	clock.advance(time.Minute)
	done := make(chan float64)
	go func() { done <- gathered(t, reg) }()
	testwait.Until(t, "the next collection starts", func() bool { return inner.count() == 5 })
	for i, v := range scrapeAll(t, reg, 50) {
		if v != 4 {
			t.Fatalf("scrape %d during a collection saw %v, want the last one (4)", i, v)
		}
	}
	close(inner.release)
	if v := <-done; v != 5 {
		t.Errorf("the collecting scrape saw %v, want 5", v)
	}
	if n := inner.count(); n != 5 {
		t.Errorf("%d collections, want 5", n)
	}
}

// The gateway's status metrics cost one round of Temporal calls per
// StatusMaxAge, however many scrapes come at once.
func TestGatewayStatusMetricsCostOneRoundOfTemporalCalls(t *testing.T) {
	gateway := func() (*fakeTemporal, *prometheus.Registry) {
		fake := newFakeTemporal()
		fake.latency = 5 * time.Millisecond
		reg := prometheus.NewRegistry()
		newServer(t, Config{Temporal: fake, Registerer: reg, StatusMaxAge: time.Hour})
		return fake, reg
	}
	fake, reg := gateway()
	if _, err := reg.Gather(); err != nil {
		t.Fatal(err)
	}
	round := fake.callCount()
	if round < 5 {
		t.Fatalf("one scrape made %d calls to Temporal; is the status collector registered?", round)
	}
	fake, reg = gateway()
	var wg sync.WaitGroup
	for range 300 {
		wg.Go(func() {
			if _, err := reg.Gather(); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if n := fake.callCount(); n != round {
		t.Errorf("300 concurrent scrapes made %d calls to Temporal, want one round (%d)", n, round)
	}
}

// The public port serves no /metrics: the process serves them on a
// listener of its own.
func TestGatewayServesNoMetrics(t *testing.T) {
	srv := newServer(t, Config{Temporal: newFakeTemporal(), Registerer: prometheus.NewRegistry()})
	rec := httptest.NewRecorder()
	srv.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusNotFound {
		t.Errorf("GET /metrics on the gateway: %d, want 404", rec.Code)
	}
}
