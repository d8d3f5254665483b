package api

import (
	"encoding/xml"
	"octflow/octdicom"
	"slices"
	"testing"
)

// TestTheAnswerIsGivenAsTheAcceptHeaderAllows: DICOM JSON unless the
// client's Accept rules it out; DICOM XML where only that is allowed
// (dcm4che's stowrs asks for it); nothing (406) where neither is.
func TestTheAnswerIsGivenAsTheAcceptHeaderAllows(t *testing.T) {
	for _, c := range []struct {
		accept []string
		want   string
	}{
		{nil, mediaDICOMJSON},
		{[]string{""}, mediaDICOMJSON},
		{[]string{"application/dicom+json"}, mediaDICOMJSON},
		{[]string{"application/json"}, mediaDICOMJSON},
		{[]string{"*/*"}, mediaDICOMJSON},
		{[]string{"application/*;q=0.2"}, mediaDICOMJSON},
		{[]string{"application/dicom+xml", "application/dicom+json"}, mediaDICOMJSON},
		{[]string{"application/dicom+xml"}, mediaDICOMXML},
		{[]string{"application/dicom+json;q=0, application/dicom+xml"}, mediaDICOMXML},
		{[]string{"application/dicom+json;q=0"}, ""},
		{[]string{"application/dicom+json;q=0.000, text/html"}, ""},
		{[]string{"application/dicom+json;q=abc"}, ""},
		{[]string{"application/dicom+json;q=-1"}, ""},
		{[]string{"multipart/related; type=\"application/dicom\""}, ""},
	} {
		if got := stowAnswerType(c.accept); got != c.want {
			t.Errorf("Accept %q: %q, want %q", c.accept, got, c.want)
		}
	}
}

// TestTheXMLAnswerIsTheJSONAnswerInTheNativeModel: the same attributes,
// in tag order, sequences as numbered items, the private attribute with
// its creator, values escaped.
func TestTheXMLAnswerIsTheJSONAnswerInTheNativeModel(t *testing.T) {
	answer := stowAnswer([]stowResult{
		{sopClass: "1.2.840.10008.5.1.4.1.1.77.1.5.4", sopInstance: "2.25.1", status: "/v1/exams/x?campus=a&b"},
		{sopInstance: "2.25.2", reason: octdicom.FailureOtherStudy},
	}, "https://octflow.test")
	b, err := answer.NativeXML()
	if err != nil {
		t.Fatal(err)
	}
	type attr struct {
		Tag            string `xml:"tag,attr"`
		VR             string `xml:"vr,attr"`
		PrivateCreator string `xml:"privateCreator,attr"`
		Values         []struct {
			Number int    `xml:"number,attr"`
			Text   string `xml:",chardata"`
		} `xml:"Value"`
		Items []struct {
			Number int    `xml:"number,attr"`
			Attrs  []attr `xml:"DicomAttribute"`
		} `xml:"Item"`
	}
	var model struct {
		XMLName xml.Name `xml:"http://dicom.nema.org/PS3.19/models/NativeDICOM NativeDicomModel"`
		Attrs   []attr   `xml:"DicomAttribute"`
	}
	if err := xml.Unmarshal(b, &model); err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	var tags []string
	for _, a := range model.Attrs {
		tags = append(tags, a.Tag)
	}
	if want := []string{"00081190", "00081198", "00081199"}; !slices.Equal(tags, want) {
		t.Fatalf("attributes %v, want %v in tag order", tags, want)
	}
	stored := model.Attrs[2].Items
	if len(stored) != 1 || stored[0].Number != 1 {
		t.Fatalf("stored items %+v", stored)
	}
	found := map[string]attr{}
	for _, a := range stored[0].Attrs {
		found[a.Tag] = a
	}
	if a := found["00091001"]; a.PrivateCreator != "OCTFLOW" || len(a.Values) != 1 || a.Values[0].Text != "https://octflow.test/v1/exams/x?campus=a&b" {
		t.Errorf("the exam status URL %+v", a)
	}
	if a := found["00081196"]; len(a.Values) != 1 || a.Values[0].Text != "45056" {
		t.Errorf("the warning reason %+v", a)
	}
	if a := found["00090010"]; a.PrivateCreator != "" || a.Values[0].Text != "OCTFLOW" {
		t.Errorf("the private creator %+v", a)
	}
	failed := model.Attrs[1].Items
	if len(failed) != 1 || len(failed[0].Attrs) != 2 || failed[0].Attrs[1].Tag != "00081197" || failed[0].Attrs[1].Values[0].Text != "50185" {
		t.Errorf("failed items %+v", failed)
	}
}
