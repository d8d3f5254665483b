package audit

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// Bounds on an event's fields. An event's text comes in part from what a
// client sent (a route it named, a refusal's reason), so no field may
// grow with the input: an entry over the collector's message bound would
// be cut by the collector or, worse, stop the trail for everyone.
const (
	// MaxDescription bounds an event's Description, in bytes.
	MaxDescription = 512
	maxName        = 128 // a user ID, role, address; a code's parts
	maxObjectText  = 256 // an object's ID and name; a detail's value
	maxDetailType  = 64
	maxDetails     = 16 // details per object
	maxTypes       = 8  // event type codes
	maxObjects     = 128

	// MaxMessage bounds one syslog message (header and XML), in bytes:
	// under rsyslog's maxMessageSize="64k" (deploy/audit/rsyslog.conf), so
	// no collector cuts an entry. The journal refuses a longer one.
	MaxMessage = 60 << 10
	// maxHeader bounds the RFC 5424 header newHeader and message write
	// before the XML (HOSTNAME 255, APP-NAME 48, PROCID, timestamp,
	// structured data).
	maxHeader = 512
	// maxXML is the room left for the AuditMessage itself.
	maxXML = MaxMessage - maxHeader
)

// bounded returns ev with every field cut to its bound, at a UTF-8
// boundary, marked with "…" where it was cut, and at most maxObjects
// objects (the description says how many were dropped); Marshal drops
// more whole objects when the message would still be too long.
func bounded(ev Event) (_ Event, dropped int) {
	ev.ID = boundedCode(ev.ID)
	if len(ev.Types) > maxTypes {
		ev.Types = ev.Types[:maxTypes]
	}
	types := make([]Code, len(ev.Types))
	for i, t := range ev.Types {
		types[i] = boundedCode(t)
	}
	ev.Types = types
	dropped = 0
	if len(ev.Objects) > maxObjects {
		dropped = len(ev.Objects) - maxObjects
		ev.Objects = ev.Objects[:maxObjects]
	}
	ev.User = User{ID: Bound(ev.User.ID, maxName), Role: Bound(ev.User.Role, maxName), Address: Bound(ev.User.Address, maxName)}
	objects := make([]Object, len(ev.Objects))
	for i, o := range ev.Objects {
		details := o.Details
		if len(details) > maxDetails {
			details = details[:maxDetails]
		}
		o.Details = make([]Detail, len(details))
		for k, d := range details {
			o.Details[k] = Detail{Type: Bound(d.Type, maxDetailType), Value: Bound(d.Value, maxObjectText)}
		}
		o.ID, o.Name, o.IDType = Bound(o.ID, maxObjectText), Bound(o.Name, maxObjectText), boundedCode(o.IDType)
		objects[i] = o
	}
	ev.Objects = objects
	ev.Description = withOmitted(ev.Description, dropped)
	return ev, dropped
}

func boundedCode(c Code) Code {
	return Code{Code: Bound(c.Code, maxName), System: Bound(c.System, maxName), Meaning: Bound(c.Meaning, maxName)}
}

// Bound returns s if it is valid UTF-8 of at most n bytes, else its
// longest valid UTF-8 prefix that leaves room for "…" within n bytes,
// and "…". Invalid UTF-8 is replaced first, so a cut never splits a
// rune. Text a client sent is bounded with it before it is answered or
// audited.
func Bound(s string, n int) string {
	if len(s) <= n && utf8.ValidString(s) {
		return s
	}
	if len(s) > n+utf8.UTFMax { // only the head can be kept
		s = s[:n+utf8.UTFMax]
	}
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= n {
		return s
	}
	const mark = "…"
	end := n - len(mark)
	for end > 0 && !utf8.RuneStart(s[end]) {
		end--
	}
	return s[:end] + mark
}

// withOmitted is a description, bounded, that says how many objects an
// entry dropped to stay under its bounds (none: the description alone).
func withOmitted(desc string, dropped int) string {
	if dropped == 0 {
		return Bound(desc, MaxDescription)
	}
	note := "; " + strconv.Itoa(dropped) + " participant objects omitted (audit entry bound)"
	return Bound(desc, MaxDescription-len(note)) + note
}
