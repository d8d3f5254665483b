package codec

import (
	"fmt"
	"strings"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"

	"octflow/exam"
)

// ScopeMeta is the payload metadata that names a sealed payload's scope
// ("campus/<campus>" or "system"); the seal authenticates it.
const ScopeMeta = "octflow-scope"

// Scope is whose a sealed payload is: one campus's, or, with Campus
// empty, the system's. System payloads are those of no campus (the
// fleet, the scan sweep, an activity completed by its task token alone)
// and those of the first sealed format, which named no scope: only an
// admin may read them through the codec endpoint.
type Scope struct {
	// Campus is the campus whose payload it is; "" is the system scope.
	Campus string
}

// System is the scope of payloads that belong to no campus.
var System = Scope{}

// CampusScope is campus's scope.
func CampusScope(campus string) Scope { return Scope{Campus: campus} }

// IsSystem reports whether s is the system scope.
func (s Scope) IsSystem() bool { return s.Campus == "" }

// String is the scope as payload metadata holds it.
func (s Scope) String() string {
	if s.IsSystem() {
		return "system"
	}
	return "campus/" + s.Campus
}

// ParseScope reads a scope as String writes it.
func ParseScope(v string) (Scope, error) {
	if v == "system" {
		return System, nil
	}
	campus, ok := strings.CutPrefix(v, "campus/")
	if !ok {
		return Scope{}, fmt.Errorf("codec: scope %q: want system or campus/<campus>", v)
	}
	if err := exam.ValidateCampus(campus); err != nil {
		return Scope{}, fmt.Errorf("codec: scope: %w", err)
	}
	return CampusScope(campus), nil
}

// ScopeOf is the scope a payload names and whether it is sealed at all
// (a payload that is not sealed has no scope: it is plaintext already).
// A sealed payload of the first format names none and is the system's.
// The name is only a claim until the payload opens: Decode opens it
// only under the scope it names.
func ScopeOf(p *commonpb.Payload) (s Scope, sealed bool, err error) {
	md := p.GetMetadata()
	if string(md[converter.MetadataEncoding]) != Encoding {
		return Scope{}, false, nil
	}
	v, ok := md[ScopeMeta]
	if !ok {
		return System, true, nil
	}
	s, err = ParseScope(string(v))
	return s, true, err
}

// ScopeOfWorkflow is the scope of a workflow's payloads, from its ID:
// the campus of an exam's pipeline ("exam/<campus>/<exam>"), of its
// review ("review/<campus>/<exam>"), of the export of its results
// ("export/<campus>/<exam>") and of a campus's inbox
// ("inbox-<campus>") (see package contract); the system scope for
// every other workflow (the fleet, the scan sweep, any ID of another
// shape) and for no workflow at all.
func ScopeOfWorkflow(workflowID string) Scope {
	var campus string
	for _, kind := range []string{"exam/", "review/", "export/"} {
		if rest, ok := strings.CutPrefix(workflowID, kind); ok {
			if campus, _, ok = strings.Cut(rest, "/"); !ok {
				return System
			}
			break
		}
	}
	if rest, ok := strings.CutPrefix(workflowID, "inbox-"); ok {
		campus = rest
	}
	if exam.ValidateCampus(campus) != nil {
		return System
	}
	return CampusScope(campus)
}
