package octdicom

import (
	"slices"
	"strings"
	"testing"
)

func TestStoreFailuresNameEachRefusedInstanceAndItsReason(t *testing.T) {
	cases := []struct {
		name, answer string
		want         []string
	}{
		{"two refused, one without a UID",
			`{"00081198": {"vr": "SQ", "Value": [
				{"00081155": {"vr": "UI", "Value": ["1.2.3"]}, "00081197": {"vr": "US", "Value": [49442]}},
				{"00081197": {"vr": "US", "Value": [272]}}]}}`,
			[]string{"1.2.3: reason 49442", "an instance: reason 272"}},
		{"a failure without a reason", `{"00081198": {"vr": "SQ", "Value": [{"00081155": {"vr": "UI", "Value": ["1.2.4"]}}]}}`,
			[]string{"1.2.4: no reason given"}},
		{"all stored", `{"00081199": {"vr": "SQ", "Value": [{"00081155": {"vr": "UI", "Value": ["1.2.3"]}}]}}`, nil},
		{"not DICOM JSON", `<NativeDicomModel/>`, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := StoreFailures([]byte(c.answer)); !slices.Equal(got, c.want) {
				t.Errorf("failures %q, want %q", got, c.want)
			}
		})
	}
}

func TestTheNativeModelNestsSequencesAndNamesThePrivateCreator(t *testing.T) {
	d := JSONDataset{
		TagReferencedSOPSequence: {VR: "SQ", Value: []any{JSONDataset{
			TagReferencedSOPInstanceUID: {VR: "UI", Value: []any{"1.2.3"}},
			TagExamStatusURL:            {VR: "UR", Value: []any{"https://x.test/v1/exams/a?b=1&c=2"}},
		}}},
		TagRetrieveURL: {VR: "UR"},
	}
	b, err := d.NativeXML()
	if err != nil {
		t.Fatal(err)
	}
	got := string(b)
	for _, want := range []string{
		`<DicomAttribute tag="00081190" vr="UR"></DicomAttribute><DicomAttribute tag="00081199" vr="SQ"><Item number="1">`,
		`<DicomAttribute tag="00081155" vr="UI"><Value number="1">1.2.3</Value></DicomAttribute>`,
		`<DicomAttribute tag="00091001" vr="UR" privateCreator="OCTFLOW"><Value number="1">https://x.test/v1/exams/a?b=1&amp;c=2</Value>`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("native model lacks %s:\n%s", want, got)
		}
	}
}
