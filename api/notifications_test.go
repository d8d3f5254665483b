package api

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"octflow/api/auth"
	"octflow/contract"
	"octflow/internal/testwait"
)

// streamTokens are clinician tokens of the campus north; "both" may also
// read the campus south.
func streamTokens(t *testing.T) *auth.Tokens {
	t.Helper()
	tokens, err := auth.NewTokens([]auth.TokenEntry{
		{SHA256: auth.HashToken("clin-1"), Principal: auth.Principal{Name: "c1", Role: auth.RoleClinician, Campus: "north"}},
		{SHA256: auth.HashToken("clin-2"), Principal: auth.Principal{Name: "c2", Role: auth.RoleClinician, Campus: "north"}},
		{SHA256: auth.HashToken("both"), Principal: auth.Principal{Name: "b", Role: auth.RoleClinician, Campus: "north", Campuses: []string{"south"}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return tokens
}

// streamServer serves a gateway on fake over HTTP.
func streamServer(t *testing.T, fake *fakeTemporal, poll time.Duration, limits StreamLimits) (*Server, *httptest.Server) {
	t.Helper()
	srv := newServer(t, Config{Temporal: fake, Tokens: streamTokens(t), NotifyPoll: poll, Streams: limits})
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	return srv, ts
}

// stream is one open GET /v1/notifications.
type stream struct {
	t      *testing.T
	resp   *http.Response
	cancel context.CancelFunc
	events chan contract.ReportReadyEvent
}

// openStream opens an event stream with token (and Last-Event-ID unless
// empty) and returns it with the answer's status.
func openStream(t *testing.T, base, token, query, lastID string) (*stream, *http.Response) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/notifications"+query, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	// A stream's answer (its status and headers) comes at once or never:
	// a gateway that opens a stream it should refuse, and then holds the
	// headers back, fails here instead of hanging the package.
	answered := make(chan struct{})
	deadline := time.AfterFunc(10*time.Second, func() {
		select {
		case <-answered:
		default:
			cancel()
		}
	})
	resp, err := http.DefaultClient.Do(req)
	close(answered)
	deadline.Stop()
	if err != nil {
		cancel()
		t.Fatalf("GET /v1/notifications%s: no answer within 10 s: %v", query, err)
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		cancel()
		return nil, resp
	}
	s := &stream{t: t, resp: resp, cancel: cancel, events: make(chan contract.ReportReadyEvent, 2000)}
	t.Cleanup(s.close)
	go func() {
		defer close(s.events)
		sc := bufio.NewScanner(resp.Body)
		var id int64
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "id: "):
				id, _ = strconv.ParseInt(strings.TrimPrefix(line, "id: "), 10, 64)
			case strings.HasPrefix(line, "data: "):
				var e contract.ReportReadyEvent
				if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &e); err != nil || e.Seq != id {
					t.Errorf("event %d: %q (%v)", id, line, err)
				}
				s.events <- e
			}
		}
	}()
	return s, resp
}

func (s *stream) close() {
	s.cancel()
	s.resp.Body.Close()
}

// next returns the stream's next n events' exam IDs.
func (s *stream) next(n int) []string {
	s.t.Helper()
	var out []string
	timeout := time.After(10 * time.Second)
	for len(out) < n {
		select {
		case e, ok := <-s.events:
			if !ok {
				s.t.Fatalf("stream ended after %v", out)
			}
			out = append(out, e.ExamID)
		case <-timeout:
			s.t.Fatalf("got %v, want %d events", out, n)
		}
	}
	return out
}

// quiet fails if the stream delivers an event within a short while.
func (s *stream) quiet() {
	s.t.Helper()
	select {
	case e := <-s.events:
		s.t.Errorf("unexpected event %+v", e)
	case <-time.After(100 * time.Millisecond):
	}
}

func (n *notifier) hubCount() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.hubs)
}

func (n *notifier) streams() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.total
}

