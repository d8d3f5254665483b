package cli

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"octflow/api"
	"octflow/api/intake"
	"octflow/config"
	"octflow/internal/devsystem"
	"octflow/lifecycle"
)

// runSubmit sends a DICOM scan to the API and optionally waits for the
// exam to finish. Exit status: 0 completed (or accepted without --wait),
// 1 on any error, 3 when the exam ended DEAD.
func runSubmit(ctx context.Context, args []string) error {
	s := config.New("submit", nil)
	// The device token is OCTFLOW_TOKEN's (config.Client): never a flag,
	// which ps would show.
	client := config.BindClient(s)
	token := &client.Token
	apiTLS := config.BindAPITLS(s)
	fs := s.FlagSet()
	devTokens := fs.String("dev-tokens", "", "read the device token from octflow dev's dev-tokens.json instead")
	file := fs.String("file", "", "DICOM Ophthalmic Tomography file to submit (required)")
	examID := fs.String("exam-id", "", "exam ID (default: derived from the file's digest, so a resend is idempotent)")
	priority := fs.String("priority", "normal", "urgent, normal or low")
	eye := fs.String("eye", "", "OD or OS (default: from the DICOM header)")
	callback := fs.String("callback-url", "", "URL to POST the report-ready event to")
	scanType := fs.String("scan-type", "", "cube, line or circle, when the DICOM does not say (default: what the DICOM or its shape says)")
	wait := fs.Bool("wait", false, "wait until the exam is COMPLETED or DEAD, printing each state change")
	timeout := fs.Duration("timeout", 10*time.Minute, "give up waiting after this long")
	if err := s.Parse(args); err != nil {
		return err
	}
	apiURL := client.APIURL
	if *file == "" {
		return fmt.Errorf("--file is required")
	}
	if *devTokens != "" {
		b, err := os.ReadFile(*devTokens)
		if err != nil {
			return fmt.Errorf("read dev tokens: %w", err)
		}
		var secrets devsystem.Secrets
		if err := json.Unmarshal(b, &secrets); err != nil {
			return fmt.Errorf("parse %s: %w", *devTokens, err)
		}
		*token = secrets.Device
	}
	if *token == "" {
		return fmt.Errorf("OCTFLOW_TOKEN or --dev-tokens is required")
	}
	scan, err := os.ReadFile(*file)
	if err != nil {
		return fmt.Errorf("read scan: %w", err)
	}
	if *examID == "" {
		sum := sha256.Sum256(scan)
		*examID = "oct-" + hex.EncodeToString(sum[:6])
	}
	hc := &http.Client{Timeout: 5 * time.Minute}
	if cfg := apiTLS.Config(); cfg != nil {
		hc.Transport = &http.Transport{TLSClientConfig: cfg, Proxy: http.ProxyFromEnvironment}
	}
	c := &api.Client{Base: strings.TrimRight(apiURL, "/"), Token: *token, HTTP: hc}
	st, code, err := c.Submit(ctx, intake.Meta{ExamID: *examID, Priority: *priority, Eye: *eye, CallbackURL: *callback, ScanType: *scanType}, scan)
	if err != nil {
		return err
	}
	verb := map[int]string{http.StatusAccepted: "accepted", http.StatusOK: "already known"}[code]
	// The answer names the exam by its reference; the device's ID is
	// shown only here, to the one who typed it.
	fmt.Printf("exam %s %s as %s: %s\n", *examID, verb, st.ExamID, st.State)
	if !*wait {
		return printJSON(st)
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	last := string(st.State) + "/" + string(st.Stage)
	for !st.State.Terminal() {
		select {
		case <-ctx.Done():
			return fmt.Errorf("exam %s still %s after %s", st.ExamID, st.State, *timeout)
		case <-time.After(500 * time.Millisecond):
		}
		if st, err = c.Status(ctx, st.ExamID); err != nil {
			return err
		}
		if now := string(st.State) + "/" + string(st.Stage); now != last {
			fmt.Printf("  %s  %-10s %-8s %s\n", time.Now().Format("15:04:05"), st.State, st.Stage, st.Node)
			last = now
		}
	}
	if err := printJSON(st); err != nil {
		return err
	}
	if st.State == lifecycle.Dead {
		return exitCode(3)
	}
	return nil
}

func printJSON(v any) error {
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// writeJSON writes v to path, indented.
func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode %s: %w", path, err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
