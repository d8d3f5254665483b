// Package octdicom is octflow's home for DICOM objects: what it reads of
// the scans it takes in, and what it writes for the hospital's PACS.
//
// Today it holds the way back:
//
//   - the original identity of a scan (Identity: the patient, the study,
//     the source series and instance), read from the upload as sent
//     before anything else is done with it (ReadIdentity) and kept only
//     sealed for its campus (SealIdentity, OpenIdentity), so that the
//     results can be filed under the patient's own study while
//     everything else octflow keeps stays de-identified;
//   - the results as standard objects filed in that study (Results): the
//     report PDF as an Encapsulated PDF instance, and for a macular cube a
//     Macular Grid Thickness and Volume Report (TID 2100), each in a
//     series of its own, with instance UIDs derived from the exam and its
//     report's run (DerivedUID), so that a retried export sends the same
//     instances again.
//
// The gateway's reading of scans, their pre-scan and their
// de-identification (imaging/dicom.go, imaging/dicomscan.go and
// imaging/deid.go) are to move here too, apart from the image analysis.
//
// The package is named octdicom, not dicomio: the DICOM library octflow
// uses (github.com/suyashkumar/dicom) has a dicomio package of its own.
// Objects are written with that library; no byte is written by hand.
package octdicom
