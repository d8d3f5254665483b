package octdicom

import (
	"errors"
	"fmt"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/proto"

	"octflow/codec"
	"octflow/exam"
)

// IdentityContentType is the content type a sealed identity is stored
// under.
const IdentityContentType = "application/vnd.octflow.sealed-identity"

// ErrWrongCampus is wrapped by OpenIdentity's refusal of an identity
// sealed for another campus, or for another exam.
var ErrWrongCampus = errors.New("the identity is not sealed for this exam's campus")

// SealIdentity seals id for its exam's campus with the payload codec's
// keys: AES-256-GCM under the active key, the campus's scope sealed in
// as associated data (see package codec), so the object names the key
// and the campus it was sealed for and opens under no other campus. The
// result is a Temporal payload in its protobuf encoding, to be stored as
// an object (exam.IdentityKey): it never travels through Temporal, and
// nothing in it is readable without the keys. Key rotation is the
// codec's: an identity opens as long as the key that sealed it is
// listed, so a retired key stays listed as long as exams sealed with it
// are kept.
func SealIdentity(c *codec.Codec, id Identity) ([]byte, error) {
	if c == nil {
		return nil, errors.New("seal identity: no keys")
	}
	if err := id.Exam.Validate(); err != nil {
		return nil, fmt.Errorf("seal identity: %w", err)
	}
	plain, err := converter.GetDefaultDataConverter().ToPayload(id)
	if err != nil {
		return nil, fmt.Errorf("seal identity: %w", err)
	}
	sealed, err := c.InScope(codec.CampusScope(id.Exam.Campus)).Encode([]*commonpb.Payload{plain})
	if err != nil {
		return nil, fmt.Errorf("seal identity: %w", err)
	}
	b, err := proto.Marshal(sealed[0])
	if err != nil {
		return nil, fmt.Errorf("seal identity: %w", err)
	}
	return b, nil
}

// OpenIdentity opens an identity SealIdentity sealed for the exam ref.
// It refuses anything not sealed (a plaintext payload is never taken),
// an identity sealed for another campus (the scope it names, which the
// seal authenticates), one whose seal does not hold (tampered, or a key
// this process does not hold), and one sealed for another exam of the
// same campus. Errors never hold the identity.
func OpenIdentity(c *codec.Codec, ref exam.Ref, sealed []byte) (Identity, error) {
	if c == nil {
		return Identity{}, errors.New("open identity: no keys")
	}
	var p commonpb.Payload
	if err := proto.Unmarshal(sealed, &p); err != nil {
		return Identity{}, fmt.Errorf("open identity: not a sealed payload: %w", err)
	}
	scope, isSealed, err := codec.ScopeOf(&p)
	switch {
	case err != nil:
		return Identity{}, fmt.Errorf("open identity: %w", err)
	case !isSealed:
		return Identity{}, errors.New("open identity: the object is not sealed")
	case scope != codec.CampusScope(ref.Campus):
		return Identity{}, fmt.Errorf("open identity: sealed for %s, not campus %s: %w", scope, ref.Campus, ErrWrongCampus)
	}
	plain, err := c.Decode([]*commonpb.Payload{&p})
	if err != nil {
		return Identity{}, fmt.Errorf("open identity: %w", err)
	}
	var id Identity
	if err := converter.GetDefaultDataConverter().FromPayload(plain[0], &id); err != nil {
		// The decoder's error may quote the plaintext: not repeated.
		return Identity{}, errors.New("open identity: the sealed payload is not an identity")
	}
	if id.Exam != ref {
		return Identity{}, fmt.Errorf("open identity: sealed for another exam: %w", ErrWrongCampus)
	}
	return id, nil
}
