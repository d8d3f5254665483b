package codec

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"
	"google.golang.org/protobuf/proto"

	"octflow/contract"
	"octflow/exam"
)

func TestSealedPayloadsHoldNoPlaintextAndOpenAfterARotation(t *testing.T) {
	old, err := NewKeys("2026-05")
	if err != nil {
		t.Fatal(err)
	}
	c1, err := New(old)
	if err != nil {
		t.Fatal(err)
	}
	dc1, _ := Converters(c1)
	secret := map[string]string{"callbackUrl": "https://ws.st-elsewhere.example/hook", "note": "Jane Doe, re-check in 6 months"}
	p, err := dc1.ToPayload(secret)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range secret {
		if bytes.Contains(p.GetData(), []byte(v)) {
			t.Errorf("the sealed payload holds %q in clear", v)
		}
	}
	if string(p.GetMetadata()[KeyIDMeta]) != "2026-05" {
		t.Errorf("key id %q", p.GetMetadata()[KeyIDMeta])
	}
	// Rotate: a new active key, the old one kept to open old payloads.
	rotated, _ := NewKeys("2026-11")
	rotated.Keys["2026-05"] = old.Keys["2026-05"]
	c2, err := New(rotated)
	if err != nil {
		t.Fatal(err)
	}
	dc2, _ := Converters(c2)
	var back map[string]string
	if err := dc2.FromPayload(p, &back); err != nil || back["note"] != secret["note"] {
		t.Fatalf("after rotation: %v %v", back, err)
	}
	p2, _ := dc2.ToPayload("new")
	if string(p2.GetMetadata()[KeyIDMeta]) != "2026-11" {
		t.Errorf("new payloads sealed with %q, want the active key", p2.GetMetadata()[KeyIDMeta])
	}
	// Without the key nothing opens; a tampered payload does not open.
	c3, _ := New(mustKeys(t, "other"))
	dc3, _ := Converters(c3)
	if err := dc3.FromPayload(p, &back); err == nil || !strings.Contains(err.Error(), "2026-05") {
		t.Errorf("opened without its key: %v", err)
	}
	p.Data[len(p.Data)-1] ^= 1
	if err := dc1.FromPayload(p, &back); err == nil {
		t.Error("a tampered payload opened")
	}
	// Payloads from before encryption still read.
	plain, _ := converter.GetDefaultDataConverter().ToPayload("legacy")
	var s string
	if err := dc2.FromPayload(plain, &s); err != nil || s != "legacy" {
		t.Errorf("plain payload: %q %v", s, err)
	}
}

func TestKeysThatCannotWorkAreRefused(t *testing.T) {
	for _, k := range []Keys{
		{Active: "a", Keys: map[string]string{"a": "c2hvcnQ="}},
		{Active: "b", Keys: mustKeys(t, "a").Keys},
		{Active: "a", Keys: map[string]string{"a": "not base64!"}},
	} {
		if _, err := New(k); err == nil {
			t.Errorf("New(%+v) accepted", k)
		}
	}
}

