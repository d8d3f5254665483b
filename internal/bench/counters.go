package bench

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Requests is what a burst asked of the object store and of the engine,
// per exam, summed over the system's process and the GPU nodes from
// their own counters (/metrics), from the burst's first upload to its
// last report. A node killed mid-burst takes its counts with it: with
// kills these are a lower bound.
type Requests struct {
	// ObjectStore is requests by kind (get, put, stat, list, delete,
	// ping); ObjectBytesRead and ObjectBytesWritten, the objects' bytes.
	ObjectStore        map[string]float64 `json:"objectStore"`
	ObjectBytesRead    float64            `json:"objectBytesRead"`
	ObjectBytesWritten float64            `json:"objectBytesWritten"`
	// Engine is the requests the Temporal SDK made of the engine, by
	// operation, long polls left out: RecordActivityTaskHeartbeat are
	// the heartbeats that reached the server.
	Engine map[string]float64 `json:"engine"`
}

// counterSet is a scrape's counters by name and label ("name{k=v}").
type counterSet map[string]float64

// scrapeCounters reads the object store's and the SDK's request
// counters from one /metrics page.
func scrapeCounters(ctx context.Context, url string) (counterSet, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scrape %s: %s", url, resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", url, err)
	}
	out := counterSet{}
	for name, label := range map[string]string{
		"octflow_object_store_requests_total": "op",
		"octflow_object_store_bytes_total":    "direction",
		"temporal_request":                    "operation",
		"octflow_stage_hedges_total":          "won",
	} {
		for _, m := range fams[name].GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label {
					key := strings.TrimSuffix(name, "_total") + "{" + l.GetValue() + "}"
					out[key] += m.GetCounter().GetValue()
				}
			}
		}
	}
	return out, nil
}

// add adds o to c.
func (c counterSet) add(o counterSet) {
	for k, v := range o {
		c[k] += v
	}
}

// requestsPerExam turns the counters' growth over a burst into Requests.
func requestsPerExam(before, after counterSet, exams int) Requests {
	r := Requests{ObjectStore: map[string]float64{}, Engine: map[string]float64{}}
	n := float64(max(exams, 1))
	for k, v := range after {
		d := (v - before[k]) / n
		name, label, _ := strings.Cut(strings.TrimSuffix(k, "}"), "{")
		switch name {
		case "octflow_object_store_requests":
			r.ObjectStore[label] = d
		case "octflow_object_store_bytes":
			if label == "read" {
				r.ObjectBytesRead = d
			} else {
				r.ObjectBytesWritten = d
			}
		case "temporal_request":
			r.Engine[label] = d
		}
	}
	return r
}

// freeAddr is a loopback address with a port free now, for a node's
// /metrics.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// scrapeAll sums the counters of every URL that answers within a few
// seconds (a node killed a moment ago does not).
func scrapeAll(ctx context.Context, urls []string) counterSet {
	total := counterSet{}
	for _, u := range urls {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		c, err := scrapeCounters(ctx, u)
		cancel()
		if err == nil {
			total.add(c)
		}
	}
	return total
}

// String is the printout: the object store's requests and bytes, and
// the engine requests that are not long polls.
func (r Requests) String() string {
	var b strings.Builder
	total := 0.0
	for _, v := range r.ObjectStore {
		total += v
	}
	fmt.Fprintf(&b, "object store per exam: %.1f requests (", total)
	for i, op := range []string{"get", "put", "stat", "list", "delete", "ping"} {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s %.1f", op, r.ObjectStore[op])
	}
	fmt.Fprintf(&b, "), %.1f KB read, %.1f KB written\n", r.ObjectBytesRead/1e3, r.ObjectBytesWritten/1e3)
	ops := make([]string, 0, len(r.Engine))
	for op := range r.Engine {
		if r.Engine[op] >= 0.005 {
			ops = append(ops, op)
		}
	}
	slices.Sort(ops)
	b.WriteString("engine requests per exam (the SDK's, long polls left out):")
	for _, op := range ops {
		fmt.Fprintf(&b, " %s %.2f", op, r.Engine[op])
	}
	return b.String()
}
