package audit

import (
	"bytes"
	"encoding/xml"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"go.uber.org/zap/zapcore"
)

var hostileTime = time.Date(2026, 12, 6, 5, 0, 0, 0, time.UTC)

// hostile is an event each of whose fields a client could have filled:
// a megabyte of text, invalid UTF-8, thousands of objects and details.
func hostile() Event {
	big := strings.Repeat("A", 1<<20)
	ev := Event{ID: SecurityAlert, Types: make([]Code, 100), Action: Execute, Outcome: MinorFailure,
		Description: "400 Bad Request: " + big + "\xff\xfe",
		User:        User{ID: big, Role: big, Address: big}}
	for i := range ev.Types {
		ev.Types[i] = Code{Code: big, System: big, Meaning: big}
	}
	for range 5000 {
		o := Object{ID: big, Name: big, IDType: Code{Code: big}, Type: 2}
		for range 100 {
			o.Details = append(o.Details, Detail{Type: big, Value: big})
		}
		ev.Objects = append(ev.Objects, o)
	}
	return ev
}

func TestNoFieldOfAnEntryGrowsWithItsInput(t *testing.T) {
	b, err := Marshal(Source{ID: strings.Repeat("s", 1<<16), Host: strings.Repeat("h", 1<<16)}, hostile())
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > maxXML {
		t.Fatalf("an entry of hostile input is %d bytes, over the %d-byte bound", len(b), maxXML)
	}
	var m struct {
		Description string `xml:"EventIdentification>EventOutcomeDescription"`
		Users       []struct {
			ID string `xml:"UserID,attr"`
		} `xml:"ActiveParticipant"`
		Objects []struct{} `xml:"ParticipantObjectIdentification"`
	}
	if err := xml.Unmarshal(b, &m); err != nil {
		t.Fatalf("the bounded entry is not XML: %v", err)
	}
	if len(m.Description) > MaxDescription || !utf8.ValidString(m.Description) {
		t.Errorf("description of %d bytes (valid UTF-8: %v), want at most %d", len(m.Description), utf8.ValidString(m.Description), MaxDescription)
	}
	if !strings.Contains(m.Description, "participant objects omitted") {
		t.Errorf("the description does not say that objects were dropped: %.200q", m.Description)
	}
	if len(m.Objects) == 0 {
		t.Error("every object was dropped; the first must stay")
	}
	for _, u := range m.Users {
		if len(u.ID) > maxName {
			t.Errorf("a user ID of %d bytes", len(u.ID))
		}
	}
	// A syslog message of the bounded entry is within the collector's bound.
	h := newHeader(Source{Host: strings.Repeat("h", 1<<16), PID: 1 << 30}, strings.Repeat("a", 1<<16))
	if msg := h.message(1<<40, hostileTime, true, b); len(msg) > MaxMessage {
		t.Errorf("a syslog message of %d bytes, over MaxMessage %d", len(msg), MaxMessage)
	}
}

func TestTheDevTrailBoundsEntriesToo(t *testing.T) {
	var buf bytes.Buffer
	sink := NewLogSink(zapcore.AddSync(&buf), testSource)
	if err := sink.Record(hostile()); err != nil {
		t.Fatal(err)
	}
	// At most maxObjects objects, each with a bounded ID and at most
	// maxDetails bounded details.
	if n := buf.Len(); n > maxObjects*(maxObjectText+maxDetails*(maxDetailType+maxObjectText+8)+64)+8<<10 {
		t.Errorf("a dev trail line of %d bytes for hostile input", n)
	}
	if strings.Contains(buf.String(), strings.Repeat("A", MaxDescription+1)) {
		t.Error("a dev trail line holds a field longer than its bound")
	}
}

func TestCutKeepsRunesWhole(t *testing.T) {
	for _, tc := range []struct {
		in   string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"exactly10!", 10, "exactly10!"},
		{"abcdefghijk", 10, "abcdefg…"},
		{"ééééé", 8, "éé…"},            // 2-byte runes: 4 bytes of runes, then the mark
		{"日本語の文", 9, "日本…"},            // 3-byte runes
		{"ab\xffcd", 10, "ab\uFFFDcd"}, // invalid bytes replaced, not copied
	} {
		got := Bound(tc.in, tc.n)
		if got != tc.want || len(got) > tc.n || !utf8.ValidString(got) {
			t.Errorf("Bound(%q, %d) = %q (%d bytes), want %q", tc.in, tc.n, got, len(got), tc.want)
		}
	}
}

func TestSyslogHeaderFieldsStayWithinRFC5424(t *testing.T) {
	// RFC 5424 §6: HOSTNAME at most 255 and APP-NAME at most 48 printable
	// US-ASCII characters; a collector may refuse a longer one.
	for _, tc := range []struct{ name, host, app string }{
		{"long names", strings.Repeat("h", 300), strings.Repeat("a", 100)},
		{"spaces and controls", "host name\x00\n", "app name\t"},
		{"non-ASCII", "hôte-日本", "äpp"},
	} {
		h := newHeader(Source{Host: tc.host, PID: 7}, tc.app)
		msg := string(h.message(1, hostileTime, false, []byte("<x/>")))
		fields := strings.SplitN(msg, " ", 8)
		if len(fields) < 8 {
			t.Fatalf("%s: header %q has fewer than 7 fields", tc.name, msg)
		}
		host, app := fields[2], fields[3]
		if len(host) > 255 || len(app) > 48 {
			t.Errorf("%s: HOSTNAME of %d or APP-NAME of %d characters, over RFC 5424's 255 and 48", tc.name, len(host), len(app))
		}
		for _, f := range []string{host, app} {
			for i := 0; i < len(f); i++ {
				if f[i] <= 32 || f[i] >= 127 {
					t.Errorf("%s: header field %q holds a byte outside printable US-ASCII", tc.name, f)
				}
			}
		}
	}
}
