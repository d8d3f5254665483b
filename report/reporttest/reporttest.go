// Package reporttest reads reports back in tests: the text a PDF report
// shows, as a reader's tool extracts it.
package reporttest

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// PDFText extracts a PDF's text with pdftotext -layout (poppler-utils,
// which .ci/run installs). Without pdftotext the test fails under CI and
// is skipped elsewhere.
func PDFText(t testing.TB, pdf []byte) string {
	t.Helper()
	if _, err := exec.LookPath("pdftotext"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("pdftotext missing: .ci/run should have installed poppler-utils")
		}
		t.Skip("pdftotext not installed (apt-get install poppler-utils)")
	}
	path := filepath.Join(t.TempDir(), "report.pdf")
	if err := os.WriteFile(path, pdf, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("pdftotext", "-layout", path, "-").Output()
	if err != nil {
		t.Fatalf("pdftotext: %v", err)
	}
	return string(out)
}
