package imaging

import (
	"bytes"
	"context"
	"errors"
	"math"
	"testing"
)

// smallPhantom is a reduced cube (same 6 × 6 mm field, fewer samples) so
// the tests stay quick; the full-size cube is exercised by the benchmark.
func smallPhantom(seed uint64, fluid bool) *Phantom {
	return NewPhantom(PhantomOptions{Seed: seed, Frames: 13, Rows: 248, Cols: 256, Fluid: fluid})
}

func TestDICOMRoundTripKeepsGeometryAndSamples(t *testing.T) {
	p := smallPhantom(1, false)
	var buf bytes.Buffer
	h := Header{SOPInstanceUID: "1.2.3.4", StudyInstanceUID: "1.2.3", SeriesInstanceUID: "1.2.3.5", PatientID: "PAT-42"}
	if err := WriteDICOM(&buf, p.Volume, h); err != nil {
		t.Fatal(err)
	}
	got, gotH, err := ReadDICOM(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	if err != nil {
		t.Fatal(err)
	}
	if gotH != h {
		t.Errorf("header = %+v, want %+v", gotH, h)
	}
	if got.Frames != 13 || got.Rows != 248 || got.Cols != 256 || got.Laterality != "OD" {
		t.Fatalf("geometry = %d×%d×%d %s", got.Frames, got.Rows, got.Cols, got.Laterality)
	}
	for _, c := range []struct {
		name      string
		got, want float64
	}{
		{"axial", got.Spacing.AxialUm, p.Volume.Spacing.AxialUm},
		{"lateral", got.Spacing.LateralUm, p.Volume.Spacing.LateralUm},
		{"frame", got.Spacing.FrameUm, p.Volume.Spacing.FrameUm},
	} {
		if math.Abs(c.got-c.want) > 1e-3 {
			t.Errorf("%s spacing = %v µm, want %v", c.name, c.got, c.want)
		}
	}
	for i := 0; i < len(got.Data); i += 997 {
		if want := float32(math.Round(float64(min(p.Volume.Data[i], 65535)))); got.Data[i] != want {
			t.Fatalf("sample %d = %v, want %v", i, got.Data[i], want)
		}
	}
}

func TestReadDICOMRejectsBadVolumes(t *testing.T) {
	p := smallPhantom(2, false)
	var good bytes.Buffer
	if err := WriteDICOM(&good, p.Volume, Header{SOPInstanceUID: "1.2"}); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		data []byte
	}{
		{"empty", nil},
		{"not dicom", bytes.Repeat([]byte("hello"), 100)},
		{"truncated pixel data", good.Bytes()[:good.Len()-5000]},
		{"truncated header", good.Bytes()[:200]},
		{"wrong SOP class", bytes.Replace(good.Bytes(), []byte(OphthalmicTomographySOPClass), []byte("1.2.840.10008.5.1.4.1.1.7\x00\x00\x00\x00\x00\x00\x00"), -1)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := ReadDICOM(bytes.NewReader(c.data), int64(len(c.data)))
			if !errors.Is(err, ErrInvalidVolume) {
				t.Fatalf("err = %v, want ErrInvalidVolume", err)
			}
		})
	}
}

