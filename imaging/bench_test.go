package imaging

import (
	"context"
	"os"
	"sync"
	"testing"
)

// benchInput is a full-size macular cube (49 × 496 × 512) with fluid and
// drusen, denoised and segmented once for the benchmarks of later stages.
type benchInput struct {
	noisy, denoised *Volume
	layers          *Layers
}

// loadBenchInput builds the benchmarks' cube on first use.
func loadBenchInput(b *testing.B, once *sync.Once, in *benchInput) *benchInput {
	b.Helper()
	once.Do(func() {
		ctx := context.Background()
		p := NewPhantom(PhantomOptions{Seed: 42, Fluid: true, Drusen: true})
		in.noisy = p.Volume
		var err error
		if in.denoised, err = Denoise(ctx, p.Volume, DenoiseOptions{}); err != nil {
			b.Fatal(err)
		}
		if in.layers, err = SegmentLayers(ctx, in.denoised); err != nil {
			b.Fatal(err)
		}
	})
	if in.layers == nil {
		b.Fatal("bench input failed to build")
	}
	return in
}

// allStages runs every image stage on a volume as a device stored it.
func allStages(ctx context.Context, v *Volume) error {
	w, _ := Normalize(v)
	den, err := Denoise(ctx, w, DenoiseOptions{})
	if err != nil {
		return err
	}
	l, err := SegmentLayers(ctx, den)
	if err != nil {
		return err
	}
	if _, err := MarkLesions(ctx, den, l); err != nil {
		return err
	}
	_, err = Analyze(ctx, den, l)
	return err
}

// BenchmarkOneBScan times every image stage on a single B-scan as a real
// device exports it (the SPECTRALIS circle scan: 496 × 768, 8-bit). The
// README's target: ≤ 0.5 s.
func BenchmarkOneBScan(b *testing.B) {
	f, err := os.Open("testdata/realdata/spectralis-circle-2.dcm")
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		b.Fatal(err)
	}
	v, _, err := ReadDICOM(f, st.Size())
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for b.Loop() {
		if err := allStages(ctx, v); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkStages times each image stage, and all four in sequence, on a
// full-size cube. The README's target: all of them in ≤ 5 s on the
// two-core CI machines.
func BenchmarkStages(b *testing.B) {
	var once sync.Once
	var shared benchInput
	ctx := context.Background()
	stages := []struct {
		name string
		run  func(in *benchInput) error
	}{
		{"normalize", func(in *benchInput) error { Normalize(in.noisy); return nil }},
		{"denoise", func(in *benchInput) error { _, err := Denoise(ctx, in.noisy, DenoiseOptions{}); return err }},
		{"layers", func(in *benchInput) error { _, err := SegmentLayers(ctx, in.denoised); return err }},
		{"lesions", func(in *benchInput) error { _, err := MarkLesions(ctx, in.denoised, in.layers); return err }},
		{"measure", func(in *benchInput) error { _, err := Analyze(ctx, in.denoised, in.layers); return err }},
		{"volume", func(in *benchInput) error { return allStages(ctx, in.noisy) }},
	}
	for _, s := range stages {
		b.Run(s.name, func(b *testing.B) {
			in := loadBenchInput(b, &once, &shared)
			b.ReportAllocs()
			for b.Loop() {
				if err := s.run(in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
