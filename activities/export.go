package activities

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net"
	"net/http"
	"net/textproto"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.uber.org/zap"

	"octflow/codec"
	"octflow/contract"
	"octflow/exam"
	"octflow/octdicom"
	"octflow/octdicom/results"
	"octflow/report"
	"octflow/storage"
)

// PACSTarget is where a campus's results go: a DICOMweb base URL (the
// export posts to its /studies), how to sign in there (basic, or a
// bearer token; neither for a PACS on a trusted network) and, for an
// https URL, the CAs its certificate is checked against (nil: the
// system's).
type PACSTarget struct {
	URL      string         `json:"url"`
	Username string         `json:"username,omitempty"`
	Password string         `json:"password,omitempty"`
	Token    string         `json:"token,omitempty"`
	RootCAs  *x509.CertPool `json:"-"`
}

// Exporter is the PACS export's activity (ExportToPACS), which the
// pipeline worker registers (RegisterExport): it sends results to the
// campuses' PACS, with their targets, the codec that opens the
// identities kept sealed at intake, and the HTTP client.
type Exporter struct {
	// Store holds each exam's report and sealed identity.
	Store ObjectStore
	// Logger receives what the export logs.
	Logger *zap.Logger
	// Inbox takes the results-filed event for the clinicians' stream
	// (nil: none is published).
	Inbox Inbox
	// Targets are the campuses' PACS (none: this worker exports nothing).
	Targets map[string]PACSTarget
	// Identities holds the identity keys, which open what the gateway
	// sealed (octdicom.OpenIdentity): keys of their own, not the payload
	// codec's, which GPU nodes hold.
	Identities *codec.Codec
	// Installation names this octflow installation: the device the
	// results name (results.Software.Installation).
	Installation string
	// HTTP is the client the export uses for every campus (default: one
	// per campus, see client).
	HTTP    *http.Client
	mu      sync.Mutex
	clients map[string]*http.Client // by campus
}

// RegisterExport registers the export's activity on r, run with x.
func RegisterExport(r worker.ActivityRegistry, x *Exporter) {
	r.RegisterActivityWithOptions(x.ExportToPACS, activity.RegisterOptions{Name: contract.ExportToPACS})
}

// ExportToPACS builds an exam's results as DICOM objects, filed in the
// patient's own study (package results: the report as Encapsulated PDF,
// a macular cube's TID 2100 SR), and sends them to the campus's PACS by
// STOW-RS, then asks the PACS for each one (WADO-RS metadata): only what
// it holds is delivered. The objects and their UIDs are the same on
// every try, so a resend makes no duplicate. Results of a run that
// replaces an earlier exported run's (exportsRecord) name those as
// their predecessors and come with a rejection note of them. A PACS that does not answer, or answers 5xx
// or 429, is PACSUnavailable (the workflow tries again); one that refuses
// any object, and results that cannot be built, are ExportRefused.
func (x *Exporter) ExportToPACS(ctx context.Context, in contract.StageInput) (contract.ExportOutput, error) {
	ref := in.Exam.Ref()
	var out contract.ExportOutput
	if len(x.Targets) == 0 {
		return out, refused("this worker has no PACS configured")
	}
	target, ok := x.Targets[ref.Campus]
	if !ok || target.URL == "" {
		return out, refused("campus " + ref.Campus + " has no PACS configured")
	}
	if x.Identities == nil {
		return out, refused("this worker has no identity keys (OCTFLOW_IDENTITY_KEYS_FILE) to open the exam's sealed identity")
	}
	store := objects{store: x.Store}
	sealed, err := store.get(ctx, exam.IdentityKey(ref, in.Exam.ScanDigest))
	if errors.Is(err, storage.ErrNotFound) {
		return out, refused("no identity was kept for this exam (its scan named no study): the results cannot be filed")
	} else if err != nil {
		return out, err
	}
	var rep report.Report
	if err := store.getJSON(ctx, exam.ReportJSONKey(ref), &rep); err != nil {
		return out, err
	}
	pdf, err := store.get(ctx, exam.ReportPDFKey(ref))
	if err != nil {
		return out, err
	}
	sw := results.BuildSoftware()
	sw.Installation = x.Installation
	// What earlier runs of the exam sent, which this run's results
	// replace (exportsRecord), kept before any of them is sent.
	sent, err := readExports(ctx, store, ref)
	if err != nil {
		return out, err
	}
	objs, err := results.FromSealedSuperseding(x.Identities, ref, sealed, &rep, pdf, sw, sent.superseded(rep.Run))
	if err != nil {
		return out, refused("the results cannot be built: " + err.Error())
	}
	// The segmentation goes with them, under the same rules (export_seg.go).
	if seg, err := x.segmentation(ctx, in, sealed, &rep, sw); err != nil {
		return out, err
	} else if seg != nil {
		objs = append(objs, *seg)
	}
	// Recorded before they are sent: a later run names and rejects them.
	if err := sent.keep(ctx, store, ref, rep.Run, objs); err != nil {
		return out, err
	}
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	for _, o := range objs {
		w, err := mw.CreatePart(textproto.MIMEHeader{"Content-Type": {"application/dicom"}})
		if err != nil {
			return out, err
		}
		if _, err := w.Write(o.Part10); err != nil {
			return out, err
		}
		out.Instances = append(out.Instances, o.SOPInstanceUID)
	}
	if err := mw.Close(); err != nil {
		return out, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(target.URL, "/")+"/studies", &body)
	if err != nil {
		return out, refused("the campus's PACS URL is not a URL")
	}
	req.Header.Set("Content-Type", `multipart/related; type="application/dicom"; boundary=`+mw.Boundary())
	req.Header.Set("Accept", "application/dicom+json")
	x.authorize(req, target)
	resp, err := x.client(ref.Campus, target).Do(req)
	if err != nil {
		return out, pacsUnavailable("the PACS did not answer: " + netCause(err))
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests {
		return out, pacsUnavailable(fmt.Sprintf("the PACS answered %d", resp.StatusCode))
	}
	// The STOW-RS answer is not the proof: a PACS may list an instance a
	// filter then dropped (Orthanc 1.10 does), or refuse as a duplicate
	// what an earlier try, whose answer was lost, stored. Each object is
	// asked for by WADO-RS; a refusal stands only for what it lacks.
	var refusal error
	if failed := octdicom.StoreFailures(answer); resp.StatusCode != http.StatusOK || len(failed) > 0 {
		msg := fmt.Sprintf("the PACS refused the results (%d)", resp.StatusCode)
		if len(failed) > 0 {
			msg += ": " + strings.Join(failed, "; ")
		}
		refusal = refused(msg)
	}
	for _, o := range objs {
		if err := x.verify(ctx, ref.Campus, target, o); err != nil {
			if refusal != nil && isRefusal(err) {
				return out, refusal
			}
			return out, err
		}
	}
	// The clinicians' stream says the results are in the PACS. The
	// results are delivered whatever becomes of the event: a failure to
	// publish it is logged, not a reason to send them again.
	if x.Inbox != nil {
		e := contract.ReportReadyEvent{ExamID: in.Exam.ExamID, Campus: in.Exam.Campus, Priority: in.Exam.Priority,
			Eye: in.Exam.Eye, Kind: contract.EventResultsFiled}
		if err := x.Inbox.Publish(ctx, e); err != nil && x.Logger != nil {
			x.Logger.Warn("results filed in the PACS; their event was not published", zap.String("campus", in.Exam.Campus),
				zap.String("examId", in.Exam.ExamID), zap.Error(err))
		}
	}
	return out, nil
}

// isRefusal reports whether err is an ExportRefused failure.
func isRefusal(err error) bool {
	var app *temporal.ApplicationError
	return errors.As(err, &app) && app.Type() == contract.ErrTypeExportRefused
}

// netCause is what a failed request's error says of the network, without
// the request's URL (whose path holds the patient's study UID) or the
// PACS's address.
func netCause(err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return "timed out"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "connection reset"
	}
	var dns *net.DNSError
	if errors.As(err, &dns) {
		return "its name does not resolve"
	}
	var tlsErr *tls.CertificateVerificationError
	if errors.As(err, &tlsErr) {
		return "its TLS certificate is not trusted"
	}
	return "network error"
}

