// Package results writes an exam's results as DICOM objects filed in the
// patient's own study, for the export to the hospital's PACS (package
// activities, ExportToPACS): the report PDF as an Encapsulated PDF
// instance, and for a measured macular cube a Macular Grid Thickness and
// Volume Report (TID 2100), and for a measured cube or line scan a
// Segmentation of the retina and lesions over the scan's frames
// (Segmentation), each in a series of its own, with instance
// UIDs derived from the exam and its report's run (octdicom.DerivedUID),
// so that a retried export sends the same instances again. Results of a
// run that replace an earlier run's (BuildSuperseding) name those as
// their predecessors and bring a Key Object Selection Document that
// rejects them (IHE IOCM).
//
// It builds them from the exam's report (package report) and its
// original identity, which the gateway sealed (octdicom.SealIdentity)
// and FromSealed opens. It writes with octdicom's writer
// (octdicom.Elements, octdicom.EncodePart10). It is a package of its own
// so that octdicom, which the gateway reads scans with, imports no
// report: the gateway's build holds neither the report nor its PDF
// renderer.
package results