func mustKeys(t *testing.T, id string) Keys {
	t.Helper()
	k, err := NewKeys(id)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// inWorkflow is the SDK's context for the payloads of workflowID.
func inWorkflow(workflowID string) converter.SerializationContext {
	return converter.WorkflowSerializationContext{Namespace: "default", WorkflowID: workflowID}
}

func TestEachPayloadIsSealedInTheScopeOfItsWorkflow(t *testing.T) {
	c, err := New(mustKeys(t, "k"))
	if err != nil {
		t.Fatal(err)
	}
	dc, fc := Converters(c)
	north := exam.Ref{Campus: "north", ID: "E-1"}
	for _, tc := range []struct {
		name string
		sc   converter.SerializationContext // nil: no context
		want Scope
	}{
		{"an exam's pipeline", inWorkflow(contract.ExamWorkflowID(north)), CampusScope("north")},
		{"its review", inWorkflow(contract.ReviewWorkflowID(north)), CampusScope("north")},
		{"a campus's inbox", inWorkflow(contract.InboxWorkflowID("south")), CampusScope("south")},
		{"an exam's activity", converter.ActivitySerializationContext{WorkflowID: contract.ExamWorkflowID(north), ActivityType: "Layers"}, CampusScope("north")},
		{"the fleet", inWorkflow(contract.FleetWorkflowID), System},
		{"an activity completed by task token", converter.ActivitySerializationContext{}, System},
		{"a Nexus operation", converter.NexusSerializationContext{Operation: "op"}, System},
		{"no context", nil, System},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dc, fc := dc, fc
			if tc.sc != nil {
				dc = converter.WithDataConverterSerializationContext(dc, tc.sc)
				fc = converter.WithFailureConverterSerializationContext(fc, tc.sc)
			}
			p, err := dc.ToPayload("note")
			if err != nil {
				t.Fatal(err)
			}
			if got, sealed, err := ScopeOf(p); !sealed || err != nil || got != tc.want {
				t.Errorf("payload scope %v (sealed %v, %v), want %v", got, sealed, err, tc.want)
			}
			// A failure's message and stack trace are sealed in the same scope.
			f := fc.ErrorToFailure(errors.New("Jane Doe's scan is unreadable"))
			if got, sealed, err := ScopeOf(f.GetEncodedAttributes()); !sealed || err != nil || got != tc.want {
				t.Errorf("failure scope %v (sealed %v, %v), want %v", got, sealed, err, tc.want)
			}
			if back := fc.FailureToError(f); back == nil || back.Error() != "Jane Doe's scan is unreadable" {
				t.Errorf("failure back: %v", back)
			}
		})
	}
}

// scopeRecorder records the scope of every payload sealed before it.
type scopeRecorder struct {
	mu     sync.Mutex
	scopes map[Scope]int
}

func (r *scopeRecorder) Encode(ps []*commonpb.Payload) ([]*commonpb.Payload, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, p := range ps {
		s, _, _ := ScopeOf(p)
		r.scopes[s]++
	}
	return ps, nil
}

func (r *scopeRecorder) Decode(ps []*commonpb.Payload) ([]*commonpb.Payload, error) { return ps, nil }

// The SDK itself tells the codec which workflow it converts for: a run
// of an exam's workflow and its activity seal everything in the exam's
// campus.
func TestTheSDKSealsAWorkflowsPayloadsInItsCampus(t *testing.T) {
	c, err := New(mustKeys(t, "k"))
	if err != nil {
		t.Fatal(err)
	}
	rec := &scopeRecorder{scopes: map[Scope]int{}}
	dc := converter.NewCodecDataConverter(converter.GetDefaultDataConverter(), rec, c)
	echo := func(_ context.Context, s string) (string, error) { return s + "!", nil }
	wf := func(ctx workflow.Context, s string) (string, error) {
		ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute})
		var out string
		err := workflow.ExecuteActivity(ctx, echo, s).Get(ctx, &out)
		return out, err
	}
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	env.SetDataConverter(dc)
	env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: contract.ExamWorkflowID(exam.Ref{Campus: "north", ID: "E-1"})})
	env.RegisterActivity(echo)
	env.RegisterWorkflow(wf)
	env.ExecuteWorkflow(wf, "note")
	var out string
	if err := env.GetWorkflowError(); err != nil || env.GetWorkflowResult(&out) != nil || out != "note!" {
		t.Fatalf("workflow: %q %v", out, err)
	}
	if rec.scopes[CampusScope("north")] < 3 || len(rec.scopes) != 1 {
		t.Errorf("scopes sealed: %v, want only campus north's (input, activity input and output, result)", rec.scopes)
	}
}

