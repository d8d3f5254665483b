package codecserver

import (
	"net/http"
	"strings"
	"sync"
	"testing"

	"octflow/audit"
	"octflow/codec"
)

// codecTrail keeps the audit events it takes.
type codecTrail struct {
	mu     sync.Mutex
	events []audit.Event
}

func (r *codecTrail) Record(ev audit.Event) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, ev)
	return nil
}

func TestCodecUseAndRefusalsAreAudited(t *testing.T) {
	h := newCodecHarness(t)
	trail := h.trail
	h.codecCall("decode", "clin-north", payloadsJSON(t, h.seal(codec.CampusScope("north"), "n")), nil)
	h.codecCall("decode", "clin-north", payloadsJSON(t, h.seal(codec.CampusScope("south"), "s")), nil)
	h.codecCall("decode", "admin", payloadsJSON(t, h.seal(codec.System, "f"), h.seal(codec.CampusScope("south"), "s")), nil)
	h.codecCall("decode", "nope", payloadsJSON(t), nil)
	h.codecCall("encode", "clin-north", payloadsJSON(t), nil)
	h.codecCall("encode", "admin", payloadsJSON(t), func(r *http.Request) { r.Header.Set(campusHeader, "north") })
	h.login("nope", "192.0.2.1:1000", nil)
	h.login("clin-north", "192.0.2.1:1000", nil)
	type entry struct{ action, status, user, campuses string }
	var got []entry
	for _, ev := range trail.events {
		e := entry{user: ev.User.ID}
		var campuses []string
		for _, o := range ev.Objects {
			for _, d := range o.Details {
				switch d.Type {
				case "action":
					e.action = d.Value
				case "status":
					e.status = d.Value
				}
			}
			if o.IDType.Code == "campus" {
				campuses = append(campuses, o.ID)
			}
		}
		e.campuses = strings.Join(campuses, ",")
		got = append(got, e)
	}
	want := []entry{
		{"codec-decode", "200", "cn", "north"},
		{"codec-decode", "403", "cn", "south"},
		{"codec-decode-system", "200", "a", "south"},
		{"codec-decode", "401", "unauthenticated", ""},
		{"codec-encode", "403", "cn", ""},
		{"codec-encode", "200", "a", "north"},
		{"codec-login", "401", "unauthenticated", ""},
		{"codec-login", "200", "cn", ""},
	}
	if len(got) != len(want) {
		t.Fatalf("audit entries\n%v\nwant\n%v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("audit entry %d: %+v, want %+v", i, got[i], want[i])
		}
	}
}
