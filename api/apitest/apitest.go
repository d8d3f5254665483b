// Package apitest holds the gateway to its contract in tests: Transport
// checks every request a test sends and every answer it gets against
// api/openapi.yaml, and fails the test on a mismatch, so the document
// cannot drift from the server.
//
// What it holds the traffic to:
//   - every request goes to an operation of the document, or is answered
//     404 or 405 with a problem (a test may probe a route that does not
//     exist);
//   - a request the document says is valid (path, query, headers, body)
//     is answered with a status the operation declares, and a request it
//     says is invalid is refused with a 4xx: a server that accepts what
//     the contract forbids has drifted too;
//   - every answer has a declared status, media type, headers and a body
//     its schema admits. An event stream (text/event-stream) is checked
//     as the test reads it: each event's data against the
//     ReportReadyEvent schema.
//
// Plug it into an http.Client, or an api.Client's HTTP:
//
//	client := &http.Client{Transport: apitest.Transport(t, nil)}
//	device := &api.Client{Base: base, Token: token, HTTP: apitest.Client(t, nil)}
//
// Bodies are read whole (but for an event stream's) before the caller
// gets them, and each exchange costs a few milliseconds of CPU: the
// validator, github.com/getkin/kin-openapi, compiles a JSON Schema
// 2020-12 schema for each check.
package apitest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"

	"octflow/api"
)

// contract is the loaded document and its router, built once.
type contract struct {
	doc    *openapi3.T
	router routers.Router
	// event is the schema of an event stream's data.
	event *openapi3.Schema
}

var load = sync.OnceValues(func() (*contract, error) {
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(api.OpenAPI())
	if err != nil {
		return nil, fmt.Errorf("load api/openapi.yaml: %w", err)
	}
	if err := doc.Validate(loader.Context); err != nil {
		return nil, fmt.Errorf("api/openapi.yaml is not a valid OpenAPI document: %w", err)
	}
	// Route by path alone: the servers name make dev's gateway, tests
	// run theirs on other ports.
	doc.Servers = nil
	router, err := legacy.NewRouter(doc)
	if err != nil {
		return nil, fmt.Errorf("route api/openapi.yaml: %w", err)
	}
	event := doc.Components.Schemas["ReportReadyEvent"]
	if event == nil || event.Value == nil {
		return nil, errors.New("api/openapi.yaml has no ReportReadyEvent schema")
	}
	return &contract{doc: doc, router: router, event: event.Value}, nil
})

// Bodies of the binary media types, and the Native DICOM Model (XML,
// which api's own tests parse), are opaque to the validator: it checks
// only that the document declares the media type. DICOM JSON is JSON.
func init() {
	for _, mt := range []string{"application/dicom", "application/pdf", "text/html", "multipart/related", "application/dicom+xml"} {
		openapi3filter.RegisterBodyDecoder(mt, openapi3filter.FileBodyDecoder)
	}
	openapi3filter.RegisterBodyDecoder("application/dicom+json", openapi3filter.JSONBodyDecoder)
}

// Transport wraps base (http.DefaultTransport when nil) so that every
// request sent through it and every response received is checked against
// api/openapi.yaml; a mismatch fails t (t.Errorf: the test goes on, and
// the round trip returns what the server answered).
func Transport(t testing.TB, base http.RoundTripper) http.RoundTripper {
	t.Helper()
	c, err := load()
	if err != nil {
		t.Fatal(err)
	}
	if base == nil {
		base = http.DefaultTransport
	}
	tr := &transport{t: t, base: base, c: c}
	// A stream may still be read after its test has ended, when failing
	// it would panic.
	t.Cleanup(func() { tr.ended.Store(true) })
	return tr
}

// Client returns a copy of c (or of a zero client when c is nil) whose
// transport is Transport(t, c.Transport).
func Client(t testing.TB, c *http.Client) *http.Client {
	t.Helper()
	out := &http.Client{}
	if c != nil {
		*out = *c
	}
	out.Transport = Transport(t, out.Transport)
	return out
}

type transport struct {
	t     testing.TB
	base  http.RoundTripper
	c     *contract
	ended atomic.Bool
}

// fail reports a mismatch, unless the test has ended.
func (tr *transport) fail(format string, args ...any) {
	if !tr.ended.Load() {
		tr.t.Errorf(format, args...)
	}
}