// However many streams a campus has, its inbox is read once per poll by
// one hub, started with the first stream and stopped with the last.
func TestEventStreamsOfACampusShareOneReadingOfItsInbox(t *testing.T) {
	fake := newFakeTemporal()
	fake.publish("north", "n1", "n2", "n3")
	fake.publish("south", "s1")
	// One reading per hub: the next poll is an hour away.
	srv, ts := streamServer(t, fake, time.Hour, StreamLimits{Total: 100, PerToken: 100})
	var streams []*stream
	for i := range 50 {
		token, query, want := "clin-1", "", "n1 n2 n3"
		if i%5 == 0 {
			token, query, want = "both", "?campus=south", "s1"
		}
		s, resp := openStream(t, ts.URL, token, query, "")
		if s == nil {
			t.Fatalf("stream %d answered %d", i, resp.StatusCode)
		}
		if got := strings.Join(s.next(strings.Count(want, " ")+1), " "); got != want {
			t.Fatalf("stream %d got %s, want %s", i, got, want)
		}
		streams = append(streams, s)
	}
	if n, s := fake.inboxQueries("north"), fake.inboxQueries("south"); n != 1 || s != 1 {
		t.Errorf("50 streams read the inboxes %d (north) and %d (south) times, want once each", n, s)
	}
	if n := srv.notify.hubCount(); n != 2 {
		t.Errorf("%d hubs for two campuses", n)
	}
	for _, s := range streams {
		s.close()
	}
	testwait.Until(t, "the last stream's leaving stops its campus's hub", func() bool { return srv.notify.hubCount() == 0 })
	s, _ := openStream(t, ts.URL, "clin-2", "", "")
	if got := strings.Join(s.next(3), " "); got != "n1 n2 n3" {
		t.Errorf("a stream after the hub stopped got %s", got)
	}
	if n := fake.inboxQueries("north"); n != 2 {
		t.Errorf("the north inbox was read %d times, want 2 (a new hub for the new first stream)", n)
	}
}

// A stream resumes after its Last-Event-ID, also when it shares its hub
// with streams that resume elsewhere, and gets new events as they come.
func TestEventStreamsResumeAfterLastEventID(t *testing.T) {
	fake := newFakeTemporal()
	fake.publish("north", "e1", "e2", "e3")
	_, ts := streamServer(t, fake, 10*time.Millisecond, StreamLimits{})
	cases := []struct {
		lastID string
		want   string // the events at once
	}{
		{"", "e1 e2 e3"},
		{"0", "e1 e2 e3"},
		{"1", "e2 e3"},
		{"2", "e3"},
		{"3", ""},
		{"99", ""},
	}
	var streams []*stream
	for _, c := range cases {
		s, resp := openStream(t, ts.URL, "clin-1", "", c.lastID)
		if s == nil {
			t.Fatalf("Last-Event-ID %q: %d", c.lastID, resp.StatusCode)
		}
		if c.want != "" {
			if got := strings.Join(s.next(strings.Count(c.want, " ")+1), " "); got != c.want {
				t.Errorf("Last-Event-ID %q: got %s, want %s", c.lastID, got, c.want)
			}
		}
		s.quiet()
		streams = append(streams, s)
	}
	fake.publish("north", "e4")
	for i, s := range streams[:len(streams)-1] {
		if got := strings.Join(s.next(1), " "); got != "e4" {
			t.Errorf("Last-Event-ID %q: then got %s, want e4", cases[i].lastID, got)
		}
	}
	streams[len(streams)-1].quiet() // Last-Event-ID 99 is still ahead

	for _, bad := range []string{"x", "-1"} {
		if _, resp := openStream(t, ts.URL, "clin-1", "", bad); resp.StatusCode != http.StatusBadRequest {
			t.Errorf("Last-Event-ID %q: %d, want 400", bad, resp.StatusCode)
		}
	}
}

