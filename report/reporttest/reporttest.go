// Package reporttest reads reports back in tests: the text a PDF report
// shows, as a reader's tool extracts it.
package reporttest

import (
	"image"
	"image/png"
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

// PDFImages extracts the images a PDF shows, as drawn, with pdfimages
// -png (poppler-utils), in the order the PDF holds them.
func PDFImages(t testing.TB, pdf []byte) []image.Image {
	t.Helper()
	if _, err := exec.LookPath("pdfimages"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("pdfimages missing: .ci/run should have installed poppler-utils")
		}
		t.Skip("pdfimages not installed (apt-get install poppler-utils)")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "report.pdf")
	if err := os.WriteFile(path, pdf, 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("pdfimages", "-png", path, filepath.Join(dir, "img")).CombinedOutput(); err != nil {
		t.Fatalf("pdfimages: %v: %s", err, out)
	}
	files, err := filepath.Glob(filepath.Join(dir, "img-*.png"))
	if err != nil {
		t.Fatal(err)
	}
	var imgs []image.Image
	for _, f := range files {
		r, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(r)
		r.Close()
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		imgs = append(imgs, img)
	}
	return imgs
}
