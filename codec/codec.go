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
// open. Search
// attributes are not payloads Temporal lets a codec touch; octflow puts
// nothing identifying in them.
package codec

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"

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
)

// Keys are the encryption keys: each 32 bytes, by ID.
type Keys struct {
	// Active is the ID of the key that seals new payloads.
	Active string `json:"active"`
	// Keys holds every key that may open a payload, base64.
	Keys map[string]string `json:"keys"`
}

// ParseKeys reads keys as JSON: {"active": "2026-11", "keys": {"2026-11":
// "<base64 of 32 random bytes>", "2026-05": "…"}}.
func ParseKeys(b []byte) (Keys, error) {
	var k Keys
	if err := json.Unmarshal(b, &k); err != nil {
		return k, fmt.Errorf("codec keys: %w", err)
	}
	return k, nil
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
	aeads  map[string]cipher.AEAD
	scope  Scope
}

// New checks the keys and builds the codec. It seals in the system
// scope; see WithSerializationContext and InScope.
func New(k Keys) (*Codec, error) {
	c := &Codec{active: k.Active, aeads: map[string]cipher.AEAD{}}
	ids := make([]string, 0, len(k.Keys))
	for id := range k.Keys {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		raw, err := base64.StdEncoding.DecodeString(k.Keys[id])
		if err != nil || len(raw) != 32 {
			return nil, fmt.Errorf("codec key %q: want 32 bytes, base64", id)
		}
		block, err := aes.NewCipher(raw)
		if err != nil {
			return nil, fmt.Errorf("codec key %q: %w", id, err)
		}
		if c.aeads[id], err = cipher.NewGCM(block); err != nil {
			return nil, fmt.Errorf("codec key %q: %w", id, err)
		}
	}
	if c.aeads[k.Active] == nil {
		return nil, fmt.Errorf("codec: the active key %q is not among the keys", k.Active)
	}
	return c, nil
}

// InScope is the codec sealing in scope s, with the same keys.
func (c *Codec) InScope(s Scope) *Codec {
	if c.scope == s {
		return c
	}
	return &Codec{active: c.active, aeads: c.aeads, scope: s}
}

// Scope is the scope this codec seals in.
func (c *Codec) Scope() Scope { return c.scope }

// WithSerializationContext is the codec sealing in the scope of the
// workflow the SDK converts for (converter.PayloadCodecWithSerializationContext):
// the campus of a workflow or activity context's workflow ID, the system
// scope for anything else (a Nexus operation, an activity completed by
// task token alone).
func (c *Codec) WithSerializationContext(sc converter.SerializationContext) converter.PayloadCodec {
	var workflowID string
	switch sc := sc.(type) {
	case converter.WorkflowSerializationContext:
		workflowID = sc.WorkflowID
	case converter.ActivitySerializationContext:
		workflowID = sc.WorkflowID
	}
	return c.InScope(ScopeOfWorkflow(workflowID))
}

// Encode seals each payload with the active key, in the codec's scope.
func (c *Codec) Encode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	out := make([]*commonpb.Payload, len(payloads))
	aead := c.aeads[c.active]
	ad := associatedData(c.active, c.scope)
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
			},
			Data: aead.Seal(nonce, nonce, plain, ad),
		}
	}
	return out, nil
}

// Decode opens sealed payloads of any scope and passes others through
// (payloads written before encryption was on). A payload opens only
// under the scope it names (see ScopeOf); one of the first sealed format,
// which named no scope, opens under its key ID alone.
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
		id := string(p.GetMetadata()[KeyIDMeta])
		aead := c.aeads[id]
		if aead == nil {
			return nil, fmt.Errorf("codec: payload sealed with key %q, which this process does not hold", id)
		}
		ad := []byte(id) // the first format: the key ID alone
		if _, ok := p.GetMetadata()[ScopeMeta]; ok {
			ad = associatedData(id, scope)
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
func associatedData(keyID string, s Scope) []byte {
	return []byte("octflow-payload/2\x00" + keyID + "\x00" + s.String())
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
