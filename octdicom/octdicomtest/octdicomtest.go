// Package octdicomtest holds fixtures for tests of what reads or writes
// octdicom's objects: the sealed identity's (package octdicom) and the
// results writer's (package results).
package octdicomtest

import (
	"octflow/exam"
	"octflow/octdicom"
)

// Identity is an identity of the exam ref whose every value is easy to
// find in clear, non-ASCII included (the patient's name), with one order
// and the source's zone: a right eye's macular scan.
func Identity(ref exam.Ref) octdicom.Identity {
	return octdicom.Identity{Exam: ref, ScanDigest: "0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0",
		PatientName: "Müller^Jürgen", PatientID: "PID-4711-XYZ", IssuerOfPatientID: "HOSP-NORTH", PatientBirthDate: "19500102",
		PatientSex: "M", StudyInstanceUID: "1.2.826.0.1.3680043.2.1125.99.1", StudyDate: "20261201", StudyTime: "101112",
		StudyID: "STUDY-88", AccessionNumber: "ACC-2026-0042", ReferringPhysicianName: "Doe^Jane",
		StudyDescription: "OCT macula both eyes", SeriesInstanceUID: "1.2.826.0.1.3680043.2.1125.99.1.2",
		SOPClassUID: octdicom.OphthalmicTomographySOPClass, SOPInstanceUID: "1.2.826.0.1.3680043.2.1125.99.1.2.3", Laterality: "R",
		FrameOfReferenceUID: "1.2.826.0.1.3680043.2.1125.99.1.4", TimezoneOffset: "+0100", Requests: []octdicom.Request{{AccessionNumber: "ACC-2026-0042", RequestedProcedureID: "RP-7731",
			RequestedProcedureDescription: "OCT Makula beidseits", ScheduledProcedureStepID: "SPS-7731-1",
			RequestedProcedureCode: octdicom.CodedEntry{Value: "OCT-MAC", Scheme: "99IHE", Meaning: "OCT Makula"}}}}
}
