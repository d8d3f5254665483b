package imaging

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"testing"
)

// FuzzStages runs every image stage on volumes the reader accepts but no
// eye produced: random sizes within limits, noise, one level, a single
// bright row or column, random bytes, and small phantoms, in every scan
// pattern. No stage may panic or hang, and what comes out is either an
// invalid-volume error or an analysis whose every number is finite (it
// encodes as JSON, which refuses NaN and infinities).
func FuzzStages(f *testing.F) {
	for mode := range uint8(6) {
		f.Add(uint64(mode), mode, uint8(1), uint8(40), uint8(40), uint8(0), float32(1000))
	}
	f.Add(uint64(9), uint8(5), uint8(3), uint8(100), uint8(60), uint8(2), float32(1))
	f.Fuzz(func(t *testing.T, seed uint64, mode, frames, rows, cols, pattern uint8, scale float32) {
		if math.IsNaN(float64(scale)) || math.IsInf(float64(scale), 0) {
			scale = 1
		}
		scale = min(max(scale, 0), 1e6)
		fr, r, c := 1+int(frames)%3, 8+int(rows)%120, 8+int(cols)%120
		sp := Spacing{AxialUm: 3.87, LateralUm: 11.7, FrameUm: 120}
		v := NewVolume(fr, r, c, sp)
		rng := rand.New(rand.NewPCG(seed, 7))
		switch mode % 6 {
		case 0: // speckle
			for i := range v.Data {
				v.Data[i] = float32(rng.ExpFloat64()) * scale
			}
		case 1: // one level
			for i := range v.Data {
				v.Data[i] = scale
			}
		case 2: // a single bright row
			row := rng.IntN(r)
			for fi := range fr {
				for cc := range c {
					v.Data[(fi*r+row)*c+cc] = scale
				}
			}
		case 3: // a single bright column
			col := rng.IntN(c)
			for fi := range fr {
				for rr := range r {
					v.Data[(fi*r+rr)*c+col] = scale
				}
			}
		case 4: // a small phantom
			p := NewPhantom(PhantomOptions{Seed: seed, Frames: fr, Rows: max(r, 32), Cols: c, Fluid: seed%2 == 0, Drusen: seed%3 == 0})
			v = p.Volume
		default: // random bytes
			for i := range v.Data {
				v.Data[i] = float32(rng.IntN(256))
			}
		}
		v.Pattern = []Pattern{"", Cube, Line, Circle, Radial}[int(pattern)%5]
		if p, err := ResolvePattern(v, ""); err != nil {
			if !errors.Is(err, ErrInvalidVolume) {
				t.Fatalf("pattern: %v", err)
			}
			return
		} else {
			v.Pattern = p
		}
		ctx := context.Background()
		w, _ := Normalize(v)
		den, err := Denoise(ctx, w, DenoiseOptions{})
		if err != nil {
			t.Fatalf("denoise: %v", err)
		}
		l, err := SegmentLayers(ctx, den)
		if err != nil {
			t.Fatalf("layers: %v", err)
		}
		masks, err := FindLesionMasks(ctx, den, l)
		if err != nil {
			t.Fatalf("lesion masks: %v", err)
		}
		lesions, err := masks.Lesions(den, l)
		if err != nil {
			t.Fatalf("lesions: %v", err)
		}
		a, err := Analyze(ctx, den, l)
		if err != nil {
			if !errors.Is(err, ErrInvalidVolume) {
				t.Fatalf("analyze: %v", err)
			}
			return
		}
		if _, err := json.Marshal(struct {
			A *Analysis
			L []Lesion
		}{a, lesions}); err != nil {
			t.Fatalf("the analysis holds a number that is not one: %v", err)
		}
		if a.Measurable() && a.Quality.Gradable == Ungradable {
			t.Fatalf("measured an ungradable scan")
		}
	})
}
