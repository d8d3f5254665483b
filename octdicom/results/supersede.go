package results

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/suyashkumar/dicom/pkg/tag"

	"octflow/octdicom"
)

// KeyObjectSelectionSOPClass is Key Object Selection Document Storage:
// the SOP class of the IOCM rejection note a rerun's results carry.
const KeyObjectSelectionSOPClass = "1.2.840.10008.5.1.4.1.1.88.59"

// KindRejection is the rejection note of a run's results that replace an
// earlier run's: a Key Object Selection Document titled "Rejected for
// Quality Reasons" (IHE IOCM) that lists the earlier objects.
const KindRejection = "rejection"

// rejectionSeriesNumber is the rejection note's Series Number before a
// run's offset (Superseded.Runs): just before the run's PDF and SR.
const rejectionSeriesNumber = "9000"

// seriesPerRun is how far apart two runs' Series Numbers are: a rerun's
// objects are in series of their own numbers, after the ones they
// replace.
const seriesPerRun = 100

// Reference names an object octflow sent to the PACS, in the exam's
// study (the source's, which the exam's identity names): what a later
// run's objects reference.
type Reference struct {
	// Kind is the Object's Kind (KindPDF, KindMacularGridSR, …).
	Kind              string `json:"kind"`
	SOPClassUID       string `json:"sopClassUid"`
	SeriesInstanceUID string `json:"seriesInstanceUid"`
	SOPInstanceUID    string `json:"sopInstanceUid"`
}

// Reference is the object's Reference.
func (o Object) Reference() Reference {
	return Reference{Kind: o.Kind, SOPClassUID: o.SOPClassUID, SeriesInstanceUID: o.SeriesInstanceUID, SOPInstanceUID: o.SOPInstanceUID}
}

// Superseded is what a run's results replace: the objects earlier runs
// of the same exam sent to the PACS. The zero value is a first run's:
// nothing replaced.
type Superseded struct {
	// Runs counts the earlier runs whose results were sent: each adds
	// seriesPerRun to the run's Series Numbers, so that no two runs'
	// series share a number.
	Runs int
	// Objects are the results those runs sent, oldest run first, without
	// their rejection notes (a rejection note is not rejected again).
	Objects []Reference
}

// check refuses a Superseded whose references could not be written.
func (s Superseded) check() error {
	if s.Runs < 0 || s.Runs > 1000 || len(s.Objects) > 0 && s.Runs == 0 {
		return fmt.Errorf("results: %d earlier runs with %d objects", s.Runs, len(s.Objects))
	}
	for _, r := range s.Objects {
		if !octdicom.ValidUID(r.SOPClassUID) || !octdicom.ValidUID(r.SeriesInstanceUID) || !octdicom.ValidUID(r.SOPInstanceUID) {
			return errors.New("results: an earlier run's object has no valid UIDs")
		}
		if r.SOPClassUID == KeyObjectSelectionSOPClass {
			return errors.New("results: an earlier run's rejection note is not rejected again")
		}
	}
	return nil
}

// seriesNumber is a series' number in this run: base (octflow's number
// for the kind of object) plus seriesPerRun for each earlier run whose
// results were sent.
func (b *builder) seriesNumber(base string) string {
	n, err := strconv.Atoi(base)
	if err != nil || b.prior.Runs == 0 {
		return base
	}
	return strconv.Itoa(n + seriesPerRun*b.prior.Runs)
}

// predecessor writes the Predecessor Documents Sequence (0040,A360) of an
// object of sopClass: the latest earlier object of that class, which it
// replaces; nothing when no earlier run sent one.
func (b *builder) predecessor(e *octdicom.Elements, sopClass string) {
	for i := len(b.prior.Objects) - 1; i >= 0; i-- {
		if r := b.prior.Objects[i]; r.SOPClassUID == sopClass {
			e.Seq(tag.PredecessorDocumentsSequence, b.studyReference([]Reference{r}))
			return
		}
	}
}

