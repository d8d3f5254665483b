package intake

import (
	"bytes"
	"io"
	"strings"
	"testing"

	"octflow/exam"
	"octflow/imaging"
	"octflow/octdicom"
)

// TestUIDReplacementIsKeyedPerCampus: a UID's replacement is stable
// within a campus, another at another campus or under another key, and
// never shows the UID; UIDs is UID for one campus.
func TestUIDReplacementIsKeyedPerCampus(t *testing.T) {
	const uid = "1.3.6.1.4.1.9590.100.1.2.1111"
	a, b := NewPseudonymizer([]byte("key-one-0123456789")), NewPseudonymizer([]byte("key-two-0123456789"))
	base := a.UID("north", uid)
	for _, c := range []struct {
		name string
		got  string
		same bool
	}{
		{"the same UID, campus and key", a.UID("north", uid), true},
		{"UIDs of the campus", a.UIDs("north")(uid), true},
		{"another campus", a.UID("south", uid), false},
		{"UIDs of another campus", a.UIDs("south")(uid), false},
		{"another key", b.UID("north", uid), false},
		{"another UID", a.UID("north", uid+"2"), false},
		// The campus and the UID are hashed apart, not run together.
		{"the campus's end moved into the UID", a.UID("nort", "h"+uid), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if (c.got == base) != c.same {
				t.Errorf("%q against %q: same %v, want %v", c.got, base, c.got == base, c.same)
			}
			if !strings.HasPrefix(c.got, "2.25.") || len(c.got) > 64 || strings.Contains(c.got, "9590") {
				t.Errorf("UID replacement %q", c.got)
			}
			for _, d := range c.got[len("2.25."):] {
				if d < '0' || d > '9' {
					t.Fatalf("UID replacement %q is not 2.25 and a decimal", c.got)
				}
			}
		})
	}
}

// TestACampusCopyHasItsCampusUIDs: the gateway de-identifies an upload
// with the UIDs of the uploading device's campus, so the same scan sent
// at two campuses gives two copies no UID links.
func TestACampusCopyHasItsCampusUIDs(t *testing.T) {
	in := intakeFor(t, Limits{})
	v := imaging.NewVolume(2, 16, 16, imaging.Spacing{AxialUm: 3.9, LateralUm: 11.7, FrameUm: 120})
	h := octdicom.Header{SOPInstanceUID: "1.3.6.1.4.1.9590.100.1.2.1111", StudyInstanceUID: "1.3.6.1.4.1.9590.100.1.2.2222",
		SeriesInstanceUID: "1.3.6.1.4.1.9590.100.1.2.3333", PatientID: "MRN-4471982"}
	var scan bytes.Buffer
	if err := octdicom.WriteDICOM(&scan, v, h); err != nil {
		t.Fatal(err)
	}
	seen := map[string]string{}
	for _, campus := range []string{"north", "south"} {
		_, up, clean, err := take(in, campus, Meta{ExamID: "E-1"}, scan.Bytes())
		if err != nil {
			t.Fatal(err)
		}
		copied, err := io.ReadAll(clean.file)
		up.Close()
		clean.Close()
		if err != nil {
			t.Fatal(err)
		}
		_, got, err := octdicom.ReadDICOM(bytes.NewReader(copied), int64(len(copied)))
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range []struct{ orig, got string }{
			{h.SOPInstanceUID, got.SOPInstanceUID}, {h.StudyInstanceUID, got.StudyInstanceUID}, {h.SeriesInstanceUID, got.SeriesInstanceUID},
		} {
			if want := in.cfg.Pseudonymizer.UID(campus, u.orig); u.got != want {
				t.Errorf("%s: %s became %s, want its campus's %s", campus, u.orig, u.got, want)
			}
			if other, ok := seen[u.got]; ok {
				t.Errorf("%s and %s copies share the UID %s", other, campus, u.got)
			}
			seen[u.got] = campus
		}
	}
}

// TestExamReferencesAreKeyedPerCampus: an exam's reference is stable for
// the same exam ID, campus and key, another for anything else, has the
// reference's form, never shows the ID, and a reference is its own
// reference (a request may name an exam either way).
func TestExamReferencesAreKeyedPerCampus(t *testing.T) {
	const id = "ACC-20261130-0042"
	a, b := NewPseudonymizer([]byte("key-one-0123456789")), NewPseudonymizer([]byte("key-two-0123456789"))
	base := a.Exam("north", id)
	for _, c := range []struct {
		name string
		got  string
		same bool
	}{
		{"the same ID, campus and key", a.Exam("north", id), true},
		{"ExamRef", a.ExamRef("north", id).ID, true},
		{"the reference itself", a.Exam("north", base), true},
		{"another campus", a.Exam("south", id), false},
		{"another key", b.Exam("north", id), false},
		{"another ID", a.Exam("north", id+"3"), false},
		{"the campus's end moved into the ID", a.Exam("nort", "h"+id), false},
		{"a patient pseudonym of the same ID", a.Ref("north", id), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if (c.got == base) != c.same {
				t.Errorf("%q against %q: same %v, want %v", c.got, base, c.got == base, c.same)
			}
		})
	}
	if !exam.IsReference(base) || strings.Contains(base, "0042") {
		t.Errorf("reference %q", base)
	}
	// A patient pseudonym of the same ID is another keyed hash, not the
	// same digits under another prefix.
	if pt := strings.TrimPrefix(a.Ref("north", id), "pt-"); pt == strings.TrimPrefix(base, exam.ReferencePrefix) {
		t.Errorf("the exam reference and the patient pseudonym of %s share their digits %s", id, pt)
	}
	if ref := a.ExamRef("north", id); ref.Campus != "north" || ref.Validate() != nil {
		t.Errorf("ExamRef = %+v", ref)
	}
}

func TestPseudonymIsStableKeyedPerCampusAndHidesTheID(t *testing.T) {
	a, b := NewPseudonymizer([]byte("key-one-0123456789")), NewPseudonymizer([]byte("key-two-0123456789"))
	ref := a.Ref("north", "PAT-0042")
	if ref != a.Ref("north", "PAT-0042") {
		t.Error("pseudonym not stable")
	}
	if ref == b.Ref("north", "PAT-0042") {
		t.Error("pseudonym does not depend on the key")
	}
	if ref == a.Ref("south", "PAT-0042") {
		t.Error("two campuses share a pseudonym: a campus is a tenant")
	}
	if strings.Contains(ref, "0042") || !strings.HasPrefix(ref, "pt-") || len(ref) != 27 {
		t.Errorf("pseudonym %q", ref)
	}
	if a.Ref("north", "") != "" {
		t.Error("empty ID must give no pseudonym")
	}
	uid := a.UID("north", "1.3.6.1.4.1.9590.100.1.2.1111")
	if uid != a.UID("north", "1.3.6.1.4.1.9590.100.1.2.1111") || uid == b.UID("north", "1.3.6.1.4.1.9590.100.1.2.1111") ||
		!strings.HasPrefix(uid, "2.25.") || len(uid) > 64 || strings.Contains(uid, "9590") {
		t.Errorf("UID replacement %q", uid)
	}
}