// verify asks the PACS for an object's metadata (WADO-RS): it holds the
// object only if it answers 200.
func (x *Exporter) verify(ctx context.Context, campus string, target PACSTarget, o results.Object) error {
	url := fmt.Sprintf("%s/studies/%s/series/%s/instances/%s/metadata", strings.TrimRight(target.URL, "/"),
		o.StudyInstanceUID, o.SeriesInstanceUID, o.SOPInstanceUID)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return refused("the campus's PACS URL is not a URL")
	}
	req.Header.Set("Accept", "application/dicom+json")
	x.authorize(req, target)
	resp, err := x.client(campus, target).Do(req)
	if err != nil {
		return pacsUnavailable("the PACS did not answer: " + netCause(err))
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	switch {
	case resp.StatusCode == http.StatusOK:
		return nil
	case resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests:
		return pacsUnavailable(fmt.Sprintf("the PACS answered %d when asked for %s", resp.StatusCode, o.Kind))
	}
	return refused(fmt.Sprintf("the PACS refused the %s %s: its STOW-RS answer listed it as stored, but asked for it, it answers %d",
		o.Kind, o.SOPInstanceUID, resp.StatusCode))
}

func (x *Exporter) authorize(req *http.Request, target PACSTarget) {
	switch {
	case target.Token != "":
		req.Header.Set("Authorization", "Bearer "+target.Token)
	case target.Username != "":
		req.SetBasicAuth(target.Username, target.Password)
	}
}

// client is the export's HTTP client for a campus's PACS: HTTP, or one
// of the campus's own that trusts its CAs (TLS 1.2 or later), follows no
// redirect (no STOW-RS or WADO-RS answer is one) and gives up after
// exportHTTPTimeout.
func (x *Exporter) client(campus string, target PACSTarget) *http.Client {
	if x.HTTP != nil {
		return x.HTTP
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if c, ok := x.clients[campus]; ok {
		return c
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: target.RootCAs}
	c := &http.Client{Timeout: exportHTTPTimeout, Transport: transport,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	if x.clients == nil {
		x.clients = map[string]*http.Client{}
	}
	x.clients[campus] = c
	return c
}

// exportHTTPTimeout bounds one request to the PACS.
const exportHTTPTimeout = 2 * time.Minute

func refused(msg string) error {
	return temporal.NewNonRetryableApplicationError(msg, contract.ErrTypeExportRefused, nil)
}

func pacsUnavailable(msg string) error {
	return temporal.NewApplicationError(msg, contract.ErrTypePACSUnavailable)
}
