// Package codec encrypts what octflow sends through Temporal. Workflow
// inputs and results, activity inputs and outputs, heartbeats, memos,
// signals, queries, updates and failure messages are sealed with
// AES-256-GCM before they leave the process, so Temporal's database and
// history hold ciphertext: a callback URL, a pseudonym or a clinician's
// note is readable only by a process that holds the keys (and, through
// the api's codec endpoint, by an authorised operator in the Web UI).
//
// Keys have IDs so they can rotate: the active key seals, every listed
// key opens, and each payload names the key that sealed it. Search
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

// Codec is a converter.PayloadCodec that seals payloads with AES-256-GCM.
type Codec struct {
	active string
	aeads  map[string]cipher.AEAD
}

// New checks the keys and builds the codec.
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

// Encode seals each payload with the active key.
func (c *Codec) Encode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	out := make([]*commonpb.Payload, len(payloads))
	aead := c.aeads[c.active]
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
			Metadata: map[string][]byte{converter.MetadataEncoding: []byte(Encoding), KeyIDMeta: []byte(c.active)},
			Data:     aead.Seal(nonce, nonce, plain, []byte(c.active)),
		}
	}
	return out, nil
}

// Decode opens sealed payloads and passes others through (payloads
// written before encryption was on).
func (c *Codec) Decode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	out := make([]*commonpb.Payload, len(payloads))
	for i, p := range payloads {
		if string(p.GetMetadata()[converter.MetadataEncoding]) != Encoding {
			out[i] = p
			continue
		}
		id := string(p.GetMetadata()[KeyIDMeta])
		aead := c.aeads[id]
		if aead == nil {
			return nil, fmt.Errorf("codec: payload sealed with key %q, which this process does not hold", id)
		}
		data := p.GetData()
		if len(data) < aead.NonceSize() {
			return nil, errors.New("codec: sealed payload too short")
		}
		plain, err := aead.Open(nil, data[:aead.NonceSize()], data[aead.NonceSize():], []byte(id))
		if err != nil {
			return nil, fmt.Errorf("codec: open payload sealed with key %q: %w", id, err)
		}
		out[i] = &commonpb.Payload{}
		if err := proto.Unmarshal(plain, out[i]); err != nil {
			return nil, fmt.Errorf("codec: %w", err)
		}
	}
	return out, nil
}

// Converters are the data and failure converters of a Temporal client
// that seals with c (nil c: Temporal's defaults, nothing sealed).
// Failure messages and stack traces are sealed too.
func Converters(c *Codec) (converter.DataConverter, converter.FailureConverter) {
	if c == nil {
		return converter.GetDefaultDataConverter(), temporal.GetDefaultFailureConverter()
	}
	dc := converter.NewCodecDataConverter(converter.GetDefaultDataConverter(), c)
	return dc, temporal.NewDefaultFailureConverter(temporal.DefaultFailureConverterOptions{DataConverter: dc, EncodeCommonAttributes: true})
}
