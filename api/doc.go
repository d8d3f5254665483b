// Package api is octflow's HTTP gateway (Echo) and the client of it.
// Devices and DICOM routers submit exams; clinicians read status,
// timelines and reports, review them and follow report-ready events;
// admins see queues and GPU nodes, rerun dead exams and send a failed
// export again. The routes are in server.go (New), the contract in
// openapi.yaml, served at /openapi.yaml; docs/api.md is its prose.
//
// The concerns a request passes through are packages of their own under
// api, which import nothing of it: auth, intake, codecserver, auditing
// and problems. Package api keeps the routes and what reads, acts on and
// starts exams.
//
// A tour, in the order a request meets it:
//
//   - Who is asking: package auth turns a bearer token into a Principal
//     (a role, a device, its campuses; only tokens' SHA-256 are
//     configured); auth.go here admits a route's roles (require), and
//     tenant.go scopes every exam route to the caller's campuses
//     (another campus's exam answers 404, like a missing one).
//   - The upload: submit.go is POST /v1/exams and stow.go DICOMweb
//     STOW-RS; both feed one intake (package intake), which paces each
//     device, holds the body on disk, encrypted with a key that lives
//     only in the request, bounds the memory of the scans being
//     validated, checks the DICOM and de-identifies it, and stores what
//     the exam keeps; the scan's original identity is kept only sealed
//     for its campus (octdicom), for filing the results back. Nothing is
//     stored and no workflow starts unless the whole request is valid.
//   - Naming the exam: the intake's Pseudonymizer turns a device's exam
//     ID into the exam's reference (a keyed hash within its campus) and
//     a patient ID into a pseudonym; the reference names the workflow
//     (contract.ExamWorkflowID). Temporal's one workflow per ID is the
//     lock that makes a resend idempotent: submit.go (admit) looks the
//     exam up first, and starts a new one with the conflict policy
//     FAIL, so a start that succeeds is the request's own (202) and one
//     refused because another request won is answered as a repeat (200,
//     or 409 for another scan; decision 0019). intake.AllowedPriority
//     decides the bucket an upload may have, priority.go its campus's
//     share. The intake writes the exam's own record next to its
//     objects.
//   - Reading it back: status.go and timeline.go answer GET
//     /v1/exams/{id} and its /events from lifecycle's fold of the
//     workflows' histories; exams.go serves the report; review.go
//     delivers a clinician's decision as an Update to the review
//     workflow; rerun.go starts a dead exam again and export.go a
//     failed export to the campus's PACS; notifications.go is
//     the Server-Sent Events stream read from the campus's inbox
//     workflow.
//   - Operating it: queues.go and nodes.go (GET /v1/queues, /v1/nodes,
//     breaker reset, an operator's health mark), metrics.go (the gauges
//     read from Temporal at scrape), package codecserver (the Web UI's
//     codec endpoint, opening a payload only for a caller of its campus).
//   - Every answer: package problems writes RFC 9457 problem+json with
//     a stable type (problem.go here names it for the handlers); package
//     auditing records one IHE ATNA audit message per access decision,
//     allowed or refused, before the answer leaves (audit.go here lets a
//     handler say what it did).
//
// Client (client.go) is the Go client octflow submit, the benchmark and
// the tests use.
//
// The gateway keeps no exam state of its own: exams live in Temporal and the
// object store, so any number of api processes can serve. The package runs no
// workflow code and no image stage.
package api
