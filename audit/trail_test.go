package audit

import (
	"bytes"
	"encoding/base64"
	"encoding/xml"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"

	"octflow/audit/audittest"
)

var testSource = Source{ID: "api@test", Site: "Test Hospital", Host: "test-host", PID: 4242}

// reportRead is the event of a clinician reading an exam's report.
func reportRead(i int) Event {
	return Event{ID: PatientRecord, Action: Read, Outcome: Success,
		User: User{ID: "dr-lee", Role: "clinician", Address: "10.0.0.7"},
		Objects: []Object{{ID: fmt.Sprintf("north/exam-%d", i), IDType: Code{Code: "exam", System: "octflow", Meaning: "Exam"},
			Type: 2, Role: 3, Details: []Detail{{Type: "requestId", Value: "r1"}}}}}
}

// unreachableTrail is a trail of a spool of size bytes whose collector
// never answers: everything it takes stays spooled.
func unreachableTrail(t *testing.T, size int64) *Trail {
	t.Helper()
	tr, err := Open(Config{Collector: "127.0.0.1:1", SpoolDir: t.TempDir(), SpoolBytes: size, MinBackoff: time.Hour, MaxBackoff: time.Hour},
		testSource, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	return tr
}

// readByAnother is reportRead by a clinician of its own: no one caller
// holds more than its share of the spool.
func readByAnother(i int) Event {
	ev := reportRead(i)
	ev.User.ID = fmt.Sprintf("dr-%d", i)
	return ev
}

func openTrail(t *testing.T, p audittest.PKI, addr, spool string, tweak func(*Config)) *Trail {
	t.Helper()
	cfg := Config{Collector: addr, CAFile: p.Path("ca.pem"), CertFile: p.Path("client.pem"), KeyFile: p.Path("client.key"),
		SpoolDir: spool, Settle: 300 * time.Millisecond, MinBackoff: 50 * time.Millisecond, MaxBackoff: 300 * time.Millisecond}
	if tweak != nil {
		tweak(&cfg)
	}
	tr, err := Open(cfg, testSource, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	return tr
}

// atnaMessage is what a repository reads out of a message.
type atnaMessage struct {
	Event struct {
		Action  string `xml:"EventActionCode,attr"`
		Time    string `xml:"EventDateTime,attr"`
		Outcome string `xml:"EventOutcomeIndicator,attr"`
		ID      struct {
			Code   string `xml:"csd-code,attr"`
			System string `xml:"codeSystemName,attr"`
		} `xml:"EventID"`
	} `xml:"EventIdentification"`
	Participants []struct {
		UserID    string `xml:"UserID,attr"`
		Requestor bool   `xml:"UserIsRequestor,attr"`
		Access    string `xml:"NetworkAccessPointID,attr"`
	} `xml:"ActiveParticipant"`
	Source struct {
		ID   string `xml:"AuditSourceID,attr"`
		Site string `xml:"AuditEnterpriseSiteID,attr"`
	} `xml:"AuditSourceIdentification"`
	Objects []struct {
		ID      string `xml:"ParticipantObjectID,attr"`
		Details []struct {
			Type  string `xml:"type,attr"`
			Value string `xml:"value,attr"`
		} `xml:"ParticipantObjectDetail"`
	} `xml:"ParticipantObjectIdentification"`
}

func TestMessagesReachRsyslogFramedAndParsable(t *testing.T) {
	p := audittest.NewPKI(t)
	c := audittest.StartCollector(t, p, "server")
	tr := openTrail(t, p, c.Addr(), t.TempDir(), nil)
	refused := Event{ID: UserAuthenticated, Types: []Code{Login}, Action: Execute, Outcome: MinorFailure,
		Description: "401 unknown token\nsecond line", User: User{ID: "unauthenticated", Address: "10.0.0.9"}}
	for _, ev := range []Event{reportRead(1), refused, reportRead(2)} {
		if err := tr.Record(ev); err != nil {
			t.Fatal(err)
		}
	}
	ls := c.WaitFor(3)
	if len(ls) != 3 {
		t.Fatalf("collector got %d messages, want 3 (one per record, none merged): %+v", len(ls), ls)
	}
	for i, l := range ls {
		if l.App != "octflow" || l.MsgID != "IHE+RFC-3881" || l.ProcID != "4242" || l.Seq != i+1 {
			t.Errorf("message %d: app %q msgid %q procid %q seq %d", i, l.App, l.MsgID, l.ProcID, l.Seq)
		}
		var m atnaMessage
		if err := xml.Unmarshal([]byte(l.Msg), &m); err != nil {
			t.Fatalf("message %d is not XML: %v\n%s", i, err, l.Msg)
		}
		if m.Source.ID != "api@test" || m.Source.Site != "Test Hospital" || len(m.Participants) != 2 || !m.Participants[0].Requestor {
			t.Errorf("message %d: source or participants wrong: %+v", i, m)
		}
	}
	var m atnaMessage
	_ = xml.Unmarshal([]byte(ls[0].Msg), &m)
	if m.Event.ID.Code != "110110" || m.Event.ID.System != "DCM" || m.Event.Action != "R" || m.Event.Outcome != "0" ||
		ls[0].Pri != "85" || m.Objects[0].ID != "north/exam-1" || m.Participants[0].UserID != "dr-lee" || m.Participants[0].Access != "10.0.0.7" {
		t.Errorf("report read: pri %s %+v", ls[0].Pri, m)
	}
	if v, _ := base64.StdEncoding.DecodeString(m.Objects[0].Details[0].Value); string(v) != "r1" {
		t.Errorf("request ID detail %q", v)
	}
	_ = xml.Unmarshal([]byte(ls[1].Msg), &m)
	if m.Event.ID.Code != "110114" || m.Event.Outcome != "4" || ls[1].Pri != "84" {
		t.Errorf("refused token: pri %s %+v", ls[1].Pri, m.Event)
	}
}

func TestNothingIsLostWhileTheCollectorIsStoppedNorAcrossARestart(t *testing.T) {
	p := audittest.NewPKI(t)
	c := audittest.StartCollector(t, p, "server")
	spool := t.TempDir()
	tr := openTrail(t, p, c.Addr(), spool, nil)
	record := func(tr *Trail, from, to int) {
		for i := from; i <= to; i++ {
			if err := tr.Record(reportRead(i)); err != nil {
				t.Fatal(err)
			}
		}
	}
	record(tr, 1, 5)
	c.WaitFor(5)
	c.Stop()
	record(tr, 6, 10)
	// The api restarts while the collector is away: the spool carries
	// the messages over.
	if err := tr.Close(); err != nil {
		t.Fatal(err)
	}
	tr = openTrail(t, p, c.Addr(), spool, nil)
	if n := tr.Pending(); n < 5 {
		t.Errorf("a reopened spool holds %d messages, want at least the 5 sent while the collector was away", n)
	}
	record(tr, 11, 15)
	time.Sleep(300 * time.Millisecond) // a few reconnections fail
	c.Start()
	ls := c.WaitFor(15)

	// At least once, in order: each sequence number's first arrival
	// comes after the one before it, and carries its own exam.
	first := map[int]int{}
	for i, l := range ls {
		if _, ok := first[l.Seq]; !ok {
			first[l.Seq] = i
		}
		var m atnaMessage
		if err := xml.Unmarshal([]byte(l.Msg), &m); err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf("north/exam-%d", l.Seq); m.Objects[0].ID != want {
			t.Errorf("sequence %d carries %s, want %s", l.Seq, m.Objects[0].ID, want)
		}
	}
	for seq := 2; seq <= 15; seq++ {
		if first[seq] < first[seq-1] {
			t.Errorf("sequence %d arrived before %d", seq, seq-1)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for tr.Pending() != 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if n := tr.Pending(); n != 0 {
		t.Errorf("%d messages still pending after the collector took them all", n)
	}
}

func TestTLSWithTheWrongCAIsRefused(t *testing.T) {
	p := audittest.NewPKI(t)
	for _, tc := range []struct {
		name       string
		serverCert string
		tweak      func(*Config)
	}{
		{"the collector's certificate is from a CA we do not trust", "impostor", nil},
		{"our client certificate is from a CA the collector does not trust", "server", func(c *Config) {
			c.CertFile, c.KeyFile = p.Path("stranger.pem"), p.Path("stranger.key")
		}},
		{"we trust only the wrong CA", "server", func(c *Config) { c.CAFile = p.Path("wrong-ca.pem") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := audittest.StartCollector(t, p, tc.serverCert)
			tr := openTrail(t, p, c.Addr(), t.TempDir(), tc.tweak)
			if err := tr.Record(reportRead(1)); err != nil {
				t.Fatal(err)
			}
			time.Sleep(1500 * time.Millisecond) // several attempts and settle times
			if ls := c.Lines(); len(ls) != 0 {
				t.Errorf("the collector got %d messages over a refused TLS session", len(ls))
			}
			if n := tr.Pending(); n != 1 {
				t.Errorf("pending %d, want the message kept for a collector we trust", n)
			}
		})
	}
}

func TestAFullSpoolRefusesAndPutsTheGapOnTheTrail(t *testing.T) {
	spool := t.TempDir()
	// Nothing listens on the collector's port: everything stays spooled.
	tr, err := Open(Config{Collector: "127.0.0.1:1", SpoolDir: spool, SpoolBytes: 8 << 10, MinBackoff: time.Hour, MaxBackoff: time.Hour},
		testSource, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	if err := tr.Admit(User{}, 4<<10); err != nil {
		t.Fatalf("an empty 8 KiB spool admits no action of 4 KiB: %v", err)
	}
	if err := tr.Admit(User{}, 9<<10); !errors.Is(err, ErrSpoolFull) {
		t.Fatalf("an empty 8 KiB spool admits an action of 9 KiB: %v", err)
	}
	accepted := 0
	for ; accepted < 100; accepted++ {
		if err := tr.Record(readByAnother(accepted)); err != nil {
			if !errors.Is(err, ErrSpoolFull) {
				t.Fatal(err)
			}
			break
		}
	}
	if accepted == 0 || accepted == 100 {
		t.Fatalf("%d records accepted under an 8 KiB cap", accepted)
	}
	if err := tr.Record(readByAnother(1000)); !errors.Is(err, ErrSpoolFull) {
		t.Fatalf("a second record past the cap: %v, want ErrSpoolFull", err)
	}
	if err := tr.Admit(User{}, 1<<10); !errors.Is(err, ErrSpoolFull) {
		t.Fatalf("a full spool admits an action: %v, want ErrSpoolFull", err)
	}
	msgs := journalMessages(t, tr)
	if len(msgs) != accepted+1 || !strings.Contains(msgs[accepted], `csd-code="110133"`) {
		t.Fatalf("journal holds %d messages, want the %d accepted and one Audit Recording Stopped alert; last: %s",
			len(msgs), accepted, msgs[len(msgs)-1])
	}
	// The collector takes everything: the spool has room again.
	end, _ := tr.j.durable()
	if err := tr.j.commit(end); err != nil {
		t.Fatal(err)
	}
	if err := tr.Admit(User{}, 4<<10); err != nil {
		t.Fatalf("a spool with room again admits no action: %v", err)
	}
	if err := tr.Record(readByAnother(2000)); err != nil {
		t.Fatal(err)
	}
	end2, _ := tr.j.durable()
	if end2.Seq != end.Seq+2 {
		t.Fatalf("after room came back %d records were written, want the alert and the event", end2.Seq-end.Seq)
	}
	msgs = journalMessages(t, tr)
	started := msgs[len(msgs)-2]
	if !strings.Contains(started, `csd-code="110134"`) || !strings.Contains(started, "2 events were refused") {
		t.Errorf("no Audit Recording Started alert counting the 2 refused events: %s", started)
	}
	if !strings.Contains(msgs[len(msgs)-1], "north/exam-2000") {
		t.Errorf("the event itself is not last: %s", msgs[len(msgs)-1])
	}
}

// journalMessages reads every unshipped message of tr's journal.
func journalMessages(t *testing.T, tr *Trail) []string {
	t.Helper()
	_, shipped := tr.j.durable()
	r := tr.j.reader(shipped)
	defer r.close()
	var out []string
	for {
		fr, _, ok, err := r.next()
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			return out
		}
		out = append(out, string(fr))
	}
}

// failedLogin is the event of a request with an unknown token.
func failedLogin() Event {
	return Event{ID: UserAuthenticated, Types: []Code{Login}, Action: Execute, Outcome: MinorFailure,
		User: User{ID: "unauthenticated", Address: "203.0.113.9"}}
}

func TestRequestsWithoutCredentialsCannotFillTheSpool(t *testing.T) {
	for _, tc := range []struct {
		name string
		ev   Event
	}{
		{"failed authentications", failedLogin()},
		// A method refused before authentication (405), or an unknown
		// route (404): no credential was checked, anyone can send them.
		{"refused methods", Event{ID: SecurityAlert, Types: []Code{UseOfRestrictedFunction}, Action: Execute, Outcome: MinorFailure,
			Description: "405 Method Not Allowed", User: User{ID: "unauthenticated", Address: "203.0.113.9"}, Unauthenticated: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Nothing listens on the collector's port: everything stays spooled.
			tr, err := Open(Config{Collector: "127.0.0.1:1", SpoolDir: t.TempDir(), SpoolBytes: 16 << 10, MinBackoff: time.Hour, MaxBackoff: time.Hour},
				testSource, zaptest.NewLogger(t))
			if err != nil {
				t.Fatal(err)
			}
			defer tr.Close()
			for i := range 200 { // far more than 16 KiB of them
				if err := tr.Record(tc.ev); err != nil {
					t.Fatalf("%s %d: %v", tc.name, i, err)
				}
			}
			if size, capacity := tr.j.undelivered(); size > capacity/4*3+2<<10 {
				t.Fatalf("%s fill %d of %d bytes, want at most three quarters", tc.name, size, capacity)
			}
			before := tr.Pending()
			// An allowed request still gets its entry, after one alert
			// counting the events kept off the journal.
			if err := tr.Record(reportRead(1)); err != nil {
				t.Fatalf("an allowed request after a flood of %s: %v", tc.name, err)
			}
			if n := tr.Pending() - before; n != 2 {
				t.Fatalf("%d records written for the allowed request, want the alert and the event", n)
			}
			msgs := journalMessages(t, tr)
			alert := msgs[len(msgs)-2]
			if !strings.Contains(alert, `csd-code="110113"`) || !strings.Contains(alert, "requests without an authenticated caller (failed authentications, refused routes or methods) were counted") {
				t.Errorf("no Security Alert counting the %s: %s", tc.name, alert)
			}
		})
	}
}

func TestARecordNoCollectorTakesIsSetAsideAndShippingGoesOn(t *testing.T) {
	// An older build journaled a 1.1 MB entry (a problem that quoted a
	// request); rsyslog refuses it, and the shipper used to send it
	// forever. Now it is set aside with an alert, a restart keeps every
	// record around it, and everything else reaches the collector.
	p := audittest.NewPKI(t)
	c := audittest.StartCollector(t, p, "server")
	spool := t.TempDir()
	h := newHeader(testSource, "octflow")
	at := time.Now()
	msg := func(seq uint64, xml string) []byte { return frame(h.message(seq, at, false, []byte(xml))) }
	before := []byte{}
	before = append(before, msg(1, "<before/>")...)
	before = append(before, msg(2, "<poison>"+strings.Repeat("A", 1100<<10)+"</poison>")...)
	before = append(before, msg(3, "<after/>")...)
	if err := os.WriteFile(filepath.Join(spool, segName(1)), before, 0o600); err != nil {
		t.Fatal(err)
	}
	tr := openTrail(t, p, c.Addr(), spool, nil)
	if err := tr.Record(reportRead(4)); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		var got []string
		for _, l := range c.Lines() {
			switch {
			case l.Msg == "<before/>", l.Msg == "<after/>":
				got = append(got, l.Msg)
			case strings.Contains(l.Msg, "north/exam-4"):
				got = append(got, "record 4")
			case strings.Contains(l.Msg, "set aside"):
				got = append(got, "alert")
			case strings.Contains(l.Msg, "<poison>"):
				t.Fatalf("the collector received the oversized record (%d bytes)", len(l.Msg))
			}
		}
		if len(got) >= 4 {
			slices.Sort(got)
			if strings.Join(got, ",") != "<after/>,<before/>,alert,record 4" {
				t.Fatalf("the collector holds %q", got)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 30 s the collector holds %q; want the records around the oversized one, the new record and an alert", got)
		}
		time.Sleep(50 * time.Millisecond)
	}
	aside, _ := filepath.Glob(filepath.Join(spool, setAsideDir, "*"))
	if len(aside) != 1 {
		t.Fatalf("set-aside folder holds %q, want the oversized record", aside)
	}
	if fi, _ := os.Stat(aside[0]); fi == nil || fi.Size() < 1100<<10 {
		t.Fatalf("the set-aside record is not whole: %v", fi)
	}
}

// One authenticated caller's flood while the collector is away fills at
// most a quarter of the spool: past it that caller's entries (and
// actions) are refused, with a Security Alert naming it, while other
// callers' are taken; once the collector takes the spool, the caller is
// taken again and the trail says how many were refused.
func TestOneCallersFloodHoldsAtMostAQuarterOfTheSpool(t *testing.T) {
	tr := unreachableTrail(t, 64<<10)
	flooder := User{ID: "oct-7", Role: "device"}
	floodEntry := func(i int) Event {
		ev := reportRead(i)
		ev.User = flooder
		return ev
	}
	taken := 0
	for ; taken < 1000; taken++ {
		if err := tr.Record(floodEntry(taken)); err != nil {
			if !errors.Is(err, ErrPrincipalShare) || !errors.Is(err, ErrSpoolFull) {
				t.Fatalf("the flood's entry %d: %v, want ErrPrincipalShare", taken, err)
			}
			break
		}
	}
	size, capacity := tr.j.undelivered()
	if taken == 0 || taken == 1000 || size > capacity/4+4<<10 {
		t.Fatalf("one caller wrote %d entries, %d of %d bytes of the spool; want about a quarter", taken, size, capacity)
	}
	if err := tr.Admit(flooder, 2<<10); !errors.Is(err, ErrPrincipalShare) {
		t.Errorf("the flooder's action is admitted: %v", err)
	}
	// Everyone else goes on, until the spool itself is full.
	for i := range 5 {
		if err := tr.Record(readByAnother(i)); err != nil {
			t.Fatalf("another caller's entry while one floods: %v", err)
		}
	}
	if err := tr.Admit(User{ID: "dr-lee", Role: "clinician"}, 2<<10); err != nil {
		t.Errorf("another caller's action refused: %v", err)
	}
	msgs := journalMessages(t, tr)
	alerts := 0
	for _, m := range msgs {
		if strings.Contains(m, "hold a quarter of the spool") && strings.Contains(m, "device/oct-7") {
			alerts++
		}
	}
	if alerts != 1 {
		t.Errorf("%d alerts naming the flooder, want one", alerts)
	}
	// The collector takes everything: the flooder is taken again.
	end, _ := tr.j.durable()
	if err := tr.j.commit(end); err != nil {
		t.Fatal(err)
	}
	if err := tr.Record(floodEntry(5000)); err != nil {
		t.Fatalf("the caller once the collector took the spool: %v", err)
	}
	msgs = journalMessages(t, tr)
	if resumed := msgs[len(msgs)-2]; !strings.Contains(resumed, "1 requests of one caller were refused") {
		t.Errorf("no alert counting the refused entries before the caller's next one: %s", resumed)
	}
}

// Entries of one caller recorded at the same time are each counted
// against its share: a concurrent flood takes no more than a sequential
// one.
func TestOneCallersConcurrentFloodHoldsAtMostAQuarterOfTheSpool(t *testing.T) {
	tr := unreachableTrail(t, 64<<10)
	var wg sync.WaitGroup
	for i := range 200 {
		wg.Go(func() {
			ev := reportRead(i)
			ev.User = User{ID: "oct-7", Role: "device"}
			if err := tr.Record(ev); err != nil && !errors.Is(err, ErrPrincipalShare) {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	// The caller's entries, and the one alert naming it.
	if size, capacity := tr.j.undelivered(); size > capacity/4+4<<10 {
		t.Errorf("200 concurrent entries of one caller hold %d of %d bytes of the spool; want about a quarter", size, capacity)
	}
	if err := tr.Record(readByAnother(1)); err != nil {
		t.Errorf("another caller after the flood: %v", err)
	}
}

// A caller whose large entries are refused while its small ones still
// fit is told on the trail once, not at every turn: the alerts do not
// fill the spool for it.
func TestACallerAlternatingLargeAndSmallEntriesIsToldOnce(t *testing.T) {
	tr := unreachableTrail(t, 64<<10)
	caller := User{ID: "oct-7", Role: "device"}
	small := reportRead(1)
	small.User = caller
	large := reportRead(2)
	large.User = caller
	for i := range 100 {
		large.Objects = append(large.Objects, Object{ID: fmt.Sprintf("north/exam-%d", i), IDType: Code{Code: "exam", System: "octflow", Meaning: "Exam"}, Type: 2, Role: 3})
	}
	for range 200 {
		_ = tr.Record(large)
		_ = tr.Record(small)
	}
	if size, capacity := tr.j.undelivered(); size > capacity/4+4<<10 {
		t.Errorf("one caller alternating entries holds %d of %d bytes of the spool; want about a quarter", size, capacity)
	}
	if err := tr.Record(readByAnother(3)); err != nil {
		t.Errorf("another caller: %v", err)
	}
}

// The log sink of a run without a collector gives the trail's figures:
// nothing waits, and it says when it last wrote.
func TestTheLogSinksFiguresSayNothingWaits(t *testing.T) {
	var buf bytes.Buffer
	l := NewLogSink(zapcore.AddSync(&buf), testSource)
	if st := l.Stats(); !st.LastTaken.IsZero() || st.PendingRecords != 0 || st.Refused != 0 {
		t.Fatalf("before any event: %+v", st)
	}
	if err := l.Record(reportRead(1)); err != nil {
		t.Fatal(err)
	}
	if st := l.Stats(); st.LastTaken.IsZero() || st.PendingRecords != 0 || st.PendingBytes != 0 {
		t.Errorf("after one event: %+v, want it taken and nothing pending", st)
	}
}
