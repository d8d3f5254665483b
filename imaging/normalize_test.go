package imaging

import (
	"bytes"
	"math"
	"testing"
)

// TestNormalizeTellsEachExportAndBringsItBack writes a phantom in every
// export and checks that normalisation names the encoding and lands the
// samples back on the linear original (within a few percent).
func TestNormalizeTellsEachExportAndBringsItBack(t *testing.T) {
	p := NewPhantom(PhantomOptions{Seed: 11, Frames: 5, Rows: 248, Cols: 256})
	for _, c := range []struct {
		export Export
		want   Encoding
	}{{ExportLinear16, Linear}, {ExportLog8, Log}, {ExportPow8, Power}} {
		t.Run(string(c.export), func(t *testing.T) {
			levels, bits := c.export.Levels(p.Volume)
			// Through a DICOM file, as a device would send it.
			var buf bytes.Buffer
			if err := WriteDICOM(&buf, levels, Header{SOPInstanceUID: "1.2.3", Bits: bits}); err != nil {
				t.Fatal(err)
			}
			read, _, err := ReadDICOM(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
			if err != nil {
				t.Fatal(err)
			}
			w, in := Normalize(read)
			if in.Encoding != c.want || c.want == Power && math.Abs(in.Exponent-0.25) > 0.03 {
				t.Fatalf("found %+v, want %s", in, c.want)
			}
			// Where the phantom has signal, the working level is the
			// original's within a few percent (8 bits quantise).
			var sum, sum2 float64
			var n int
			for i, x := range p.Volume.Data {
				if x > 2*workingBackground {
					d := math.Log(float64(w.Data[i]) / float64(x))
					sum, sum2, n = sum+d, sum2+d*d, n+1
				}
			}
			mean := sum / float64(n)
			if sd := math.Sqrt(sum2/float64(n) - mean*mean); math.Abs(mean) > 0.05 || sd > 0.05 {
				t.Errorf("log ratio to the original: mean %+.3f, spread %.3f", mean, sd)
			}
		})
	}
}

// TestNormalizeLeavesNothingToDivideByZero: volumes of one level, of
// zeros, or of a few samples map to the working background, flat.
func TestNormalizeLeavesNothingToDivideByZero(t *testing.T) {
	sp := Spacing{AxialUm: 4, LateralUm: 10, FrameUm: 100}
	for _, level := range []float32{0, 1, 65535} {
		v := NewVolume(2, 16, 16, sp)
		for i := range v.Data {
			v.Data[i] = level
		}
		w, in := Normalize(v)
		if in.Encoding != Flat {
			t.Errorf("level %v: %+v, want flat", level, in)
		}
		for _, x := range w.Data {
			if x != workingBackground {
				t.Fatalf("level %v became %v", level, x)
			}
		}
	}
	// Zeros among the signal (an export's invalid samples) become the
	// lowest level the volume otherwise holds, not a hole.
	p := NewPhantom(PhantomOptions{Seed: 2, Frames: 2, Rows: 124, Cols: 128})
	levels, _ := ExportPow8.Levels(p.Volume)
	for i := 0; i < len(levels.Data); i += 7 {
		levels.Data[i] = 0
	}
	w, in := Normalize(levels)
	if in.FloorFraction < 0.1 {
		t.Errorf("floor fraction %.3f of a volume with every 7th sample 0", in.FloorFraction)
	}
	for i, x := range w.Data {
		if !(x > 0) || math.IsInf(float64(x), 0) {
			t.Fatalf("sample %d became %v", i, x)
		}
	}
}

// TestNormalizeTellsAPowerUnderAddedNoise: noise added to the levels
// after the encoding (white, the same at every level) flattens the
// spread of the dark levels until a power looks like a log; the spread
// neighbouring rows share (the device's speckle) still tells them
// apart. Real SPECTRALIS scans (255·v^0.25) and a phantom whose speckle
// spans two rows, as a device's does, in a power and a log export,
// under additive noise of σ up to 8% of the range (5% for the
// phantom's power, whose speckle correlation is weaker than a real
// device's): the encoding found on the clean scan holds, and the
// exponent within 0.08 (noise lifts the background percentile it is
// judged by: the real line, whose background is the darkest, reads
// 0.703 clean, 0.67 at 5% and 0.63 at 8%).
func TestNormalizeTellsAPowerUnderAddedNoise(t *testing.T) {
	p := NewPhantom(PhantomOptions{Seed: 11, Frames: 5, Rows: 496, Cols: 256})
	correlated := NewVolumeLike(p.Volume)
	copy(correlated.Data, p.Volume.Data)
	for f := range correlated.Frames {
		gaussian1D(correlated.Frame(f), correlated.Rows, correlated.Cols, 1, false)
	}
	pow8, _ := ExportPow8.Levels(correlated)
	log8, _ := ExportLog8.Levels(correlated)
	circle2, _ := readRealScan(t, "spectralis-circle-2")
	circle4, _ := readRealScan(t, "spectralis-circle-4")
	line, _ := readRealScan(t, "spectralis-line-0")
	for _, c := range []struct {
		name   string
		levels *Volume
		want   Encoding
		sigmas []float64
	}{
		{"spectralis-circle-2", circle2, Power, []float64{0.01, 0.025, 0.05, 0.08}},
		{"spectralis-circle-4", circle4, Power, []float64{0.01, 0.025, 0.05, 0.08}},
		{"spectralis-line-0", line, Power, []float64{0.01, 0.025, 0.05, 0.08}},
		{"phantom pow8, speckle over two rows", pow8, Power, []float64{0.01, 0.025, 0.05}},
		{"phantom log8, speckle over two rows", log8, Log, []float64{0.01, 0.025, 0.05, 0.08}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, clean := Normalize(c.levels)
			if clean.Encoding != c.want {
				t.Fatalf("clean: found %+v, want %s", clean, c.want)
			}
			for _, sigma := range c.sigmas {
				_, in := Normalize(degrade(c.levels, 255, additive(sigma), 1))
				if in.Encoding != c.want || math.Abs(in.Exponent-clean.Exponent) > 0.08 {
					t.Errorf("σ %.1f%% of the range: found %+v, want %s (clean: exponent %.3f)", 100*sigma, in, c.want, clean.Exponent)
				}
			}
		})
	}
}