func TestAPayloadOpensOnlyUnderTheScopeItWasSealedIn(t *testing.T) {
	c, err := New(mustKeys(t, "k"))
	if err != nil {
		t.Fatal(err)
	}
	sealed, err := c.InScope(CampusScope("north")).Encode([]*commonpb.Payload{{Data: []byte("review note")}})
	if err != nil {
		t.Fatal(err)
	}
	if out, err := c.Decode(sealed); err != nil || string(out[0].GetData()) != "review note" {
		t.Fatalf("its own scope: %v %v", out, err)
	}
	for _, tc := range []struct {
		name  string
		label func(md map[string][]byte)
	}{
		{"another campus", func(md map[string][]byte) { md[ScopeMeta] = []byte("campus/south") }},
		{"the system", func(md map[string][]byte) { md[ScopeMeta] = []byte("system") }},
		{"no scope (the first format)", func(md map[string][]byte) { delete(md, ScopeMeta) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := proto.Clone(sealed[0]).(*commonpb.Payload)
			tc.label(p.Metadata)
			if out, err := c.Decode([]*commonpb.Payload{p}); err == nil {
				t.Errorf("relabelled as %s, it opened: %q", tc.name, out[0].GetData())
			}
		})
	}
	p := proto.Clone(sealed[0]).(*commonpb.Payload)
	p.Metadata[ScopeMeta] = []byte("campus/Not A Campus")
	if _, _, err := ScopeOf(p); err == nil {
		t.Error("a scope that names no campus was taken")
	}
}

// Payloads of the first sealed format (the key ID alone authenticated)
// still open in the processes, as the system's: the replay corpus holds
// them, as would runs in flight.
func TestAPayloadOfTheFirstFormatOpensAsTheSystems(t *testing.T) {
	keys := mustKeys(t, "k")
	raw, _ := base64.StdEncoding.DecodeString(keys.Keys["k"])
	block, _ := aes.NewCipher(raw)
	aead, _ := cipher.NewGCM(block)
	plain, _ := proto.Marshal(&commonpb.Payload{Data: []byte("old")})
	nonce := make([]byte, aead.NonceSize())
	rand.Read(nonce)
	old := &commonpb.Payload{
		Metadata: map[string][]byte{converter.MetadataEncoding: []byte(Encoding), KeyIDMeta: []byte("k")},
		Data:     aead.Seal(nonce, nonce, plain, []byte("k")),
	}
	if s, sealed, err := ScopeOf(old); !sealed || err != nil || s != System {
		t.Errorf("scope %v %v %v, want the system's", s, sealed, err)
	}
	c, _ := New(keys)
	if out, err := c.Decode([]*commonpb.Payload{old}); err != nil || string(out[0].GetData()) != "old" {
		t.Errorf("first format: %v %v", out, err)
	}
	// Labelled with a campus, it does not open.
	old.Metadata[ScopeMeta] = []byte("campus/north")
	if _, err := c.Decode([]*commonpb.Payload{old}); err == nil {
		t.Error("a first-format payload opened as a campus's")
	}
}

func TestScopeOfWorkflowFollowsTheWorkflowIDs(t *testing.T) {
	ref := exam.Ref{Campus: "st-mary-2", ID: "E.0001_a-b"}
	for _, tc := range []struct {
		id   string
		want Scope
	}{
		{contract.ExamWorkflowID(ref), CampusScope("st-mary-2")},
		{contract.ReviewWorkflowID(ref), CampusScope("st-mary-2")},
		{contract.ExportWorkflowID(ref), CampusScope("st-mary-2")},
		{"export//E-1", System},
		{contract.InboxWorkflowID("st-mary-2"), CampusScope("st-mary-2")},
		{contract.FleetWorkflowID, System},
		{"exam-" + ref.ID, System},
		{contract.ScanSweepWorkflowID + "-2026-01-01T00:00:00Z", System},
		{"", System},
		{"exam/north", System},
		{"exam/North/E-1", System},
		{"review//E-1", System},
		{"inbox-", System},
		{"inbox-a/b", System},
	} {
		if got := ScopeOfWorkflow(tc.id); got != tc.want {
			t.Errorf("ScopeOfWorkflow(%q) = %v, want %v", tc.id, got, tc.want)
		}
	}
}