// studyReference is a Hierarchical SOP Instance Reference Macro item
// (PS3.3 Table C.17-3) naming refs in the exam's study, one Referenced
// Series Sequence item per series, in the order they come.
func (b *builder) studyReference(refs []Reference) *octdicom.Elements {
	var order []string
	bySeries := map[string][]*octdicom.Elements{}
	for _, r := range refs {
		if _, seen := bySeries[r.SeriesInstanceUID]; !seen {
			order = append(order, r.SeriesInstanceUID)
		}
		it := &octdicom.Elements{}
		it.Str(tag.ReferencedSOPClassUID, r.SOPClassUID)
		it.Str(tag.ReferencedSOPInstanceUID, r.SOPInstanceUID)
		bySeries[r.SeriesInstanceUID] = append(bySeries[r.SeriesInstanceUID], it)
	}
	series := make([]*octdicom.Elements, 0, len(order))
	for _, uid := range order {
		s := &octdicom.Elements{}
		s.Str(tag.SeriesInstanceUID, uid)
		s.Seq(tag.ReferencedSOPSequence, bySeries[uid]...)
		series = append(series, s)
	}
	study := &octdicom.Elements{}
	study.Str(tag.StudyInstanceUID, b.id.StudyInstanceUID)
	study.Seq(tag.ReferencedSeriesSequence, series...)
	return study
}

// rejectionTitle is the rejection note's document title (CID 7010):
// IHE IOCM's rejection for quality reasons, which an IOCM image manager
// hides from regular queries and retrieves but keeps, rather than
// (113037) Rejected for Patient Safety Reasons, (113038) Incorrect
// Modality Worklist Entry or (113039) Data Retention Policy Expired,
// none of which a superseded analysis is.
func rejectionTitle() *octdicom.Elements {
	return octdicom.Code("113001", "DCM", "Rejected for Quality Reasons")
}

// rejectionNote is the Key Object Selection Document (PS3.3 A.35.4)
// that rejects every object earlier runs sent (b.prior): the Patient,
// General Study, Key Object Document Series, General Equipment, Key
// Object Document, SR Document Content and SOP Common modules, its
// Current Requested Procedure Evidence Sequence naming the earlier
// objects, its content TID 2010 — the title, the language and observer
// context, a description, and a COMPOSITE item per earlier object — in
// a new series of the exam's study.
func (b *builder) rejectionNote() (Object, error) {
	obj := Object{Kind: KindRejection, SOPClassUID: KeyObjectSelectionSOPClass, SOPInstanceUID: b.uid("rejection-instance"),
		SeriesInstanceUID: b.uid("rejection-series"), StudyInstanceUID: b.id.StudyInstanceUID}
	e := &octdicom.Elements{}
	b.common(e, obj.SOPClassUID, obj.SOPInstanceUID, "KO", obj.SeriesInstanceUID, rejectionSeriesNumber,
		"octflow superseded results (rejection)")
	// Key Object Document Series.
	e.Seq(tag.ReferencedPerformedProcedureStepSequence)
	// Key Object Document.
	e.Str(tag.ContentDate, da(b.created))
	e.Str(tag.ContentTime, tm(b.created))
	e.Seq(tag.CurrentRequestedProcedureEvidenceSequence, b.studyReference(b.prior.Objects))
	// SR Document Content: TID 2010.
	e.Str(tag.ValueType, "CONTAINER")
	e.Seq(tag.ConceptNameCodeSequence, rejectionTitle())
	e.Str(tag.ContinuityOfContent, "SEPARATE")
	e.Seq(tag.ContentTemplateSequence, template("2010"))
	content := append(b.languageAndObserver(),
		textItem("CONTAINS", octdicom.Code("113012", "DCM", "Key Object Description"),
			"Superseded: a later analysis run of the same exam replaced these results."))
	for _, r := range b.prior.Objects {
		content = append(content, compositeItem("CONTAINS", r.SOPClassUID, r.SOPInstanceUID))
	}
	e.Seq(tag.ContentSequence, content...)
	var err error
	if obj.Part10, err = octdicom.EncodePart10(e, obj.SOPClassUID, obj.SOPInstanceUID); err != nil {
		return Object{}, errResult("rejection", err)
	}
	return obj, nil
}

// compositeItem is a COMPOSITE content item referencing an object.
func compositeItem(rel, sopClass, sopInstance string) *octdicom.Elements {
	it := &octdicom.Elements{}
	it.Str(tag.RelationshipType, rel)
	it.Str(tag.ValueType, "COMPOSITE")
	ref := &octdicom.Elements{}
	ref.Str(tag.ReferencedSOPClassUID, sopClass)
	ref.Str(tag.ReferencedSOPInstanceUID, sopInstance)
	it.Seq(tag.ReferencedSOPSequence, ref)
	return it
}
