package codec

import (
	"bytes"
	"strings"
	"testing"

	"go.temporal.io/sdk/converter"
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