func TestScopesReadBackAsWritten(t *testing.T) {
	for _, s := range []Scope{System, CampusScope("north"), CampusScope("system")} {
		if back, err := ParseScope(s.String()); err != nil || back != s {
			t.Errorf("%v: %v %v", s, back, err)
		}
	}
	for _, v := range []string{"", "campus/", "campus/A", "north", "System"} {
		if _, err := ParseScope(v); err == nil {
			t.Errorf("ParseScope(%q) accepted", v)
		}
	}
}

// A GPU node bound to a campus holds that campus's keys and the
// system's, derived from the payload keys: it opens and seals its
// campus's payloads and its fleet reports, and no other campus's.
func TestANodesScopeKeysOpenOnlyTheCampusesItServes(t *testing.T) {
	payloadKeys := mustKeys(t, "2026-12")
	stack, err := New(payloadKeys)
	if err != nil {
		t.Fatal(err)
	}
	nodeKeys, err := ScopeKeys(payloadKeys, CampusScope("north"))
	if err != nil {
		t.Fatal(err)
	}
	if len(nodeKeys.Keys) != 0 {
		t.Fatalf("a node's keys hold the payload keys: %v", nodeKeys.Keys)
	}
	for scope, keys := range nodeKeys.Scoped {
		for id, k := range keys {
			if k == payloadKeys.Keys[id] {
				t.Errorf("scope %s's key %s is the payload key itself", scope, id)
			}
		}
	}
	node, err := New(nodeKeys)
	if err != nil {
		t.Fatal(err)
	}
	seal := func(c *Codec, s Scope, text string) *commonpb.Payload {
		t.Helper()
		out, err := c.InScope(s).Encode([]*commonpb.Payload{{Data: []byte(text)}})
		if err != nil {
			t.Fatalf("seal in %s: %v", s, err)
		}
		return out[0]
	}
	opens := func(c *Codec, p *commonpb.Payload) bool {
		out, err := c.Decode([]*commonpb.Payload{p})
		return err == nil && len(out[0].GetData()) > 0
	}
	for _, tc := range []struct {
		scope    Scope
		nodeOpen bool
	}{
		{CampusScope("north"), true},
		{System, true},
		{CampusScope("south"), false},
		{CampusScope("northeast"), false},
	} {
		p := seal(stack, tc.scope, "scan of "+tc.scope.String())
		if got := opens(node, p); got != tc.nodeOpen {
			t.Errorf("the north node opens a payload of %s: %v, want %v", tc.scope, got, tc.nodeOpen)
		}
		if got := node.Opens(tc.scope); got != tc.nodeOpen {
			t.Errorf("Opens(%s) = %v, want %v", tc.scope, got, tc.nodeOpen)
		}
		if tc.nodeOpen {
			// What the node seals, the stack opens.
			if !opens(stack, seal(node, tc.scope, "layers")) {
				t.Errorf("the stack does not open what the node sealed in %s", tc.scope)
			}
		} else if _, err := node.InScope(tc.scope).Encode([]*commonpb.Payload{{Data: []byte("x")}}); err == nil {
			t.Errorf("the north node sealed a payload of %s", tc.scope)
		}
	}
	// Payloads sealed with the payload key itself (before scopes had
	// keys of their own) open in the stack, never on the node.
	old := seal(stack, CampusScope("north"), "old")
	delete(old.Metadata, SealMeta)
	raw, _ := base64.StdEncoding.DecodeString(payloadKeys.Keys["2026-12"])
	aead, _ := newAEAD(raw)
	plain, _ := proto.Marshal(&commonpb.Payload{Data: []byte("old")})
	nonce := make([]byte, aead.NonceSize())
	rand.Read(nonce)
	old.Data = aead.Seal(nonce, nonce, plain, associatedData("2", "2026-12", CampusScope("north")))
	if !opens(stack, old) {
		t.Error("the stack no longer opens a payload sealed before scope keys")
	}
	if opens(node, old) {
		t.Error("a node opened a payload sealed with the payload key itself")
	}
	// A scope-keyed payload relabelled as the old format does not open.
	p := seal(stack, CampusScope("north"), "relabelled")
	delete(p.Metadata, SealMeta)
	if opens(stack, p) {
		t.Error("a scope-keyed payload opened as one sealed with the payload key")
	}
	// The node's campus key, filed under another campus, opens nothing
	// of that campus: each scope's key is its own.
	forged := Keys{Active: nodeKeys.Active, Scoped: map[string]map[string]string{
		"system": nodeKeys.Scoped["system"], "campus/south": nodeKeys.Scoped["campus/north"]}}
	if c, err := New(forged); err != nil {
		t.Fatal(err)
	} else if opens(c, seal(stack, CampusScope("south"), "south's scan")) {
		t.Error("north's key, filed as south's, opened a payload of south")
	}
	// Scope keys cannot be derived from scope keys.
	if _, err := ScopeKeys(nodeKeys, CampusScope("south")); err == nil {
		t.Error("a node's keys derived another campus's")
	}
}