func TestPipelineFindsRetinaWithinAFewMicrons(t *testing.T) {
	ctx := context.Background()
	for _, seed := range []uint64{1, 2, 3} {
		p := smallPhantom(seed, false)
		den, err := Denoise(ctx, p.Volume, DenoiseOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if gain := psnr(den, p.Clean) - psnr(p.Volume, p.Clean); gain < 3 {
			t.Errorf("seed %d: denoise PSNR gain %.1f dB, want ≥ 3", seed, gain)
		}
		layers, err := SegmentLayers(ctx, den)
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{ILM, RPE, BM} {
			mae := meanAbsError(layers.Boundaries[name], p.Boundaries[name])
			t.Logf("seed %d %s: MAE %.2f px (%.1f µm)", seed, name, mae, mae*p.Volume.Spacing.AxialUm)
			if mae > 1.5 {
				t.Errorf("seed %d: %s mean absolute error %.2f px, want ≤ 1.5", seed, name, mae)
			}
		}
		m, err := Measure(ctx, den, layers)
		if err != nil {
			t.Fatal(err)
		}
		truth, err := Measure(ctx, p.Clean, &Layers{Frames: p.Clean.Frames, Cols: p.Clean.Cols,
			Boundaries: map[string][]float32{ILM: toF32(p.Boundaries[ILM]), BM: toF32(p.Boundaries[BM])}})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("seed %d: CST %.1f µm (truth %.1f), volume %.2f mm³ (truth %.2f)", seed,
			m.CentralSubfieldThicknessUm, truth.CentralSubfieldThicknessUm, m.TotalVolumeMm3, truth.TotalVolumeMm3)
		if d := math.Abs(m.CentralSubfieldThicknessUm - truth.CentralSubfieldThicknessUm); d > 10 {
			t.Errorf("seed %d: CST off by %.1f µm", seed, d)
		}
		for _, k := range ETDRSSubfields {
			if _, ok := m.ETDRS[k]; !ok {
				t.Errorf("seed %d: ETDRS subfield %s missing", seed, k)
			}
		}
		lesions, err := MarkLesions(ctx, den, layers)
		if err != nil {
			t.Fatal(err)
		}
		if len(lesions) != 0 {
			t.Errorf("seed %d: %d lesions in a healthy phantom: %+v", seed, len(lesions), lesions[0])
		}
	}
}

func TestMarkLesionsFindsThePhantomsFluid(t *testing.T) {
	ctx := context.Background()
	p := smallPhantom(4, true)
	den, err := Denoise(ctx, p.Volume, DenoiseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	layers, err := SegmentLayers(ctx, den)
	if err != nil {
		t.Fatal(err)
	}
	lesions, err := MarkLesions(ctx, den, layers)
	if err != nil {
		t.Fatal(err)
	}
	var truthVoxels int
	for _, in := range p.FluidMask {
		if in {
			truthVoxels++
		}
	}
	if len(lesions) != 1 || lesions[0].Type != IntraretinalFluid {
		t.Fatalf("lesions = %+v, want one intraretinal fluid region (%d voxels)", lesions, truthVoxels)
	}
	if ratio := float64(lesions[0].Voxels) / float64(truthVoxels); ratio < 0.6 || ratio > 1.4 {
		t.Errorf("fluid region has %d voxels, truth %d", lesions[0].Voxels, truthVoxels)
	}
}

func TestSubfieldFollowsETDRSGeometry(t *testing.T) {
	cases := []struct {
		x, y float64
		want string
	}{
		{0, 0, "C"}, {0.3, 0.3, "C"}, {0, 1, "IS"}, {1, 0, "IN"}, {0, -1, "II"}, {-1, 0, "IT"},
		{0, 2, "OS"}, {2, 0, "ON"}, {0, -2.9, "OI"}, {-2.9, 0, "OT"}, {3.1, 0, ""}, {2.2, 2.2, ""},
	}
	for _, c := range cases {
		if got := subfield(c.x, c.y, math.Hypot(c.x, c.y)); got != c.want {
			t.Errorf("subfield(%v, %v) = %q, want %q", c.x, c.y, got, c.want)
		}
	}
}

func psnr(v, clean *Volume) float64 {
	var mse, peak float64
	for i, x := range clean.Data {
		d := float64(v.Data[i] - x)
		mse += d * d
		peak = math.Max(peak, float64(x))
	}
	mse /= float64(len(clean.Data))
	return 10 * math.Log10(peak*peak/mse)
}

func meanAbsError(got []float32, want []float64) float64 {
	var s float64
	for i, w := range want {
		s += math.Abs(float64(got[i]) - w)
	}
	return s / float64(len(want))
}

func toF32(x []float64) []float32 {
	out := make([]float32, len(x))
	for i, v := range x {
		out[i] = float32(v)
	}
	return out
}

// failingReader serves some bytes, then fails as a dropped connection would.
type failingReader struct {
	data []byte
	err  error
}

func (f *failingReader) Read(p []byte) (int, error) {
	if len(f.data) == 0 {
		return 0, f.err
	}
	n := copy(p, f.data)
	f.data = f.data[n:]
	return n, nil
}

func TestReadDICOMReportsASourceFailureAsSuchNotAsABadVolume(t *testing.T) {
	p := smallPhantom(3, false)
	var buf bytes.Buffer
	if err := WriteDICOM(&buf, p.Volume, Header{SOPInstanceUID: "1.2"}); err != nil {
		t.Fatal(err)
	}
	_, _, err := ReadDICOM(&failingReader{data: buf.Bytes()[:buf.Len()/2], err: context.Canceled}, int64(buf.Len()))
	if !errors.Is(err, context.Canceled) || errors.Is(err, ErrInvalidVolume) {
		t.Fatalf("err = %v, want the source's error and not ErrInvalidVolume", err)
	}
}

func TestTruthListsThePhantomsFluidInTheReportSchema(t *testing.T) {
	ctx := context.Background()
	p := smallPhantom(6, true)
	truth, err := p.Truth(ctx, 6)
	if err != nil {
		t.Fatal(err)
	}
	if len(truth.Lesions) != 1 || truth.Lesions[0].Type != IntraretinalFluid || truth.Lesions[0].VolumeMm3 <= 0 {
		t.Fatalf("truth lesions = %+v, want the one intraretinal pocket", truth.Lesions)
	}
	c := truth.Measurements.CentralSubfieldThicknessUm
	if c < 150 || c > 300 || len(truth.Boundaries) != len(BoundaryNames) {
		t.Errorf("truth CST %.1f µm, %d boundaries", c, len(truth.Boundaries))
	}
	// The pipeline's fluid is close to the truth's.
	den, _ := Denoise(ctx, p.Volume, DenoiseOptions{})
	layers, _ := SegmentLayers(ctx, den)
	found, _ := MarkLesions(ctx, den, layers)
	if len(found) != 1 || math.Abs(found[0].VolumeMm3-truth.Lesions[0].VolumeMm3)/truth.Lesions[0].VolumeMm3 > 0.4 {
		t.Errorf("found %+v, truth volume %.4f mm³", found, truth.Lesions[0].VolumeMm3)
	}
}
