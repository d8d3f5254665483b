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

// TestPixelEncodingReadsWhatTheDICOMSays: stored bits, sign, the
// Modality LUT and MONOCHROME1 all turn into levels where brighter is
// more reflective and the lowest is 0.
func TestPixelEncodingReadsWhatTheDICOMSays(t *testing.T) {
	for _, c := range []struct {
		name string
		e    pixelEncoding
		raw  []uint32
		want []float32
	}{
		{"unsigned 16", pixelEncoding{mask: 0xffff, slope: 1, lo: 0, hi: 65535}, []uint32{0, 1000, 65535}, []float32{0, 1000, 65535}},
		{"12 bits stored in 16", pixelEncoding{mask: 0xfff, slope: 1, lo: 0, hi: 4095}, []uint32{0xf123, 0x0fff}, []float32{0x123, 4095}},
		{"signed 16", pixelEncoding{mask: 0xffff, signBit: 0x8000, slope: 1, lo: -32768, hi: 32767}, []uint32{0x8000, 0xffff, 0, 32767},
			[]float32{0, 32767, 32768, 65535}},
		{"rescaled", pixelEncoding{mask: 0xff, slope: 2, icpt: -10, lo: -10, hi: 500}, []uint32{0, 5, 255}, []float32{0, 10, 510}},
		{"MONOCHROME1", pixelEncoding{mask: 0xff, slope: 1, lo: 0, hi: 255, invert: true}, []uint32{0, 55, 255}, []float32{255, 200, 0}},
	} {
		for i, r := range c.raw {
			if got := c.e.value(r); got != c.want[i] {
				t.Errorf("%s: stored %#x read as %v, want %v", c.name, r, got, c.want[i])
			}
		}
	}
}
