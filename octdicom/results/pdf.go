package results

import (
	"bytes"
	"errors"

	"github.com/suyashkumar/dicom/pkg/tag"

	"octflow/octdicom"
	"octflow/report"
)

// pdfTitleCode is the Encapsulated PDF's coded document title.
func pdfTitleCode() *octdicom.Elements {
	return octdicom.Code("18748-4", "LN", "Diagnostic Imaging Report")
}

// encapsulatedPDF is the report PDF as an Encapsulated PDF instance
// (PS3.3 A.45.1): the Patient, General Study, Encapsulated Document
// Series, General Equipment, SC Equipment, Encapsulated Document and SOP
// Common modules, its Source Instance Sequence naming the scan, its
// Request Attributes Sequence the order, its document title the PDF's,
// coded.
func (b *builder) encapsulatedPDF(pdf []byte) (Object, error) {
	if !bytes.HasPrefix(pdf, []byte("%PDF-")) {
		return Object{}, errResult("pdf", errors.New("the report is not a PDF"))
	}
	obj := Object{Kind: KindPDF, SOPClassUID: EncapsulatedPDFSOPClass, SOPInstanceUID: b.uid("pdf-instance"),
		SeriesInstanceUID: b.uid("pdf-series"), StudyInstanceUID: b.id.StudyInstanceUID}
	e := &octdicom.Elements{}
	b.common(e, obj.SOPClassUID, obj.SOPInstanceUID, "DOC", obj.SeriesInstanceUID, pdfSeriesNumber, "octflow OCT report (PDF)")
	// Encapsulated Document Series: the order the report answers.
	var requests []*octdicom.Elements
	for _, r := range b.requests() {
		requests = append(requests, b.requestAttributes(r))
	}
	if len(requests) > 0 {
		e.Seq(tag.RequestAttributesSequence, requests...)
	}
	// SC Equipment: a document made on a workstation.
	e.Str(tag.ConversionType, "WSD")
	// Encapsulated Document.
	e.Str(tag.ContentDate, da(b.created))
	e.Str(tag.ContentTime, tm(b.created))
	e.Str(tag.AcquisitionDateTime, b.dateTime())
	// The PDF names the exam by octflow's reference and the patient by
	// a pseudonym only: nothing in it identifies the patient.
	e.Str(tag.BurnedInAnnotation, "NO")
	e.Str(tag.RecognizableVisualFeatures, "NO")
	e.Seq(tag.SourceInstanceSequence, b.sourceRef())
	// The PDF it replaces, if an earlier run sent one.
	b.predecessor(e, obj.SOPClassUID)
	// The title the PDF prints, and coded: LOINC's Diagnostic Imaging
	// Report, the title of CID 7000 that fits an imaging report whatever
	// its modality. CID 7020, the IOD's baseline, is LOINC's document
	// titles by reference; the standard lists no narrower ophthalmic one.
	e.Str(tag.DocumentTitle, report.Title(b.rep))
	e.Seq(tag.ConceptNameCodeSequence, pdfTitleCode())
	e.Str(tag.MIMETypeOfEncapsulatedDocument, "application/pdf")
	e.Add(tag.EncapsulatedDocument, pdf)
	e.Add(tag.EncapsulatedDocumentLength, []int{len(pdf)})
	var err error
	if obj.Part10, err = octdicom.EncodePart10(e, obj.SOPClassUID, obj.SOPInstanceUID); err != nil {
		return Object{}, errResult("pdf", err)
	}
	return obj, nil
}
