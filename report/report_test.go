package report

import (
	"bytes"
	"context"
	"testing"
	"time"

	"octflow/imaging"
)

func phantomFigures(t *testing.T) (*Figures, *imaging.Measurements) {
	t.Helper()
	ctx := context.Background()
	p := imaging.NewPhantom(imaging.PhantomOptions{Seed: 5, Frames: 9, Rows: 248, Cols: 256})
	den, err := imaging.Denoise(ctx, p.Volume, imaging.DenoiseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	layers, err := imaging.SegmentLayers(ctx, den)
	if err != nil {
		t.Fatal(err)
	}
	m, err := imaging.Measure(ctx, den, layers)
	if err != nil {
		t.Fatal(err)
	}
	f := m.FoveaFrame
	figs := &Figures{BScan: den.Frame(f), Rows: den.Rows, Cols: den.Cols, Boundaries: map[string][]float32{},
		Thickness: m.ThicknessMapUm, Frames: den.Frames, Spacing: den.Spacing, FoveaFrame: f, FoveaCol: m.FoveaCol}
	for name, rows := range layers.Boundaries {
		figs.Boundaries[name] = rows[f*den.Cols : (f+1)*den.Cols]
	}
	return figs, m
}

func TestScanQualityTellsARetinaFromNoise(t *testing.T) {
	figs, _ := phantomFigures(t)
	if q := ScanQuality(figs); q.Grade != "good" || q.SNRdB < 20 {
		t.Errorf("phantom quality %+v, want good", q)
	}
	flat := *figs
	flat.BScan = make([]float32, len(figs.BScan))
	for i := range flat.BScan {
		flat.BScan[i] = float32(100 + (i*7919)%200) // the same noise inside and outside the retina
	}
	if q := ScanQuality(&flat); q.Grade != "poor" {
		t.Errorf("noise-only quality %+v, want poor", q)
	}
}

func TestPDFRendersWithFigures(t *testing.T) {
	figs, m := phantomFigures(t)
	r := &Report{SchemaVersion: SchemaVersion, ExamID: "E-PDF", Eye: "OS", Priority: "urgent",
		SubmittedAt: time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC), GeneratedAt: time.Date(2026, 11, 29, 9, 1, 0, 0, time.UTC),
		Measurements: Headline(m), Quality: ScanQuality(figs), Algorithms: map[string]string{"denoise": "v0"}}
	pdf, err := PDF(r, figs)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(pdf, []byte("%PDF-")) || bytes.Count(pdf, []byte("/Type /Page\n")) != 2 {
		t.Errorf("want a two-page PDF, got %d bytes", len(pdf))
	}
	h := Headline(m)
	if h.ThicknessMapUm != nil || len(h.Layers) != len(imaging.RetinalLayers) {
		t.Fatalf("headline: thickness map kept %v, %d layers", h.ThicknessMapUm != nil, len(h.Layers))
	}
	for i, l := range h.Layers {
		if l.MapUm != nil || m.Layers[i].MapUm == nil {
			t.Errorf("layer %s: the report carries its map, or the measurements lost it", l.Name)
		}
	}
}
