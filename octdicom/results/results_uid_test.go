package results

import (
	"testing"

	"octflow/exam"
	"octflow/octdicom"
	"octflow/octdicom/octdicomtest"
)

// TestResultUIDsAreKeyedByCampusExamAndRun walks the keys the results'
// series and instance UIDs are derived from (DerivedUID: campus, exam,
// the report's run, the object's role): each object's UIDs are the same
// on every call for the same keys and differ when any one key does, so
// that two campuses, two exams or two runs never file over each other in
// a PACS, and no two objects of one run share a UID.
func TestResultUIDsAreKeyedByCampusExamAndRun(t *testing.T) {
	base := exam.Ref{Campus: "north", ID: "ex-0123456789abcdef01234567"}
	seen := map[string]string{} // UID: whose
	for _, c := range []struct {
		name string
		ref  exam.Ref
		run  string
	}{
		{"the exam", base, "run-1"},
		{"another campus, the same exam ID", exam.Ref{Campus: "south", ID: base.ID}, "run-1"},
		{"another exam of the campus", exam.Ref{Campus: base.Campus, ID: "ex-76543210fedcba9876543210"}, "run-1"},
		{"another run of the exam", base, "run-2"},
	} {
		uids := func() map[string]string {
			rep := cubeReport()
			rep.Campus, rep.ExamID, rep.Run = c.ref.Campus, c.ref.ID, c.run
			out := map[string]string{}
			for _, o := range build(t, octdicomtest.Identity(c.ref), rep, []byte("%PDF-1.4 test")) {
				out[o.Kind+" series"] = o.SeriesInstanceUID
				out[o.Kind+" instance"] = o.SOPInstanceUID
			}
			return out
		}
		got, again := uids(), uids()
		if len(got) != 4 {
			t.Fatalf("%s: %d UIDs %v, want a PDF's and an SR's series and instance", c.name, len(got), got)
		}
		for role, u := range got {
			if again[role] != u {
				t.Errorf("%s: the %s UID is %s, then %s: a resend would file a second copy", c.name, role, u, again[role])
			}
			if !octdicom.ValidUID(u) {
				t.Errorf("%s: the %s UID %q is not a valid UID", c.name, role, u)
			}
			if prev, dup := seen[u]; dup {
				t.Errorf("%s: its %s UID %s is also %s: the keys do not all reach the derivation, and one would file over the other", c.name, role, u, prev)
			}
			seen[u] = "the " + role + " UID of " + c.name
		}
	}
}
