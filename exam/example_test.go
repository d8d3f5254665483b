package exam_test

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"octflow/exam"
)

// A device may leave the priority out: it means normal. Anything but the
// three buckets is refused.
func ExampleParsePriority() {
	for _, s := range []string{"urgent", "", "asap"} {
		p, err := exam.ParsePriority(s)
		fmt.Printf("%q → %q %v\n", s, p, err)
	}
	// Output:
	// "urgent" → "urgent" <nil>
	// "" → "normal" <nil>
	// "asap" → "" priority: want urgent, normal or low
}

// Aging moves a stage that waited too long one bucket up; urgent has
// nowhere to go. Under the production policy a low exam's stage reaches
// urgent after at most two thresholds.
func ExamplePriority_Up() {
	pol := exam.DefaultPolicy()
	for _, p := range []exam.Priority{exam.Low, exam.Normal, exam.Urgent} {
		fmt.Printf("%-6s weight %2.0f, promoted to %-6s after %v\n", p, pol.Weight(p), p.Up(), pol.AgingAfter(p))
	}
	// Output:
	// low    weight  5, promoted to normal after 30m0s
	// normal weight 35, promoted to urgent after 30m0s
	// urgent weight 60, promoted to urgent after 0s
}

// A policy is checked once, when an exam is submitted; every setting
// that cannot work is named, so the configuration can say which variable
// to fix. A zero is never replaced by a default.
func ExamplePolicy_Validate() {
	pol := exam.DefaultPolicy()
	pol.MaxAttempts = 0
	pol.HeartbeatTimeout = pol.StageTimeout + time.Second
	err := pol.Validate()
	var bad *exam.PolicyError
	fmt.Println(errors.As(err, &bad), bad.Field)
	fmt.Println(err)
	// Output:
	// true maxAttempts
	// maxAttempts: 0: want at least 1
	// heartbeatTimeout: 10m1s: want a positive duration below the stage timeout 10m0s
}

// octflow keeps an exam under its reference, a keyed hash of the
// device's exam ID (the api computes it); a device's own ID never has
// that form.
func ExampleIsReference() {
	fmt.Println(exam.IsReference("ex-3f9c0a1b2c3d4e5f60718293"))
	fmt.Println(exam.IsReference("E-0001"))
	fmt.Println(exam.ValidateID("E-0001"))
	fmt.Println(exam.ValidateID("../E-0001"))
	// Output:
	// true
	// false
	// <nil>
	// exam id: want 1-128 of [A-Za-z0-9._-], starting with a letter or digit
}

// Object keys are pure functions of the exam, so a stage run twice
// overwrites its own output. They start with the campus (a tenant) and
// never hold patient data; the scan's key carries the upload's digest,
// so a conflicting upload cannot overwrite a scan in use.
func ExampleScanKey() {
	r := exam.Ref{Campus: "north-campus", ID: "ex-3f9c0a1b2c3d4e5f60718293"}
	digest := strings.Repeat("9a", 32) // SHA-256 of the upload, hex
	key := exam.ScanKey(r, digest)
	fmt.Println(key)
	fmt.Println(exam.LayersKey(r))
	fmt.Println(exam.ReportPDFKey(r))

	back, short, ok := exam.ParseScanKey(key)
	fmt.Println(back, short, ok)
	// Output:
	// exams/north-campus/ex-3f9c0a1b2c3d4e5f60718293/scan-9a9a9a9a9a9a9a9a.dcm
	// exams/north-campus/ex-3f9c0a1b2c3d4e5f60718293/layers.json
	// exams/north-campus/ex-3f9c0a1b2c3d4e5f60718293/report.pdf
	// north-campus/ex-3f9c0a1b2c3d4e5f60718293 9a9a9a9a9a9a9a9a true
}

// Approve and reject are final; an amendment corrects the report at any
// time within the review window.
func ExampleReviewStatus_After() {
	s := exam.ReviewPending
	for _, d := range []string{"approve", "amend", "sign"} {
		dec, err := exam.ParseDecision(d)
		if err != nil {
			fmt.Println(err)
			continue
		}
		s = s.After(dec)
		fmt.Println(dec, "→", s)
	}
	// Output:
	// approve → approved
	// amend → amended
	// decision: want approve, amend or reject
}
