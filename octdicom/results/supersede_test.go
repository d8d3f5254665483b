package results

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/suyashkumar/dicom"
	"github.com/suyashkumar/dicom/pkg/tag"

	"octflow/octdicom/octdicomtest"
	"octflow/report"
)

// hierRef is one object a Hierarchical SOP Instance Reference item
// names: its study, series, SOP class and instance.
type hierRef struct{ study, series, class, instance string }

// hierRefs reads the items of the sequence tg of els (Predecessor
// Documents, Current Requested Procedure Evidence), each a study with
// its series and their objects.
func hierRefs(els []*dicom.Element, tg tag.Tag) []hierRef {
	var out []hierRef
	for _, study := range seqItems(els, tg) {
		for _, series := range seqItems(study, tag.ReferencedSeriesSequence) {
			for _, sop := range seqItems(series, tag.ReferencedSOPSequence) {
				out = append(out, hierRef{first(study, tag.StudyInstanceUID), first(series, tag.SeriesInstanceUID),
					first(sop, tag.ReferencedSOPClassUID), first(sop, tag.ReferencedSOPInstanceUID)})
			}
		}
	}
	return out
}

// refOf is how a Hierarchical SOP Instance Reference names o.
func refOf(o Object) hierRef {
	return hierRef{o.StudyInstanceUID, o.SeriesInstanceUID, o.SOPClassUID, o.SOPInstanceUID}
}

// supersededBy is what a run's objects leave for the next run to
// replace, as the export records them: every object but a rejection note.
func supersededBy(runs int, objs ...[]Object) Superseded {
	s := Superseded{Runs: runs}
	for _, run := range objs {
		for _, o := range run {
			if o.Kind != KindRejection {
				s.Objects = append(s.Objects, o.Reference())
			}
		}
	}
	return s
}

// rerunOf is a report of another run of the same exam.
func rerunOf(rep *report.Report, run string) *report.Report {
	r := *rep
	r.Run = run
	return &r
}