// Scope keys are written as a file and read back; after a rotation a
// node's file holds every key ID, so older payloads still open there.
func TestScopeKeysRoundTripAndKeepEveryKeyID(t *testing.T) {
	keys := mustKeys(t, "2026-11")
	keys.Keys["2026-05"] = mustKeys(t, "2026-05").Keys["2026-05"]
	old := keys
	old.Active = "2026-05"
	stackOld, _ := New(old)
	sealed, err := stackOld.InScope(CampusScope("north")).Encode([]*commonpb.Payload{{Data: []byte("before")}})
	if err != nil {
		t.Fatal(err)
	}
	nodeKeys, err := ScopeKeys(keys, CampusScope("north"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(nodeKeys)
	if err != nil {
		t.Fatal(err)
	}
	back, err := ParseKeys(b)
	if err != nil {
		t.Fatal(err)
	}
	node, err := New(back)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := node.Decode(sealed); err != nil || string(out[0].GetData()) != "before" {
		t.Errorf("a payload of the rotated-out key: %v %v", out, err)
	}
	if len(back.Scoped) != 2 || len(back.Scoped["campus/north"]) != 2 {
		t.Errorf("scoped keys %v, want system and campus/north, two IDs each", back.Scoped)
	}
}

// In one campus's workflow, a payload sealed in another campus's scope
// does not open, even where every key is held (a node of that campus
// could have sealed it); the system's still open.
func TestACampussWorkflowOpensNoOtherCampussPayload(t *testing.T) {
	c, err := New(mustKeys(t, "k"))
	if err != nil {
		t.Fatal(err)
	}
	inSouth := c.WithSerializationContext(inWorkflow("exam/south/ex-1"))
	for _, tc := range []struct {
		scope Scope
		opens bool
	}{
		{CampusScope("south"), true},
		{System, true},
		{CampusScope("north"), false},
	} {
		sealed, err := c.InScope(tc.scope).Encode([]*commonpb.Payload{{Data: []byte("result")}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := inSouth.Decode(sealed); (err == nil) != tc.opens {
			t.Errorf("a payload of %s in south's workflow: %v, want opens %v", tc.scope, err, tc.opens)
		}
		if _, err := c.Decode(sealed); err != nil {
			t.Errorf("the codec outside any workflow does not open %s: %v", tc.scope, err)
		}
	}
	// An unknown sealed format does not open.
	sealed, _ := c.Encode([]*commonpb.Payload{{Data: []byte("x")}})
	sealed[0].Metadata[SealMeta] = []byte("4")
	if _, err := c.Decode(sealed); err == nil {
		t.Error("a payload of an unknown sealed format opened")
	}
}
