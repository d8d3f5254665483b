package octdicom_test

import (
	"bytes"
	"errors"
	"reflect"
	"testing"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/proto"

	"octflow/codec"
	"octflow/exam"
	"octflow/octdicom"
	"octflow/octdicom/octdicomtest"
)

func newCodec(t *testing.T, id string) *codec.Codec {
	t.Helper()
	keys, err := codec.NewKeys(id)
	if err != nil {
		t.Fatal(err)
	}
	c, err := codec.New(keys)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// identifiers are the values of id that identify the patient or the
// study: none may be found in clear in a sealed identity.
func identifiers(id octdicom.Identity) []string {
	return []string{id.PatientName, "Müller", "Jürgen", id.PatientID, id.IssuerOfPatientID, id.PatientBirthDate, id.StudyInstanceUID,
		id.StudyID, id.AccessionNumber, id.ReferringPhysicianName, id.StudyDescription, id.SeriesInstanceUID, id.SOPInstanceUID,
		id.Requests[0].RequestedProcedureID, id.Requests[0].RequestedProcedureDescription, id.Requests[0].ScheduledProcedureStepID}
}

func TestASealedIdentityHoldsNoIdentifierInClearAndOpensOnlyForItsExam(t *testing.T) {
	c := newCodec(t, "2026-12")
	ref := exam.Ref{Campus: "north", ID: "ex-0123456789abcdef01234567"}
	id := octdicomtest.Identity(ref)
	sealed, err := octdicom.SealIdentity(c, id)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range identifiers(id) {
		if bytes.Contains(sealed, []byte(v)) {
			t.Errorf("the sealed identity holds %q in clear", v)
		}
	}
	// Twice sealed, twice different: a fresh nonce each time.
	if again, err := octdicom.SealIdentity(c, id); err != nil || bytes.Equal(again, sealed) {
		t.Errorf("sealing twice gave the same bytes (%v)", err)
	}
	got, err := octdicom.OpenIdentity(c, ref, sealed)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, id) {
		t.Errorf("opened\n %+v\nsealed\n %+v", got, id)
	}

	// The same bytes relabelled with another campus's scope: the seal
	// authenticates the scope, so it does not open there.
	relabel := func(campus string) []byte {
		var p commonpb.Payload
		if err := proto.Unmarshal(sealed, &p); err != nil {
			t.Fatal(err)
		}
		p.Metadata[codec.ScopeMeta] = []byte(codec.CampusScope(campus).String())
		b, err := proto.Marshal(&p)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	plain, err := converter.GetDefaultDataConverter().ToPayload(id)
	if err != nil {
		t.Fatal(err)
	}
	plainBytes, err := proto.Marshal(plain)
	if err != nil {
		t.Fatal(err)
	}
	south := exam.Ref{Campus: "south", ID: ref.ID}
	cases := []struct {
		name   string
		c      *codec.Codec
		ref    exam.Ref
		sealed []byte
		want   error // nil: any error
	}{
		{"another campus", c, south, sealed, octdicom.ErrWrongCampus},
		{"relabelled for another campus", c, south, relabel("south"), nil},
		{"another exam of the campus", c, exam.Ref{Campus: "north", ID: "ex-ffffffffffffffffffffffff"}, sealed, octdicom.ErrWrongCampus},
		{"other keys", newCodec(t, "2026-12"), ref, sealed, nil},
		{"a plaintext identity", c, ref, plainBytes, nil},
		{"not a payload", c, ref, []byte("garbage"), nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := octdicom.OpenIdentity(tc.c, tc.ref, tc.sealed)
			if err == nil {
				t.Fatal("opened")
			}
			if tc.want != nil && !errors.Is(err, tc.want) {
				t.Errorf("error %v, want %v", err, tc.want)
			}
			for _, v := range identifiers(id) {
				if bytes.Contains([]byte(err.Error()), []byte(v)) {
					t.Errorf("the error names %q", v)
				}
			}
		})
	}
}

// Whatever bytes are stored as an identity, opening them fails or
// succeeds without a panic, and never opens for another campus.
func FuzzOpenIdentity(f *testing.F) {
	c, err := codec.New(codec.Keys{Active: "k", Keys: map[string]string{"k": "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="}})
	if err != nil {
		f.Fatal(err)
	}
	ref := exam.Ref{Campus: "north", ID: "ex-0123456789abcdef01234567"}
	sealed, err := octdicom.SealIdentity(c, octdicomtest.Identity(ref))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(sealed)
	f.Add([]byte{})
	f.Add([]byte("garbage"))
	f.Fuzz(func(t *testing.T, b []byte) {
		if _, err := octdicom.OpenIdentity(c, exam.Ref{Campus: "south", ID: ref.ID}, b); err == nil {
			t.Fatal("opened for another campus")
		}
		if id, err := octdicom.OpenIdentity(c, ref, b); err == nil && id.Exam != ref {
			t.Fatalf("opened an identity of exam %v", id.Exam)
		}
	})
}
