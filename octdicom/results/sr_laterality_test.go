package results

import (
	"slices"
	"strings"
	"testing"

	"octflow/imaging"
	"octflow/octdicom/octdicomtest"
	"octflow/report"

	"github.com/suyashkumar/dicom"
	"github.com/suyashkumar/dicom/pkg/tag"
)

// srCode is a coded entry: code value, coding scheme, meaning.
type srCode struct{ value, scheme, meaning string }

// seqItems are the items of the sequence tg in els, or nil.
func seqItems(els []*dicom.Element, tg tag.Tag) [][]*dicom.Element {
	var out [][]*dicom.Element
	for _, el := range els {
		if el.Tag != tg {
			continue
		}
		items, _ := el.Value.GetValue().([]*dicom.SequenceItemValue)
		for _, it := range items {
			out = append(out, it.GetValue().([]*dicom.Element))
		}
	}
	return out
}

// codeIn is the first coded entry of the sequence tg in els.
func codeIn(els []*dicom.Element, tg tag.Tag) (srCode, bool) {
	items := seqItems(els, tg)
	if len(items) == 0 {
		return srCode{}, false
	}
	var c srCode
	for _, el := range items[0] {
		v, _ := el.Value.GetValue().([]string)
		if len(v) == 0 {
			continue
		}
		s := strings.TrimRight(v[0], "\x00 ")
		switch el.Tag {
		case tag.CodeValue:
			c.value = s
		case tag.CodingSchemeDesignator:
			c.scheme = s
		case tag.CodeMeaning:
			c.meaning = s
		}
	}
	return c, true
}

// conceptValues are the values of the SR's CODE content items named
// concept (a code value), anywhere in its content tree.
func conceptValues(items [][]*dicom.Element, concept string) []srCode {
	var out []srCode
	for _, it := range items {
		if name, ok := codeIn(it, tag.ConceptNameCodeSequence); ok && name.value == concept {
			if v, ok := codeIn(it, tag.ConceptCodeSequence); ok {
				out = append(out, v)
			}
		}
		out = append(out, conceptValues(seqItems(it, tag.ContentSequence), concept)...)
	}
	return out
}

// TestTheMacularGridReportNamesTheEye builds the Macular Grid SR for
// either eye, from the report's eye or, where the report gives none, the
// scan's laterality, and reads its measurement group's Laterality
// (SCT 272741003) back: Right (SCT 24028007) for a right eye, Left (SCT
// 7771000) for a left one, the report's eye before the scan's; where
// neither says, no SR at all (TID 2120 requires the eye).
func TestTheMacularGridReportNamesTheEye(t *testing.T) {
	right := srCode{"24028007", "SCT", "Right"}
	left := srCode{"7771000", "SCT", "Left"}
	for _, c := range []struct {
		name      string
		reportEye string // the report's eye: OD, OS or none
		scanSide  string // the source scan's laterality: R, L or none
		want      *srCode
	}{
		{"right eye, report and scan", "OD", "R", &right},
		{"left eye, report and scan", "OS", "L", &left},
		{"right eye, report only", "OD", "", &right},
		{"left eye, report only", "OS", "", &left},
		{"right eye, scan only", "", "R", &right},
		{"left eye, scan only", "", "L", &left},
		{"the report's right eye outranks the scan's L", "OD", "L", &right},
		{"the report's left eye outranks the scan's R", "OS", "R", &left},
		{"neither says", "", "", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			id := octdicomtest.Identity(testRef)
			id.Laterality = c.scanSide
			rep := cubeReport()
			rep.Eye = c.reportEye
			var sr *Object
			objs := build(t, id, rep, []byte("%PDF-1.4 test"))
			for i := range objs {
				if objs[i].Kind == KindMacularGridSR {
					sr = &objs[i]
				}
			}
			switch {
			case sr == nil && c.want == nil:
				return // the PDF alone: an SR would lack TID 2120's laterality
			case sr == nil:
				t.Fatalf("no Macular Grid SR among the results of a measured cube")
			case c.want == nil:
				t.Fatalf("a Macular Grid SR although neither the report nor the scan names the eye")
			}
			got := conceptValues(seqItems(parse(t, *sr).Elements, tag.ContentSequence), "272741003")
			switch {
			case len(got) != 1:
				t.Errorf("the SR of a %s eye (report eye %q, scan laterality %q) has %d Laterality items %v, want one: (%s, %s, %q)",
					c.want.meaning, c.reportEye, c.scanSide, len(got), got, c.want.value, c.want.scheme, c.want.meaning)
			case got[0] != *c.want:
				t.Errorf("the SR of a %s eye (report eye %q, scan laterality %q) names the eye (%s, %s, %q), want (%s, %s, %q): the report would be filed against the wrong eye",
					c.want.meaning, c.reportEye, c.scanSide, got[0].value, got[0].scheme, got[0].meaning, c.want.value, c.want.scheme, c.want.meaning)
			}
		})
	}
}

// srTexts are the values of the SR's TEXT content items, anywhere in
// its content tree.
func srTexts(items [][]*dicom.Element) []string {
	var out []string
	for _, it := range items {
		for _, el := range it {
			if el.Tag == tag.TextValue {
				if v, _ := el.Value.GetValue().([]string); len(v) > 0 {
					out = append(out, strings.TrimRight(v[0], "\x00 "))
				}
			}
		}
		out = append(out, srTexts(seqItems(it, tag.ContentSequence))...)
	}
	return out
}

// TestTheMacularGridReportSaysTheLesionFinding: the SR carries the
// report's lesion finding word for word (what the PDF and the JSON say),
// whether none was found, some were, or they were withheld; and it says
// there is none only when the report does.
func TestTheMacularGridReportSaysTheLesionFinding(t *testing.T) {
	for _, c := range []struct {
		name     string
		edit     func(r *report.Report)
		noneSaid bool
	}{
		{"graded in full, none found", func(r *report.Report) { r.Quality.GradableFraction = 1 }, true},
		{"graded in part, none found", func(*report.Report) {}, false},
		{"drusen found", func(r *report.Report) {
			r.Lesions = []imaging.Lesion{{Type: imaging.Drusen, Frame: 24, Col: 256}}
		}, false},
		{"withheld", func(r *report.Report) {
			r.LesionsWithheld = "the BM boundary is reliable in only 21% of the graded A-scans"
		}, false},
		{"found where not graded", func(r *report.Report) { r.Quality.GradableFraction, r.LesionsUngraded = 1, 1 }, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			rep := cubeReport()
			c.edit(rep)
			var sr *Object
			objs := build(t, octdicomtest.Identity(testRef), rep, []byte("%PDF-1.4 test"))
			for i := range objs {
				if objs[i].Kind == KindMacularGridSR {
					sr = &objs[i]
				}
			}
			if sr == nil {
				t.Fatal("no Macular Grid SR among the results of a measured cube")
			}
			want := "Fluid and drusen: " + rep.Finding()
			texts := srTexts(seqItems(parse(t, *sr).Elements, tag.ContentSequence))
			if !slices.Contains(texts, want) {
				t.Errorf("the SR's comments %q lack the report's finding %q", texts, want)
			}
			if said := strings.Contains(strings.Join(texts, "\n"), report.NoLesionFound); said != c.noneSaid {
				t.Errorf("the SR says no lesion was detected: %v, want %v (%q)", said, c.noneSaid, texts)
			}
		})
	}
}
