// Package codec encrypts what octflow sends through Temporal. Workflow
// inputs and results, activity inputs and outputs, heartbeats, memos,
// signals, queries, updates and failure messages are sealed with
// AES-256-GCM before they leave the process, so Temporal's database and
// history hold ciphertext: a callback URL, a pseudonym or a clinician's
// note is readable only by a process that holds the keys (and, through
// the api's codec endpoint, by an authorised operator in the Web UI).
//
// Keys have IDs so they can rotate: the active key seals, every listed
// key opens, and each payload names the key that sealed it. Each payload
// also names its scope, the campus whose workflow it belongs to or the
// system, sealed into it as authenticated data (see Codec and Scope), so
// the api's codec endpoint can open a payload only for a caller who may
// read that campus, and a payload relabelled with another campus does not
// open. Each scope has keys of its own, derived from the payload keys
// (HKDF-SHA256, see ScopeKeys): the api and the worker hold the payload
// keys and open every scope; a GPU node bound to some campuses holds
// only those campuses' keys and the system's, and cannot open another
// campus's payloads. Search
// attributes are not payloads Temporal lets a codec touch; octflow puts
// nothing identifying in them.
package codec

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
	"sync"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"google.golang.org/protobuf/proto"
)

// Payload metadata of a sealed payload.
const (
	// Encoding marks a sealed payload.
	Encoding = "binary/encrypted"
	// KeyIDMeta names the key that sealed it.
	KeyIDMeta = "encryption-key-id"
	// SealMeta names the sealed format: "3", sealed with its scope's own
	// key (see ScopeKeys). Payloads without it were sealed with the
	// payload key itself, which only a process holding it opens.
	SealMeta = "octflow-seal"
	sealV3   = "3"
)

// Keys are the encryption keys: each 32 bytes, by ID.
type Keys struct {
	// Active is the ID of the key that seals new payloads.
	Active string `json:"active"`
	// Keys holds the payload keys, base64: every scope's keys derive
	// from them. The api and the worker hold these.
	Keys map[string]string `json:"keys,omitempty"`
	// Scoped holds keys of single scopes (as Scope.String writes them),
	// by key ID, base64: what a GPU node bound to some campuses holds
	// instead of Keys (see ScopeKeys).
	Scoped map[string]map[string]string `json:"scoped,omitempty"`
}

// ParseKeys reads keys as JSON: {"active": "2026-11", "keys": {"2026-11":
// "<base64 of 32 random bytes>", "2026-05": "…"}}, or a node's
// {"active": "2026-11", "scoped": {"campus/north": {"2026-11": "…"},
// "system": {"2026-11": "…"}}}.
func ParseKeys(b []byte) (Keys, error) {
	var k Keys
	if err := json.Unmarshal(b, &k); err != nil {
		return k, fmt.Errorf("codec keys: %w", err)
	}
	return k, nil
}

// ScopeKeys are the keys of the scopes named, derived from k's payload
// keys (every key ID, so payloads sealed before a rotation still open):
// the key file of a GPU node that serves those campuses. The system
// scope is always among them: a node reports to the fleet in it. A
// holder of the result opens no other campus's payloads.
func ScopeKeys(k Keys, scopes ...Scope) (Keys, error) {
	if len(k.Keys) == 0 {
		return Keys{}, errors.New("codec: scope keys derive from the payload keys, and these hold none")
	}
	if _, err := New(k); err != nil {
		return Keys{}, err
	}
	out := Keys{Active: k.Active, Scoped: map[string]map[string]string{}}
	for _, s := range append([]Scope{System}, scopes...) {
		ids := map[string]string{}
		for id, b64 := range k.Keys {
			raw, _ := base64.StdEncoding.DecodeString(b64)
			derived, err := deriveKey(raw, id, s)
			if err != nil {
				return Keys{}, err
			}
			ids[id] = base64.StdEncoding.EncodeToString(derived)
		}
		out.Scoped[s.String()] = ids
	}
	return out, nil
}

