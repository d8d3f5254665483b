package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"os"
	"strings"
	"time"

	"octflow/api"
	"octflow/exam"
)

// runSubmit sends a DICOM scan to the API and optionally waits for the
// exam to finish. Exit status: 0 completed (or accepted without --wait),
// 1 on any error, 3 when the exam ended DEAD.
func runSubmit(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("submit", flag.ContinueOnError)
	apiURL := fs.String("api", envDefault("OCTFLOW_API_URL", "http://127.0.0.1:8080"), "API base URL (OCTFLOW_API_URL)")
	token := fs.String("token", os.Getenv("OCTFLOW_TOKEN"), "device bearer token (OCTFLOW_TOKEN)")
	devTokens := fs.String("dev-tokens", "", "read the device token from octflow dev's dev-tokens.json instead")
	file := fs.String("file", "", "DICOM Ophthalmic Tomography file to submit (required)")
	examID := fs.String("exam-id", "", "exam ID (default: derived from the file's digest, so a resend is idempotent)")
	priority := fs.String("priority", "normal", "urgent, normal or low")
	eye := fs.String("eye", "", "OD or OS (default: from the DICOM header)")
	callback := fs.String("callback-url", "", "URL to POST the report-ready event to")
	wait := fs.Bool("wait", false, "wait until the exam is COMPLETED or DEAD, printing each state change")
	timeout := fs.Duration("timeout", 10*time.Minute, "give up waiting after this long")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *file == "" {
		return fmt.Errorf("--file is required")
	}
	if *devTokens != "" {
		b, err := os.ReadFile(*devTokens)
		if err != nil {
			return fmt.Errorf("read dev tokens: %w", err)
		}
		var s devSecrets
		if err := json.Unmarshal(b, &s); err != nil {
			return fmt.Errorf("parse %s: %w", *devTokens, err)
		}
		*token = s.Device
	}
	if *token == "" {
		return fmt.Errorf("--token, OCTFLOW_TOKEN or --dev-tokens is required")
	}
	scan, err := os.ReadFile(*file)
	if err != nil {
		return fmt.Errorf("read scan: %w", err)
	}
	if *examID == "" {
		sum := sha256.Sum256(scan)
		*examID = "oct-" + hex.EncodeToString(sum[:6])
	}
	c := &submitClient{base: strings.TrimRight(*apiURL, "/"), token: *token, http: &http.Client{Timeout: 5 * time.Minute}}
	st, code, err := c.submit(ctx, api.SubmitMeta{ExamID: *examID, Priority: *priority, Eye: *eye, CallbackURL: *callback}, scan)
	if err != nil {
		return err
	}
	verb := map[int]string{http.StatusAccepted: "accepted", http.StatusOK: "already known"}[code]
	fmt.Printf("exam %s %s: %s\n", st.ExamID, verb, st.State)
	if !*wait {
		return printJSON(st)
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	last := st.State + "/" + exam.State(st.Stage)
	for !st.State.Terminal() {
		select {
		case <-ctx.Done():
			return fmt.Errorf("exam %s still %s after %s", st.ExamID, st.State, *timeout)
		case <-time.After(500 * time.Millisecond):
		}
		if st, err = c.status(ctx, st.ExamID); err != nil {
			return err
		}
		if now := st.State + "/" + exam.State(st.Stage); now != last {
			fmt.Printf("  %s  %-10s %-8s %s\n", time.Now().Format("15:04:05"), st.State, st.Stage, st.Node)
			last = now
		}
	}
	if err := printJSON(st); err != nil {
		return err
	}
	if st.State == exam.Dead {
		return exitCode(3)
	}
	return nil
}

type submitClient struct {
	base, token string
	http        *http.Client
}

func (c *submitClient) submit(ctx context.Context, meta api.SubmitMeta, scan []byte) (*api.ExamStatus, int, error) {
	contentType, body := c.multipart(meta, scan)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+"/v1/exams", body)
	if err != nil {
		return nil, 0, err
	}
	req.Header.Set("Content-Type", contentType)
	return c.do(req)
}

// multipart encodes the two parts of a submission: meta (JSON) and scan.
func (c *submitClient) multipart(meta api.SubmitMeta, scan []byte) (contentType string, body *bytes.Buffer) {
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

func (c *submitClient) status(ctx context.Context, examID string) (*api.ExamStatus, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/v1/exams/"+examID, nil)
	if err != nil {
		return nil, err
	}
	st, _, err := c.do(req)
	return st, err
}

func (c *submitClient) do(req *http.Request) (*api.ExamStatus, int, error) {
	req.Header.Set("Authorization", "Bearer "+c.token)
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, 0, fmt.Errorf("%s %s: %w", req.Method, req.URL.Path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, 0, fmt.Errorf("read response: %w", err)
	}
	if resp.StatusCode >= 300 {
		var p api.Problem
		if json.Unmarshal(b, &p) == nil && p.Title != "" {
			return nil, resp.StatusCode, fmt.Errorf("%d %s: %s", resp.StatusCode, p.Title, p.Detail)
		}
		return nil, resp.StatusCode, fmt.Errorf("%s: %s", resp.Status, b)
	}
	var st api.ExamStatus
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, resp.StatusCode, fmt.Errorf("decode status: %w", err)
	}
	return &st, resp.StatusCode, nil
}

func printJSON(v any) error {
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
