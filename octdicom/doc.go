// Package octdicom is octflow's home for DICOM objects: what it reads of
// the scans it takes in, and what it writes for the hospital's PACS.
//
// It holds the way in:
//
//   - the pre-scan (PreScan), which walks an object as the parser will
//     before the parser sees it, and refuses what could exhaust the
//     process or what the parser would read otherwise (Declared says what
//     reading it takes, for the gateway's memory budget);
//   - the reader (ReadDICOM, ParseScan), which turns an Ophthalmic
//     Tomography Image into the imaging.Volume the stages analyse and the
//     Header octflow needs, and refuses anything else (ErrNotOCT, and
//     imaging.ErrInvalidVolume for what no retry can fix);
//   - the de-identified copy (Scan.WriteDeidentified), PS3.15's Basic
//     Application Level Confidentiality Profile, which keeps every
//     attribute its IOD requires with dummy or empty values (actions D
//     and Z);
//   - WriteDICOM, which writes a volume as a device would (the phantoms
//     of the tests, the benchmark and the demo).
//
// And the way back:
//
//   - the original identity of a scan (Identity: the patient, the study,
//     the source series and instance), read from the upload as sent
//     before anything else is done with it (ReadIdentity) and kept only
//     sealed for its campus (SealIdentity, OpenIdentity), so that the
//     results can be filed under the patient's own study while
//     everything else octflow keeps stays de-identified;
//   - the writer octflow's own objects are made with (Elements, Code,
//     EncodePart10), and the UIDs they are given (DerivedUID): pure
//     functions of octflow's references (the exam, its report's run), so
//     that a retried export sends the same instances again.
//
// The results themselves, the objects filed in that study (the report
// PDF as an Encapsulated PDF, a macular cube's Macular Grid Thickness and
// Volume Report), are written by package octdicom/results, which builds
// them from the report: octdicom imports no report, so the gateway, which
// reads scans with it, holds none.
//
// The image analysis (package imaging) knows nothing of DICOM: octdicom
// imports imaging for its Volume, never the other way round. imaging's
// own tests, which read real scans and write phantoms, reach the reader
// and writer through hooks their external test file sets
// (imaging/dicom_hooks_test.go).
//
// The package is named octdicom, not dicomio: the DICOM library octflow
// uses (github.com/suyashkumar/dicom) has a dicomio package of its own.
// Objects are written with that library; no byte is written by hand.
package octdicom
