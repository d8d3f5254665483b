package codec

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
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
		{contract.InboxWorkflowID("st-mary-2"), CampusScope("st-mary-2")},
		{contract.FleetWorkflowID, System},
		{"exam-" + ref.ID, System},
		{contract.ScanSweepScheduleID + "-2026-01-01T00:00:00Z", System},
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