// deriveKey is scope s's key of ID id, from that payload key.
func deriveKey(payloadKey []byte, id string, s Scope) ([]byte, error) {
	return hkdf.Key(sha256.New, payloadKey, nil, "octflow-payload-scope/3\x00"+id+"\x00"+s.String(), 32)
}

// Open builds the codec of the keys in a file (LoadKeys, then New).
func Open(path string) (*Codec, error) {
	keys, err := LoadKeys(path)
	if err != nil {
		return nil, err
	}
	return New(keys)
}

// LoadKeys reads keys from a file (see ParseKeys).
func LoadKeys(path string) (Keys, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Keys{}, fmt.Errorf("codec keys: %w", err)
	}
	return ParseKeys(b)
}

// NewKeys makes a key set with one new random key under id.
func NewKeys(id string) (Keys, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return Keys{}, err
	}
	return Keys{Active: id, Keys: map[string]string{id: base64.StdEncoding.EncodeToString(b)}}, nil
}

// Codec is a converter.PayloadCodec that seals payloads with AES-256-GCM,
// each bound to the scope it belongs to.
//
// A scope is one campus's, or the system's (see Scope). The codec seals
// in its own scope: a Codec from New seals in the system scope, and the
// SDK hands each conversion the workflow it is for (a
// converter.SerializationContext: the workflow's own payloads, its
// activities', the signals, queries and updates sent to it, a child's
// payloads under the child's ID), from which WithSerializationContext
// takes the campus (ScopeOfWorkflow). The scope is written in the
// payload's metadata and sealed into it as authenticated data, so a
// payload names whose it is, and a payload relabelled with another scope
// does not open. The api's codec endpoint decodes a payload only for a
// caller who may read its scope; in a process that holds the keys,
// Decode opens any scope.
type Codec struct {
	active string
	keys   *keyring
	scope  Scope
	// strict: the codec of one campus's workflow (from the SDK's
	// serialization context), which opens that campus's payloads and the
	// system's only.
	strict bool
}

// keyring holds a codec's keys: the payload keys (none in a node bound
// to some campuses) and the scopes' keys, derived as they are first
// needed or given.
type keyring struct {
	payload map[string][]byte      // by key ID
	aeads   map[string]cipher.AEAD // the payload keys' own, for payloads sealed before scope keys
	mu      sync.Mutex
	scoped  map[scopedID]cipher.AEAD
}

type scopedID struct {
	id    string
	scope Scope
}

// maxDerived bounds the scope keys a codec keeps derived: scopes are
// campuses, a few dozen, and a caller naming scopes of its own must not
// grow it.
const maxDerived = 4096

// New checks the keys and builds the codec. It seals in the system
// scope; see WithSerializationContext and InScope.
func New(k Keys) (*Codec, error) {
	r := &keyring{payload: map[string][]byte{}, aeads: map[string]cipher.AEAD{}, scoped: map[scopedID]cipher.AEAD{}}
	ids := make([]string, 0, len(k.Keys))
	for id := range k.Keys {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		raw, aead, err := parseKey(id, k.Keys[id])
		if err != nil {
			return nil, err
		}
		r.payload[id], r.aeads[id] = raw, aead
	}
	for name, keys := range k.Scoped {
		s, err := ParseScope(name)
		if err != nil {
			return nil, err
		}
		for id, b64 := range keys {
			_, aead, err := parseKey(id, b64)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			r.scoped[scopedID{id, s}] = aead
		}
	}
	if r.payload[k.Active] == nil && r.scoped[scopedID{k.Active, System}] == nil {
		return nil, fmt.Errorf("codec: the active key %q is not among the keys", k.Active)
	}
	return &Codec{active: k.Active, keys: r}, nil
}

func parseKey(id, b64 string) ([]byte, cipher.AEAD, error) {
	raw, err := base64.StdEncoding.DecodeString(b64)
	if err != nil || len(raw) != 32 {
		return nil, nil, fmt.Errorf("codec key %q: want 32 bytes, base64", id)
	}
	aead, err := newAEAD(raw)
	if err != nil {
		return nil, nil, fmt.Errorf("codec key %q: %w", id, err)
	}
	return raw, aead, nil
}

