package intake

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"octflow/codec"
	"octflow/exam"
	"octflow/imaging"
	"octflow/octdicom"
	"octflow/storage/storagetest"
)

// A scan's original identity is kept for the way back sealed for its
// campus, under the exam's own prefix and the upload's digest: the
// stored object holds no identifier in clear and opens only for that
// campus and exam. A resend of a scan whose exam has it stores nothing
// more; a scan that names no study keeps nothing; without the identity
// keys nothing is kept. The payload codec's keys, which every GPU node
// holds, do not open it.
func TestTheOriginalIdentityIsKeptSealedWithTheExam(t *testing.T) {
	keys, err := codec.NewKeys("2026-12")
	if err != nil {
		t.Fatal(err)
	}
	sealer, err := codec.New(keys)
	if err != nil {
		t.Fatal(err)
	}
	nodeKeys, err := codec.NewKeys("2026-12")
	if err != nil {
		t.Fatal(err)
	}
	payloads, err := codec.New(nodeKeys)
	if err != nil {
		t.Fatal(err)
	}
	p := imaging.NewPhantom(imaging.PhantomOptions{Seed: 1, Frames: 3, Rows: 64, Cols: 16})
	scan := func(h octdicom.Header) []byte {
		var b bytes.Buffer
		if err := octdicom.WriteDICOM(&b, p.Volume, h); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	id := octdicom.DeviceIdentity{PatientName: "Doe^John", PatientBirthDate: "19610203", AccessionNumber: "ACC-2026-77",
		ReferringPhysician: "Who^Doctor", StudyDate: "20261130"}
	named := scan(octdicom.Header{SOPInstanceUID: "1.2.826.0.1.99.3", StudyInstanceUID: "1.2.826.0.1.99",
		SeriesInstanceUID: "1.2.826.0.1.99.2", PatientID: "PID-4711", Identity: &id})
	identifiers := []string{"Doe^John", "PID-4711", "19610203", "ACC-2026-77", "Who^Doctor", "1.2.826.0.1.99"}
	unnamed := scan(octdicom.Header{SOPInstanceUID: "1.2.826.0.1.98.3", PatientID: "PID-4711"})

	pseudonyms := NewPseudonymizer([]byte(testKey))
	ref := pseudonyms.ExamRef("north", "E-1")
	upload := func(t *testing.T, in *Intake, b []byte) *Upload {
		up := &Upload{}
		t.Cleanup(up.Close)
		if err := in.spoolScan(up, bytes.NewReader(b)); err != nil {
			t.Fatal(err)
		}
		return up
	}
	ctx := context.Background()

	t.Run("sealed with the exam", func(t *testing.T) {
		store := &storagetest.Memory{}
		in := newIntake(t, Config{Store: store, Identities: sealer})
		up := upload(t, in, named)
		if err := in.KeepIdentity(ctx, ref, up); err != nil {
			t.Fatal(err)
		}
		key := exam.IdentityKey(ref, up.Digest)
		if puts := store.Puts(); len(puts) != 1 || puts[0] != key {
			t.Fatalf("stored %v, want only %s", puts, key)
		}
		if !strings.HasPrefix(key, exam.ScansPrefix+ref.Campus+"/"+ref.ID+"/") {
			t.Errorf("the identity's key %s is not under the exam's prefix", key)
		}
		sealed := store.Object(key)
		for _, v := range identifiers {
			if bytes.Contains(sealed, []byte(v)) || strings.Contains(key, v) {
				t.Errorf("the stored identity holds %q in clear", v)
			}
		}
		got, err := octdicom.OpenIdentity(sealer, ref, sealed)
		if err != nil {
			t.Fatal(err)
		}
		if got.PatientID != "PID-4711" || got.PatientName != "Doe^John" || got.StudyInstanceUID != "1.2.826.0.1.99" ||
			got.SOPInstanceUID != "1.2.826.0.1.99.3" || got.ScanDigest != up.Digest || got.Exam != ref {
			t.Errorf("opened %+v", got)
		}
		if _, err := octdicom.OpenIdentity(sealer, pseudonyms.ExamRef("south", "E-1"), sealed); !errors.Is(err, octdicom.ErrWrongCampus) {
			t.Errorf("opened for another campus: %v", err)
		}
		// A GPU node's bundle holds the payload keys (same key ID, as a
		// site's first keys usually are): the identity stays closed.
		if got, err := octdicom.OpenIdentity(payloads, ref, sealed); err == nil {
			t.Errorf("the payload codec's keys, a GPU node's, opened the identity: %+v", got.Exam)
		}
		// A resend: the identity is there, nothing more is stored.
		if err := in.EnsureIdentity(ctx, ref, upload(t, in, named)); err != nil || len(store.Puts()) != 1 {
			t.Errorf("a resend stored %v (%v)", store.Puts(), err)
		}
		// An exam accepted before identities were kept gets it on a resend.
		_ = store.Delete(ctx, key)
		if err := in.EnsureIdentity(ctx, ref, upload(t, in, named)); err != nil || store.Object(key) == nil {
			t.Errorf("a resend did not restore the identity (%v)", err)
		}
	})

	cases := []struct {
		name  string
		codec *codec.Codec
		scan  []byte
	}{
		{"a scan that names no study", sealer, unnamed},
		{"a gateway without the identity keys", nil, named},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			store := &storagetest.Memory{}
			in := newIntake(t, Config{Store: store, Identities: c.codec})
			if err := in.KeepIdentity(ctx, ref, upload(t, in, c.scan)); err != nil {
				t.Fatal(err)
			}
			if puts := store.Puts(); len(puts) != 0 {
				t.Errorf("stored %v", puts)
			}
		})
	}
}