func buildSuperseding(t *testing.T, rep *report.Report, prior Superseded) []Object {
	t.Helper()
	objs, err := BuildSuperseding(octdicomtest.Identity(testRef), rep, renderPDF(t, rep), Software{Version: "v0.27.0"}, prior)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

func byKind(objs []Object) map[string]Object {
	out := map[string]Object{}
	for _, o := range objs {
		out[o.Kind] = o
	}
	return out
}

// A rerun's PDF and SR name the earlier run's PDF and SR as their
// predecessors (the latest of their SOP class: none when no earlier run
// sent one), its series are numbered apart from every earlier run's, and
// a rejection note rejects every earlier object; a first run's objects
// name no predecessor and carry no rejection note.
func TestARerunsResultsReferenceAndRejectTheEarlierRuns(t *testing.T) {
	id := octdicomtest.Identity(testRef)
	for _, c := range []struct {
		name    string
		earlier []*report.Report // the earlier runs' reports, oldest first
		rerun   *report.Report
	}{
		{"a cube rerun", []*report.Report{cubeReport()}, rerunOf(cubeReport(), "run-2")},
		{"a cube rerun after an ungradable run (no earlier SR)", []*report.Report{ungradableCube()}, rerunOf(cubeReport(), "run-2")},
		{"an ungradable rerun after a cube", []*report.Report{cubeReport()}, rerunOf(ungradableCube(), "run-2")},
		{"a third run", []*report.Report{cubeReport(), rerunOf(cubeReport(), "run-2")}, rerunOf(cubeReport(), "run-3")},
	} {
		t.Run(c.name, func(t *testing.T) {
			var earlier [][]Object
			for i, rep := range c.earlier {
				earlier = append(earlier, buildSuperseding(t, rep, supersededBy(i, earlier...)))
			}
			prior := supersededBy(len(earlier), earlier...)
			// The PDF is rendered once (the renderer stamps the time), as
			// an exam's is: a retry sends the stored one.
			pdf := renderPDF(t, c.rerun)
			got, err := BuildSuperseding(id, c.rerun, pdf, Software{Version: "v0.27.0"}, prior)
			if err != nil {
				t.Fatal(err)
			}
			again, err := BuildSuperseding(id, c.rerun, pdf, Software{Version: "v0.27.0"}, prior)
			if err != nil {
				t.Fatal(err)
			}
			for i := range got {
				if !bytes.Equal(got[i].Part10, again[i].Part10) {
					t.Errorf("the rerun's %s differs from one build to the next: a retried export would file a second one", got[i].Kind)
				}
			}
			used := map[string]string{} // Series Number: whose
			for i, run := range earlier {
				for _, o := range run {
					used[value(t, parse(t, o), tag.SeriesNumber)] = o.Kind + " of run " + string(rune('1'+i))
				}
			}
			kos, kinds := Object{}, []string{}
			for _, o := range got {
				kinds = append(kinds, o.Kind)
				ds := parse(t, o)
				if n := value(t, ds, tag.SeriesNumber); used[n] != "" {
					t.Errorf("the rerun's %s is in series number %s, as the %s is", o.Kind, n, used[n])
				} else {
					used[n] = "the rerun's " + o.Kind
				}
				preds := hierRefs(ds.Elements, tag.PredecessorDocumentsSequence)
				switch o.Kind {
				case KindRejection:
					kos = o
					if len(preds) > 0 {
						t.Errorf("the rejection note names predecessors %v", preds)
					}
					continue
				}
				// The latest earlier object of its class, else the latest
				// earlier run's (whichever an older run sent, it is
				// named only when the latest did not replace it).
				var want []hierRef
				for _, run := range slices.Backward(earlier) {
					if e, ok := byKind(run)[o.Kind]; ok {
						want = []hierRef{refOf(e)}
						break
					}
				}
				if !slices.Equal(preds, want) {
					t.Errorf("the rerun's %s names predecessors %v, want %v", o.Kind, preds, want)
				}
				errs, warns := validate(t, o)
				if len(errs) > 0 || len(warns) > 0 {
					t.Errorf("the rerun's %s: dciodvfy errors %q, warnings %q", o.Kind, errs, warns)
				}
			}
			if kinds[len(kinds)-1] != KindRejection || kos.Part10 == nil {
				t.Fatalf("the rerun's objects are %v, want its results and a rejection note last", kinds)
			}
			var rejected []hierRef
			for _, run := range earlier {
				for _, o := range run {
					if o.Kind != KindRejection {
						rejected = append(rejected, refOf(o))
					}
				}
			}
			checkRejectionNote(t, kos, rejected)
			// The first run: no predecessor, no rejection note.
			for _, o := range build(t, id, c.earlier[0], renderPDF(t, c.earlier[0])) {
				if o.Kind == KindRejection || len(hierRefs(parse(t, o).Elements, tag.PredecessorDocumentsSequence)) > 0 {
					t.Errorf("a first run's %s rejects or replaces something", o.Kind)
				}
			}
		})
	}
}

// checkRejectionNote checks a rejection note: a Key Object Selection
// Document dciodvfy finds nothing wrong with and dsrdump reads, in the
// exam's study, titled (113001, DCM, "Rejected for Quality Reasons") by
// TID 2010, its evidence and its COMPOSITE items exactly the rejected
// objects.
func checkRejectionNote(t *testing.T, kos Object, rejected []hierRef) {
	t.Helper()
	ds := parse(t, kos)
	if kos.SOPClassUID != KeyObjectSelectionSOPClass || value(t, ds, tag.SOPClassUID) != KeyObjectSelectionSOPClass ||
		value(t, ds, tag.Modality) != "KO" || kos.StudyInstanceUID != octdicomtest.Identity(testRef).StudyInstanceUID {
		t.Errorf("the rejection note is of class %s, modality %s, study %s", kos.SOPClassUID, value(t, ds, tag.Modality), kos.StudyInstanceUID)
	}
	if got := hierRefs(ds.Elements, tag.CurrentRequestedProcedureEvidenceSequence); !slices.Equal(got, rejected) {
		t.Errorf("its evidence is %v, want the earlier objects %v", got, rejected)
	}
	root := srTree(t, kos)
	if want := (srCode{"113001", "DCM", "Rejected for Quality Reasons"}); root.vt != "CONTAINER" || root.concept != want {
		t.Errorf("its root is %s %+v, want a CONTAINER titled %+v", root.vt, root.concept, want)
	}
	tmpl := seqItems(ds.Elements, tag.ContentTemplateSequence)
	if len(tmpl) != 1 || first(tmpl[0], tag.MappingResource) != "DCMR" || first(tmpl[0], tag.TemplateIdentifier) != "2010" {
		t.Errorf("its template is %v, want DCMR 2010", tmpl)
	}
	var composites []hierRef
	var description string
	for i, n := range root.children {
		switch {
		case n.vt == "COMPOSITE" && n.rel == "CONTAINS":
			sop := seqItems(seqItems(ds.Elements, tag.ContentSequence)[i], tag.ReferencedSOPSequence)
			if len(sop) != 1 {
				t.Fatalf("COMPOSITE item %d references %d objects", i, len(sop))
			}
			composites = append(composites, hierRef{kos.StudyInstanceUID, "", first(sop[0], tag.ReferencedSOPClassUID),
				first(sop[0], tag.ReferencedSOPInstanceUID)})
		case n.vt == "TEXT" && n.rel == "CONTAINS" && n.concept.value == "113012":
			description = n.text
		case n.rel == "CONTAINS":
			t.Errorf("it contains a %s %+v: TID 2010 holds a description and references only", n.vt, n.concept)
		}
	}
	var want []hierRef
	for _, r := range rejected {
		want = append(want, hierRef{r.study, "", r.class, r.instance})
	}
	if !slices.Equal(composites, want) {
		t.Errorf("its COMPOSITE items are %v, want %v", composites, want)
	}
	if !strings.Contains(description, "Superseded") {
		t.Errorf("its Key Object Description is %q", description)
	}
	errs, warns := validate(t, kos)
	if len(errs) > 0 || len(warns) > 0 {
		t.Errorf("the rejection note: dciodvfy errors %q, warnings %q", errs, warns)
	}
	dump := needTool(t, "dsrdump", "dcmtk")
	f := filepath.Join(t.TempDir(), "kos.dcm")
	if err := os.WriteFile(f, kos.Part10, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(dump, f).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "Key Object Selection Document") {
		t.Errorf("dsrdump does not read it: %v\n%s", err, out)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(line, "E:") || strings.HasPrefix(line, "F:") ||
			strings.HasPrefix(line, "W:") && !strings.Contains(line, "template constraints not yet supported") &&
				!strings.Contains(line, "does not support this Specific Character Set") {
			t.Errorf("dsrdump: %s", line)
		}
	}
}

// What an export could not write is refused, not built: earlier objects
// without a run, or without valid UIDs, and a rejection note to reject.
func TestSupersedingRefusesWhatItCannotReference(t *testing.T) {
	good := Reference{Kind: KindPDF, SOPClassUID: EncapsulatedPDFSOPClass, SeriesInstanceUID: "2.25.1", SOPInstanceUID: "2.25.2"}
	for _, c := range []struct {
		name  string
		prior Superseded
	}{
		{"objects of no earlier run", Superseded{Objects: []Reference{good}}},
		{"a run count below zero", Superseded{Runs: -1}},
		{"an object without its instance UID", Superseded{Runs: 1, Objects: []Reference{{Kind: KindPDF, SOPClassUID: EncapsulatedPDFSOPClass, SeriesInstanceUID: "2.25.1"}}}},
		{"a UID that is not one", Superseded{Runs: 1, Objects: []Reference{{Kind: KindPDF, SOPClassUID: EncapsulatedPDFSOPClass, SeriesInstanceUID: "2.25.1", SOPInstanceUID: "2.25.01"}}}},
		{"a rejection note", Superseded{Runs: 1, Objects: []Reference{good, {Kind: KindRejection, SOPClassUID: KeyObjectSelectionSOPClass, SeriesInstanceUID: "2.25.3", SOPInstanceUID: "2.25.4"}}}},
	} {
		rep := rerunOf(cubeReport(), "run-2")
		if _, err := BuildSuperseding(octdicomtest.Identity(testRef), rep, renderPDF(t, rep), Software{}, c.prior); err == nil {
			t.Errorf("%s: built", c.name)
		}
	}
	// An earlier run that sent nothing (Runs without objects) only
	// moves the series numbers: no predecessor, no rejection note.
	rep := rerunOf(cubeReport(), "run-2")
	objs := buildSuperseding(t, rep, Superseded{Runs: 1})
	for _, o := range objs {
		if n := value(t, parse(t, o), tag.SeriesNumber); o.Kind == KindRejection || n != "9101" && n != "9102" {
			t.Errorf("a second run with nothing to replace: %s in series %s", o.Kind, value(t, parse(t, o), tag.SeriesNumber))
		}
	}
}