// A token holds at most PerToken streams and the gateway Total; a
// refused stream gets 429 problem+json with Retry-After, and a stream
// that ends gives its place back.
func TestEventStreamsAreCappedPerTokenAndInTotal(t *testing.T) {
	fake := newFakeTemporal()
	srv, ts := streamServer(t, fake, time.Hour, StreamLimits{Total: 3, PerToken: 2, RetryAfter: 7 * time.Second})
	open := func(token string, want int) *stream {
		t.Helper()
		s, resp := openStream(t, ts.URL, token, "", "")
		if resp.StatusCode != want {
			t.Fatalf("%s: %d, want %d", token, resp.StatusCode, want)
		}
		if want == http.StatusTooManyRequests {
			if ra, ct := resp.Header.Get("Retry-After"), resp.Header.Get("Content-Type"); ra != "7" || ct != "application/problem+json" {
				t.Errorf("429 with Retry-After %q, Content-Type %q", ra, ct)
			}
		}
		return s
	}
	first := open("clin-1", http.StatusOK)
	open("clin-1", http.StatusOK)
	open("clin-1", http.StatusTooManyRequests) // over the token's 2
	open("clin-2", http.StatusOK)
	open("clin-2", http.StatusTooManyRequests) // over the gateway's 3
	first.close()
	testwait.Until(t, "a closed stream gives its place back", func() bool { return srv.notify.streams() == 2 })
	open("clin-2", http.StatusOK)
	open("both", http.StatusTooManyRequests)
}

// An event stream outlives the server's read and write timeouts, which
// bound every other request.
func TestEventStreamsOutliveTheServersTimeouts(t *testing.T) {
	fake := newFakeTemporal()
	fake.publish("north", "e1")
	// A write's own deadline is lifted once it is done: a quiet stream
	// outlives it too.
	srv := newServer(t, Config{Temporal: fake, Tokens: streamTokens(t), NotifyPoll: 10 * time.Millisecond,
		Streams: StreamLimits{WriteTimeout: 50 * time.Millisecond}})
	ts := httptest.NewUnstartedServer(srv)
	ts.Config.ReadTimeout, ts.Config.WriteTimeout = 50*time.Millisecond, 50*time.Millisecond
	ts.Start()
	t.Cleanup(ts.Close) // after the stream's close: Close waits for it
	s, resp := openStream(t, ts.URL, "clin-1", "", "")
	if s == nil {
		t.Fatalf("stream answered %d", resp.StatusCode)
	}
	s.next(1)
	time.Sleep(300 * time.Millisecond) // six times every timeout
	fake.publish("north", "e2")
	if got := s.next(1); got[0] != "e2" {
		t.Errorf("got %v", got)
	}
}

// A client that stops reading is let go once a write to it has waited
// WriteTimeout: its stream ends and gives its place back.
func TestEventStreamsLetGoOfAClientThatStopsReading(t *testing.T) {
	fake := newFakeTemporal()
	srv, ts := streamServer(t, fake, 10*time.Millisecond, StreamLimits{WriteTimeout: 100 * time.Millisecond})
	conn, err := net.Dial("tcp", strings.TrimPrefix(ts.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "GET /v1/notifications HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer clin-1\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, "the stream opens", func() bool { return srv.notify.streams() == 1 })
	// Far more than the connection's buffers hold, never read.
	big := strings.Repeat("x", 64<<10)
	for range 400 {
		fake.publish("north", big)
	}
	testwait.Until(t, "the stalled stream ends", func() bool { return srv.notify.streams() == 0 })
}

func TestAStreamOfAnotherCampusIsRefusedAsIfItDidNotExist(t *testing.T) {
	fake := newFakeTemporal()
	_, ts := streamServer(t, fake, 10*time.Millisecond, StreamLimits{})
	fake.publish("south", "s1")
	for _, tc := range []struct{ name, token, query string }{
		{"a campus of another hospital", "clin-1", "?campus=south"},
		{"a campus that does not exist", "clin-1", "?campus=nowhere"},
		{"not a campus name", "clin-1", "?campus=NO%20SUCH"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, resp := openStream(t, ts.URL, tc.token, tc.query, "")
			if s != nil {
				t.Fatalf("a clinician of north opened the event stream of %s", tc.query)
			}
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != http.StatusNotFound {
				t.Fatalf("%s: %d, want 404 (as a campus that does not exist)", tc.query, resp.StatusCode)
			}
			if strings.Contains(strings.ToLower(string(body)), "south") || strings.Contains(string(body), "nowhere") {
				t.Errorf("the refusal names the campus asked for: %s", body)
			}
		})
	}
}