func newAEAD(key []byte) (cipher.AEAD, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

// scopeAEAD is scope s's key of ID id: given, or derived from the
// payload key of that ID.
func (r *keyring) scopeAEAD(id string, s Scope) (cipher.AEAD, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if aead := r.scoped[scopedID{id, s}]; aead != nil {
		return aead, nil
	}
	raw := r.payload[id]
	if raw == nil {
		if len(r.payload) == 0 {
			return nil, fmt.Errorf("codec: this process holds no key of scope %s (key %q): it serves other campuses", s, id)
		}
		return nil, fmt.Errorf("codec: payload sealed with key %q, which this process does not hold", id)
	}
	derived, err := deriveKey(raw, id, s)
	if err != nil {
		return nil, fmt.Errorf("codec: %w", err)
	}
	aead, err := newAEAD(derived)
	if err != nil {
		return nil, fmt.Errorf("codec: %w", err)
	}
	if len(r.scoped) < maxDerived {
		r.scoped[scopedID{id, s}] = aead
	}
	return aead, nil
}

// InScope is the codec sealing in scope s, with the same keys.
func (c *Codec) InScope(s Scope) *Codec {
	if c.scope == s {
		return c
	}
	return &Codec{active: c.active, keys: c.keys, scope: s}
}

// OpensEveryScope says whether the codec holds the payload keys, from
// which every scope's derive (the api's, the worker's, a node serving
// every campus), rather than some scopes' keys only.
func (c *Codec) OpensEveryScope() bool { return len(c.keys.payload) > 0 }

// Opens says whether the codec holds the keys of scope s (and so seals
// and opens its payloads).
func (c *Codec) Opens(s Scope) bool {
	_, err := c.keys.scopeAEAD(c.active, s)
	return err == nil
}

// Scope is the scope this codec seals in.
func (c *Codec) Scope() Scope { return c.scope }

// WithSerializationContext is the codec sealing in the scope of the
// workflow the SDK converts for (converter.PayloadCodecWithSerializationContext):
// the campus of a workflow or activity context's workflow ID, the system
// scope for anything else (a Nexus operation, an activity completed by
// task token alone). A campus's codec opens no other campus's payload: a
// workflow of one campus never takes another's (the system's still open:
// histories of the first format, stages a node handed back by token).
func (c *Codec) WithSerializationContext(sc converter.SerializationContext) converter.PayloadCodec {
	var workflowID string
	switch sc := sc.(type) {
	case converter.WorkflowSerializationContext:
		workflowID = sc.WorkflowID
	case converter.ActivitySerializationContext:
		workflowID = sc.WorkflowID
	}
	scoped := c.InScope(ScopeOfWorkflow(workflowID))
	if scoped.scope.IsSystem() {
		return scoped
	}
	strict := *scoped
	strict.strict = true
	return &strict
}

// Encode seals each payload with the scope's key of the active ID, in
// the codec's scope.
func (c *Codec) Encode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	out := make([]*commonpb.Payload, len(payloads))
	aead, err := c.keys.scopeAEAD(c.active, c.scope)
	if err != nil {
		return nil, err
	}
	ad := associatedData(sealV3, c.active, c.scope)
	for i, p := range payloads {
		plain, err := proto.Marshal(p)
		if err != nil {
			return nil, fmt.Errorf("codec: %w", err)
		}
		nonce := make([]byte, aead.NonceSize(), aead.NonceSize()+len(plain)+aead.Overhead())
		if _, err := rand.Read(nonce); err != nil {
			return nil, fmt.Errorf("codec: %w", err)
		}
		out[i] = &commonpb.Payload{
			Metadata: map[string][]byte{
				converter.MetadataEncoding: []byte(Encoding),
				KeyIDMeta:                  []byte(c.active),
				ScopeMeta:                  []byte(c.scope.String()),
				SealMeta:                   []byte(sealV3),
			},
			Data: aead.Seal(nonce, nonce, plain, ad),
		}
	}
	return out, nil
}