func (tr *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil && req.Body != http.NoBody {
		var err error
		body, err = io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, err
		}
	}
	fresh := func() *http.Request {
		r := req.Clone(req.Context())
		if body != nil {
			r.Body = io.NopCloser(bytes.NewReader(body))
			r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
		}
		return r
	}
	what := req.Method + " " + req.URL.RequestURI()

	route, params, routeErr := tr.c.router.FindRoute(fresh())
	var input *openapi3filter.RequestValidationInput
	var reqErr error
	if routeErr == nil {
		opts := &openapi3filter.Options{
			AuthenticationFunc:    openapi3filter.NoopAuthenticationFunc,
			IncludeResponseStatus: true,
			MultiError:            true,
			SkipSettingDefaults:   true,
		}
		opts.WithCustomSchemaErrorFunc(schemaError)
		input = &openapi3filter.RequestValidationInput{Request: fresh(), PathParams: params, Route: route, Options: opts}
		reqErr = openapi3filter.ValidateRequest(context.Background(), input)
	}

	resp, err := tr.base.RoundTrip(fresh())
	if err != nil {
		return resp, err
	}
	if routeErr != nil {
		// No operation of the document: the server must say so.
		if resp.StatusCode != http.StatusNotFound && resp.StatusCode != http.StatusMethodNotAllowed {
			tr.fail("openapi: %s is no operation of api/openapi.yaml (%v), yet the gateway answered %d", what, routeErr, resp.StatusCode)
			return resp, nil
		}
		b, err := readBack(resp)
		if err != nil {
			return nil, err
		}
		if err := tr.problem(resp, b); err != nil {
			tr.fail("openapi: %s (no operation of api/openapi.yaml) was answered %d but not with a problem: %v", what, resp.StatusCode, err)
		}
		return resp, nil
	}
	if reqErr != nil && (resp.StatusCode < 400 || resp.StatusCode >= 500) {
		tr.fail("openapi: %s does not match api/openapi.yaml, yet the gateway answered %d, not a 4xx:\n%v", what, resp.StatusCode, reqErr)
	}

	out := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: input,
		Status:                 resp.StatusCode,
		Header:                 resp.Header,
		Options:                input.Options,
	}
	if isEventStream(resp.Header) && resp.StatusCode == http.StatusOK {
		// A stream has no end to wait for: check its head now and its
		// events as they are read.
		opts := *input.Options
		opts.ExcludeResponseBody = true
		out.Options = &opts
		out.Body = io.NopCloser(strings.NewReader(""))
		if err := openapi3filter.ValidateResponse(context.Background(), out); err != nil {
			tr.fail("openapi: the answer to %s does not match api/openapi.yaml:\n%v", what, err)
		}
		resp.Body = &eventReader{ReadCloser: resp.Body, tr: tr, what: what}
		return resp, nil
	}
	b, err := readBack(resp)
	if err != nil {
		return nil, err
	}
	out.SetBodyBytes(b)
	if err := openapi3filter.ValidateResponse(context.Background(), out); err != nil {
		tr.fail("openapi: the answer %d to %s does not match api/openapi.yaml:\n%v\nbody: %s", resp.StatusCode, what, err, excerpt(b))
	}
	return resp, nil
}

// problem checks an answer is a problem the Problem schema admits.
func (tr *transport) problem(resp *http.Response, b []byte) error {
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if mt != "application/problem+json" {
		return fmt.Errorf("media type %q, want application/problem+json", mt)
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	return tr.c.doc.Components.Schemas["Problem"].Value.VisitJSON(v, openapi3.EnableJSONSchema2020(), openapi3.MultiErrors(),
		openapi3.SetSchemaErrorMessageCustomizer(schemaError))
}

// schemaError is a schema mismatch in one line: where in the value, and
// what is wrong there (the body is shown beside it, not the schema).
func schemaError(err *openapi3.SchemaError) string {
	reason := err.Reason
	if reason == "" {
		reason = "does not match the schema's " + err.SchemaField
	}
	if p := "/" + strings.Join(err.JSONPointer(), "/"); p != "/" && !strings.Contains(reason, p) {
		return fmt.Sprintf("at %q: %s", p, reason)
	}
	return reason
}

// readBack reads a response's body and puts it back for the caller.
func readBack(resp *http.Response) ([]byte, error) {
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(b))
	return b, err
}

func isEventStream(h http.Header) bool {
	mt, _, _ := mime.ParseMediaType(h.Get("Content-Type"))
	return mt == "text/event-stream"
}

func excerpt(b []byte) string {
	const max = 2000
	if len(b) > max {
		return string(b[:max]) + "…"
	}
	return string(b)
}

// eventReader passes a Server-Sent Events stream through and checks each
// complete event's data against the ReportReadyEvent schema.
type eventReader struct {
	io.ReadCloser
	tr      *transport
	what    string
	pending []byte // an incomplete line
	data    []string
}

func (r *eventReader) Read(p []byte) (int, error) {
	n, err := r.ReadCloser.Read(p)
	r.pending = append(r.pending, p[:n]...)
	for {
		i := bytes.IndexByte(r.pending, '\n')
		if i < 0 {
			break
		}
		r.line(strings.TrimSuffix(string(r.pending[:i]), "\r"))
		r.pending = r.pending[i+1:]
	}
	return n, err
}

// line takes one line of the stream (SSE: a blank line ends an event).
func (r *eventReader) line(l string) {
	switch {
	case l == "":
		if len(r.data) > 0 {
			r.event(strings.Join(r.data, "\n"))
		}
		r.data = nil
	case strings.HasPrefix(l, ":"): // a comment
	case strings.HasPrefix(l, "data:"):
		r.data = append(r.data, strings.TrimPrefix(strings.TrimPrefix(l, "data:"), " "))
	}
}

func (r *eventReader) event(data string) {
	var v any
	if err := json.Unmarshal([]byte(data), &v); err != nil {
		r.tr.fail("openapi: an event of %s is not JSON: %v: %s", r.what, err, excerpt([]byte(data)))
		return
	}
	if err := r.tr.c.event.VisitJSON(v, openapi3.EnableJSONSchema2020(), openapi3.MultiErrors(),
		openapi3.SetSchemaErrorMessageCustomizer(schemaError)); err != nil {
		r.tr.fail("openapi: an event of %s does not match ReportReadyEvent in api/openapi.yaml:\n%v\ndata: %s", r.what, err, excerpt([]byte(data)))
	}
}
