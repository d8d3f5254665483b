package octdicom

import (
	"bytes"
	"os"
	"reflect"
	"testing"

	"octflow/imaging"
)

// A real scan's geometry is read from its functional groups, and the
// de-identified copy octflow stores says the same: the export draws the
// segmentation over the stored copy's frames.
func TestReadGeometryOfARealScanAndItsDeidentifiedCopy(t *testing.T) {
	b, err := os.ReadFile(realData + "/spectralis-line-0.dcm")
	if err != nil {
		t.Fatal(err)
	}
	want := Geometry{Rows: 496, Cols: 768, Frames: []FrameGeometry{{
		Position: []string{"0.0", "4.539101", "0.0"}, Orientation: []string{"1.0", "0.0", "0.0", "0.0", "0.0", "1.0"},
		PixelSpacing: []string{"0.0038716698", "0.0118205771"}, SliceThickness: "0.0118205771"}}}
	g, err := ReadGeometry(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(g, want) || !g.Complete() {
		t.Errorf("geometry of the original\n got %+v\nwant %+v (complete)", g, want)
	}
	scan, err := ParseScan(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	var copy bytes.Buffer
	if err := scan.WriteDeidentified(&copy, Deidentification{PatientID: "pt-1", UID: func(string) string { return "2.25.42" }}); err != nil {
		t.Fatal(err)
	}
	g, err = ReadGeometry(bytes.NewReader(copy.Bytes()), int64(copy.Len()))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(g, want) {
		t.Errorf("geometry of the de-identified copy\n got %+v\nwant %+v", g, want)
	}
}

func TestReadGeometry(t *testing.T) {
	p := imaging.NewPhantom(imaging.PhantomOptions{Seed: 1, Frames: 3, Rows: 64, Cols: 16})
	var phantom bytes.Buffer
	if err := WriteDICOM(&phantom, p.Volume, Header{SOPInstanceUID: "1.2.3.1", StudyInstanceUID: "1.2.3", SeriesInstanceUID: "1.2.3.4"}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name     string
		b        []byte
		frames   int
		complete bool
		fails    bool
	}{
		// octflow's own phantom writer gives pixel spacing but no plane:
		// nothing can be drawn over it in a frame of reference.
		{"a phantom without planes", phantom.Bytes(), 3, false, false},
		{"not DICOM", []byte("not a DICOM object at all, only text"), 0, false, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			g, err := ReadGeometry(bytes.NewReader(c.b), int64(len(c.b)))
			if (err != nil) != c.fails {
				t.Fatalf("error %v, want failure %v", err, c.fails)
			}
			if len(g.Frames) != c.frames || g.Complete() != c.complete {
				t.Errorf("%d frames, complete %v; want %d, %v", len(g.Frames), g.Complete(), c.frames, c.complete)
			}
		})
	}
}
