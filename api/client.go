package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"net/url"
	"octflow/api/intake"
	"octflow/api/problems"
)

// Client calls the gateway over HTTP with one bearer token: what
// `octflow submit`, the benchmark and the end-to-end tests use.
type Client struct {
	// Base is the gateway's URL, e.g. http://127.0.0.1:8080.
	Base  string
	Token string
	// HTTP is the client to send with (default http.DefaultClient).
	HTTP *http.Client
}

// Submit sends a scan with its metadata: POST /v1/exams. It returns the
// status and the HTTP status code (202 new, 200 known).
func (c *Client) Submit(ctx context.Context, meta intake.Meta, scan []byte) (*ExamStatus, int, error) {
	contentType, body := Multipart(meta, scan)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.Base+"/v1/exams", body)
	if err != nil {
		return nil, 0, err
	}
	req.Header.Set("Content-Type", contentType)
	var st ExamStatus
	code, err := c.Do(req, &st)
	if err != nil {
		return nil, code, err
	}
	return &st, code, nil
}

// Status reads an exam's status: GET /v1/exams/{examId}.
func (c *Client) Status(ctx context.Context, examID string) (*ExamStatus, error) {
	var st ExamStatus
	if err := c.Get(ctx, "/v1/exams/"+url.PathEscape(examID), &st); err != nil {
		return nil, err
	}
	return &st, nil
}

// Get GETs path and decodes the JSON answer into v.
func (c *Client) Get(ctx context.Context, path string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.Base+path, nil)
	if err != nil {
		return err
	}
	_, err = c.Do(req, v)
	return err
}

// Do sends req with the token and decodes a 2xx JSON answer into v
// (when v is not nil). A 3xx or worse is an error carrying the problem's
// title and detail.
func (c *Client) Do(req *http.Request, v any) (int, error) {
	req.Header.Set("Authorization", "Bearer "+c.Token)
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, fmt.Errorf("%s %s: %w", req.Method, req.URL.Path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return resp.StatusCode, fmt.Errorf("read response: %w", err)
	}
	if resp.StatusCode >= 300 {
		var p problems.Problem
		if json.Unmarshal(b, &p) == nil && p.Title != "" {
			return resp.StatusCode, fmt.Errorf("%s %s: %d %s: %s", req.Method, req.URL.Path, resp.StatusCode, p.Title, p.Detail)
		}
		return resp.StatusCode, fmt.Errorf("%s %s: %s: %s", req.Method, req.URL.Path, resp.Status, b)
	}
	if v != nil {
		if err := json.Unmarshal(b, v); err != nil {
			return resp.StatusCode, fmt.Errorf("decode %s: %w", req.URL.Path, err)
		}
	}
	return resp.StatusCode, nil
}

// Multipart encodes a submission's two parts: meta (JSON) and scan.
func Multipart(meta intake.Meta, scan []byte) (contentType string, body *bytes.Buffer) {
	body = &bytes.Buffer{}
	mw := multipart.NewWriter(body)
	metaJSON, _ := json.Marshal(meta) // a struct of strings always encodes
	for _, p := range []struct {
		disposition, contentType string
		data                     []byte
	}{
		{`form-data; name="meta"`, "application/json", metaJSON},
		{`form-data; name="scan"; filename="scan.dcm"`, "application/dicom", scan},
	} {
		h := textproto.MIMEHeader{}
		h.Set("Content-Disposition", p.disposition)
		h.Set("Content-Type", p.contentType)
		pw, _ := mw.CreatePart(h) // writes to a bytes.Buffer cannot fail
		pw.Write(p.data)
	}
	mw.Close()
	return mw.FormDataContentType(), body
}