// Decode opens sealed payloads of any scope whose keys the codec holds
// and passes others through (payloads written before encryption was
// on). A payload opens only under the scope it names (see ScopeOf).
// Payloads sealed before scopes had keys of their own open with the
// payload key itself (the first format, which named no scope, under its
// key ID alone): only a process holding the payload keys opens them.
func (c *Codec) Decode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	out := make([]*commonpb.Payload, len(payloads))
	for i, p := range payloads {
		scope, sealed, err := ScopeOf(p)
		if err != nil {
			return nil, err
		}
		if !sealed {
			out[i] = p
			continue
		}
		if c.strict && scope != c.scope && !scope.IsSystem() {
			return nil, fmt.Errorf("codec: a payload of %s in a workflow of %s", scope, c.scope)
		}
		md := p.GetMetadata()
		id := string(md[KeyIDMeta])
		var aead cipher.AEAD
		var ad []byte
		switch _, scoped := md[ScopeMeta]; {
		case string(md[SealMeta]) == sealV3:
			if aead, err = c.keys.scopeAEAD(id, scope); err != nil {
				return nil, err
			}
			ad = associatedData(sealV3, id, scope)
		case len(md[SealMeta]) > 0:
			return nil, fmt.Errorf("codec: sealed format %q unknown", md[SealMeta])
		default:
			if aead = c.keys.aeads[id]; aead == nil {
				return nil, fmt.Errorf("codec: payload sealed with key %q, which this process does not hold", id)
			}
			ad = []byte(id) // the first format: the key ID alone
			if scoped {
				ad = associatedData("2", id, scope)
			}
		}
		data := p.GetData()
		if len(data) < aead.NonceSize() {
			return nil, errors.New("codec: sealed payload too short")
		}
		plain, err := aead.Open(nil, data[:aead.NonceSize()], data[aead.NonceSize():], ad)
		if err != nil {
			return nil, fmt.Errorf("codec: open payload sealed with key %q in scope %s: %w", id, scope, err)
		}
		out[i] = &commonpb.Payload{}
		if err := proto.Unmarshal(plain, out[i]); err != nil {
			return nil, fmt.Errorf("codec: %w", err)
		}
	}
	return out, nil
}

// associatedData is what a payload's seal authenticates besides its
// plaintext: the format, the key ID and the scope. Neither the format
// tag nor a scope holds a NUL, so the key ID is the part between the
// first and the last.
func associatedData(format, keyID string, s Scope) []byte {
	return []byte("octflow-payload/" + format + "\x00" + keyID + "\x00" + s.String())
}

// Failure converter that follows the data converter into each context.
type failureConverter struct {
	converter.FailureConverter
	dc converter.DataConverter
}

func newFailureConverter(dc converter.DataConverter) failureConverter {
	return failureConverter{dc: dc, FailureConverter: temporal.NewDefaultFailureConverter(
		temporal.DefaultFailureConverterOptions{DataConverter: dc, EncodeCommonAttributes: true})}
}

// WithSerializationContext seals failures in the scope of the context
// (converter.FailureConverterWithSerializationContext); Temporal's
// default failure converter would seal them all in the system scope.
func (f failureConverter) WithSerializationContext(sc converter.SerializationContext) converter.FailureConverter {
	return newFailureConverter(converter.WithDataConverterSerializationContext(f.dc, sc))
}

// Converters are the data and failure converters of a Temporal client
// that seals with c (nil c: Temporal's defaults, nothing sealed).
// Failure messages and stack traces are sealed too. Both follow the
// SDK's serialization context, so each payload is sealed in the scope of
// the workflow it belongs to (see Codec).
func Converters(c *Codec) (converter.DataConverter, converter.FailureConverter) {
	if c == nil {
		return converter.GetDefaultDataConverter(), temporal.GetDefaultFailureConverter()
	}
	dc := converter.NewCodecDataConverter(converter.GetDefaultDataConverter(), c)
	return dc, newFailureConverter(dc)
}
