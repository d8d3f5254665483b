package results

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/suyashkumar/dicom"
	"github.com/suyashkumar/dicom/pkg/tag"

	"octflow/exam"
	"octflow/imaging"
	"octflow/octdicom"
	"octflow/octdicom/octdicomtest"
	"octflow/report"
)

// needTool is the path of a validator the tests run, or a skip where it
// is not installed (a failure under CI, which installs it).
func needTool(t *testing.T, name, pkg string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s missing: CI installs %s", name, pkg)
		}
		t.Skipf("%s not installed (apt-get install %s)", name, pkg)
	}
	return p
}

var testRef = exam.Ref{Campus: "north", ID: "ex-0123456789abcdef01234567"}

// cubeReport is a macular cube's report, every figure measured.
func cubeReport() *report.Report {
	return &report.Report{SchemaVersion: report.SchemaVersion, ExamID: testRef.ID, Campus: testRef.Campus, Eye: "OD",
		DeviceID: "oct-1", Priority: "normal", PatientRef: "pt-4f1c2b",
		SubmittedAt: time.Date(2026, 12, 2, 7, 55, 0, 0, time.UTC), GeneratedAt: time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC),
		ScanPattern: imaging.Cube, Measurable: true,
		Volume:  report.VolumeInfo{Frames: 49, Rows: 496, Cols: 512, Spacing: imaging.Spacing{AxialUm: 3.87, LateralUm: 11.7, FrameUm: 123}},
		Quality: imaging.Quality{Gradable: imaging.Gradable, SignalStrength: 8.2, Grade: "good", GradableFraction: 0.97},
		Figures: &imaging.Measurements{CentralSubfieldThicknessUm: 271.43, TotalVolumeMm3: 8.614, MeanThicknessUm: 301,
			ETDRS: map[string]float64{"C": 271.43, "IS": 338.1, "IN": 341.7, "II": 335.2, "IT": 322.9, "OS": 297.4, "ON": 312.8, "OI": 286.5, "OT": 280.2}},
		Lesions:        []imaging.Lesion{},
		Algorithms:     map[string]string{"denoise": "nlm-v2", "layers": "graph-v4", "lesions": "fluid-v3", "measure": "etdrs-v2"},
		AlgorithmOrder: []string{"denoise", "layers", "lesions", "measure"},
		Run:            "0190d9e4-run-1"}
}

// partialCube withholds a subfield and so the total volume.
func partialCube() *report.Report {
	r := cubeReport()
	r.Quality.Gradable = imaging.PartlyGradable
	r.Quality.Reasons = []string{"some figures withheld"}
	m := r.Figures.(*imaging.Measurements)
	delete(m.ETDRS, "OT")
	m.Unmeasured = []string{"OT"}
	m.TotalVolumeMm3 = 0
	r.Withheld = []imaging.Withheld{{Figure: imaging.FigureETDRS + "OT", Reason: "the ILM is reliable in 41% of subfield OT"},
		{Figure: imaging.FigureVolume, Reason: "subfield OT is not reported"}}
	return r
}

func ungradableCube() *report.Report {
	r := cubeReport()
	r.Quality.Gradable, r.Measurable, r.Figures = imaging.Ungradable, false, nil
	r.NotMeasurable = []string{"signal strength 1.2 of 10"}
	return r
}

func circleReport() *report.Report {
	r := cubeReport()
	r.ScanPattern = imaging.Circle
	r.Figures = &imaging.RNFLMeasurements{GlobalUm: 97.5, Sectors: map[string]float64{"T": 70, "TS": 130, "NS": 100, "N": 75, "NI": 110, "TI": 140},
		Convention: "Garway-Heath", CircumferenceMm: 10.8, DiameterMm: 3.45}
	return r
}

// renderPDF is a report's real PDF. The renderer stamps the time: an
// exam's PDF is rendered and stored once, and its objects made of those
// bytes.
func renderPDF(t *testing.T, rep *report.Report) []byte {
	t.Helper()
	pdf, err := report.PDF(rep, nil)
	if err != nil {
		t.Fatal(err)
	}
	return pdf
}

// results builds an exam's objects.
func build(t *testing.T, id octdicom.Identity, rep *report.Report, pdf []byte) []Object {
	t.Helper()
	objs, err := Build(id, rep, pdf, Software{Version: "v0.27.0"})
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

func parse(t *testing.T, o Object) dicom.Dataset {
	t.Helper()
	ds, err := dicom.Parse(bytes.NewReader(o.Part10), int64(len(o.Part10)), nil)
	if err != nil {
		t.Fatalf("%s: %v", o.Kind, err)
	}
	return ds
}

func value(t *testing.T, ds dicom.Dataset, tg tag.Tag) string {
	t.Helper()
	el, err := ds.FindElementByTag(tg)
	if err != nil {
		t.Fatalf("%v: %v", tg, err)
	}
	if v, ok := el.Value.GetValue().([]string); ok {
		return strings.Join(v, `\`)
	}
	return el.Value.String()
}

func TestResultsFileEachExamInItsSourceStudy(t *testing.T) {
	id := octdicomtest.Identity(testRef)
	cases := []struct {
		name  string
		rep   *report.Report
		kinds []string
	}{
		{"a measured cube", cubeReport(), []string{"pdf", "sr"}},
		{"a partly gradable cube", partialCube(), []string{"pdf", "sr"}},
		{"an ungradable cube", ungradableCube(), []string{"pdf"}},
		{"a circle scan", circleReport(), []string{"pdf"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pdf := renderPDF(t, c.rep)
			objs := build(t, id, c.rep, pdf)
			var kinds []string
			for _, o := range objs {
				kinds = append(kinds, o.Kind)
				ds := parse(t, o)
				for _, want := range []struct {
					t tag.Tag
					v string
				}{
					{tag.StudyInstanceUID, id.StudyInstanceUID}, {tag.PatientID, id.PatientID}, {tag.PatientName, id.PatientName},
					{tag.PatientBirthDate, id.PatientBirthDate}, {tag.AccessionNumber, id.AccessionNumber}, {tag.StudyID, id.StudyID},
					{tag.SOPInstanceUID, o.SOPInstanceUID}, {tag.SeriesInstanceUID, o.SeriesInstanceUID}, {tag.SOPClassUID, o.SOPClassUID},
					{tag.SpecificCharacterSet, "ISO_IR 192"},
				} {
					if got := value(t, ds, want.t); got != want.v {
						t.Errorf("%s %v = %q, want %q", o.Kind, want.t, got, want.v)
					}
				}
				if o.Kind == "sr" {
					// Enhanced General Equipment, Type 1 throughout (dciodvfy
					// checks the SR as an Enhanced SR, which lacks it).
					for _, tg := range []tag.Tag{tag.Manufacturer, tag.ManufacturerModelName, tag.DeviceSerialNumber, tag.SoftwareVersions} {
						if value(t, ds, tg) == "" {
							t.Errorf("sr: %v is empty", tg)
						}
					}
				}
				if o.SeriesInstanceUID == id.SeriesInstanceUID || o.SOPInstanceUID == id.SOPInstanceUID {
					t.Errorf("%s reuses the source's series or instance UID", o.Kind)
				}
				// Contributing Equipment: octflow, its version and the algorithms.
				ce, err := ds.FindElementByTag(tag.ContributingEquipmentSequence)
				if err != nil {
					t.Fatalf("%s: no Contributing Equipment Sequence", o.Kind)
				}
				for _, want := range []string{"octflow v0.27.0", "measure: etdrs-v2", "layers: graph-v4", "Processing Equipment"} {
					if !strings.Contains(ce.String(), want) {
						t.Errorf("%s: the Contributing Equipment Sequence does not name %q", o.Kind, want)
					}
				}
			}
			if !slices.Equal(kinds, c.kinds) {
				t.Errorf("objects %v, want %v", kinds, c.kinds)
			}
			// A retry makes the same objects, byte for byte; another run
			// of the pipeline makes new instances.
			again := build(t, id, c.rep, pdf)
			other := *c.rep
			other.Run = "another-run"
			rerun := build(t, id, &other, pdf)
			for i := range objs {
				if !bytes.Equal(objs[i].Part10, again[i].Part10) {
					t.Errorf("%s: a second call made other bytes", objs[i].Kind)
				}
				if rerun[i].SOPInstanceUID == objs[i].SOPInstanceUID || rerun[i].SeriesInstanceUID == objs[i].SeriesInstanceUID {
					t.Errorf("%s: another run made the same UIDs", objs[i].Kind)
				}
			}
			if objs[0].SeriesInstanceUID == objs[len(objs)-1].SeriesInstanceUID && len(objs) > 1 {
				t.Error("the PDF and the SR share a series")
			}
		})
	}
}

func TestTheEncapsulatedPDFCarriesTheReport(t *testing.T) {
	rep := cubeReport()
	pdf, err := report.PDF(rep, nil)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := Build(octdicomtest.Identity(testRef), rep, pdf, Software{Version: "v0.27.0"})
	if err != nil {
		t.Fatal(err)
	}
	ds := parse(t, objs[0])
	el, err := ds.FindElementByTag(tag.EncapsulatedDocument)
	if err != nil {
		t.Fatal(err)
	}
	doc := el.Value.GetValue().([]byte)
	if !bytes.Equal(doc[:len(pdf)], pdf) || len(doc) > len(pdf)+1 {
		t.Error("the encapsulated document is not the report PDF")
	}
	if got := value(t, ds, tag.MIMETypeOfEncapsulatedDocument); got != "application/pdf" {
		t.Errorf("MIME type %q", got)
	}
	if _, err := Build(octdicomtest.Identity(testRef), rep, []byte("not a pdf"), Software{}); err == nil {
		t.Error("made an Encapsulated PDF of something that is not a PDF")
	}
	other := octdicomtest.Identity(exam.Ref{Campus: "south", ID: testRef.ID})
	if _, err := Build(other, rep, pdf, Software{}); err == nil {
		t.Error("filed a report under another exam's identity")
	}
	nameless := octdicomtest.Identity(testRef)
	nameless.StudyInstanceUID = ""
	if _, err := Build(nameless, rep, pdf, Software{}); !errors.Is(err, octdicom.ErrNoIdentity) {
		t.Errorf("filed a report in no study: %v", err)
	}
}

// srItems flattens an SR's content tree into "concept=value" lines.
func srItems(t *testing.T, o Object) string {
	t.Helper()
	dump := needTool(t, "dsrdump", "dcmtk")
	f := filepath.Join(t.TempDir(), "sr.dcm")
	if err := os.WriteFile(f, o.Part10, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(dump, "+Pl", f).CombinedOutput()
	if err != nil {
		t.Fatalf("dsrdump: %v\n%s", err, out)
	}
	return string(out)
}

func TestTheMacularGridReportGivesTheReportsFigures(t *testing.T) {
	id := octdicomtest.Identity(testRef)
	t.Run("measured", func(t *testing.T) {
		rep := cubeReport()
		sr := build(t, id, rep, renderPDF(t, rep))[1]
		tree := srItems(t, sr)
		for _, want := range []string{
			`"Macular grid.center subfield thickness by OCT")="271.43" (um,UCUM,"micrometer")`,
			`"Macular grid.outer temporal subfield thickness by OCT")="280.2" (um,UCUM,"micrometer")`,
			`"Macular grid.total volume by OCT")="8.614" (uL,UCUM,"microliter")`,
			`"Average macular thickness")="301" (um,UCUM,"micrometer")`,
			`"Laterality")=(24028007,SCT,"Right")`,
			`"Image Set Quality Rating")="8.2" (1,UCUM,"no units")`,
			`Computed automatically by octflow, to be reviewed by a clinician.`,
		} {
			if !strings.Contains(tree, want) {
				t.Errorf("the SR does not hold %s:\n%s", want, tree)
			}
		}
		// Only the center point thickness, which octflow does not
		// measure, is without a value.
		if n := strings.Count(tree, "=empty"); n != 1 || !strings.Contains(tree, `center point thickness by OCT")=empty (114007,DCM,"Measurement not attempted")`) {
			t.Errorf("a measured cube's SR has %d figures without a value, want the center point's only:\n%s", n, tree)
		}
	})
	t.Run("of an eye nobody names", func(t *testing.T) {
		// TID 2120 requires the laterality, and octflow does not guess
		// it: the PDF alone is filed.
		rep, unnamed := cubeReport(), id
		rep.Eye, unnamed.Laterality = "", ""
		if objs := build(t, unnamed, rep, renderPDF(t, rep)); len(objs) != 1 || objs[0].SOPClassUID != EncapsulatedPDFSOPClass {
			t.Errorf("a cube of an unnamed eye gave %d objects, want the PDF alone", len(objs))
		}
		named := cubeReport()
		named.Eye = ""
		if objs := build(t, id, named, renderPDF(t, named)); len(objs) != 2 {
			t.Errorf("a cube whose scan names the eye gave %d objects, want the PDF and the SR", len(objs))
		}
	})
	t.Run("partly gradable", func(t *testing.T) {
		rep := partialCube()
		tree := srItems(t, build(t, id, rep, renderPDF(t, rep))[1])
		for _, want := range []string{
			`"Macular grid.outer temporal subfield thickness by OCT")=empty (114011,DCM,"Value indeterminate")`,
			`"Macular grid.total volume by OCT")=empty (114011,DCM,"Value indeterminate")`,
			`subfield OT not reported: the ILM is reliable in 41% of subfield OT`,
			`Quality gate: partial: some figures withheld.`,
			`"Macular grid.center subfield thickness by OCT")="271.43"`,
		} {
			if !strings.Contains(tree, want) {
				t.Errorf("the SR does not hold %s:\n%s", want, tree)
			}
		}
	})
}

// validate runs dciodvfy on an object and returns its errors and
// warnings. dicom3tools (2022) has no Macular Grid Thickness and Volume
// Report IOD: it answers "Information Object Not found" for its SOP
// class and checks nothing. Its modules are those of the Enhanced SR IOD
// plus Enhanced General Equipment (PS3.3 A.35.11), so the SR is also
// checked as an Enhanced SR: the same dataset under that SOP class.
func validate(t *testing.T, o Object) (errs, warns []string) {
	t.Helper()
	vfy := needTool(t, "dciodvfy", "dicom3tools")
	run := func(b []byte) {
		f := filepath.Join(t.TempDir(), "o.dcm")
		if err := os.WriteFile(f, b, 0o600); err != nil {
			t.Fatal(err)
		}
		out, _ := exec.Command(vfy, f).CombinedOutput()
		for _, line := range strings.Split(string(out), "\n") {
			switch {
			case strings.HasPrefix(line, "Error"):
				errs = append(errs, line)
			case strings.HasPrefix(line, "Warning"):
				warns = append(warns, line)
			}
		}
	}
	if o.SOPClassUID != MacularGridSOPClass {
		run(o.Part10)
		return errs, warns
	}
	// As sent: only the tool's own gap.
	run(o.Part10)
	if !slices.Equal(errs, []string{"Error - Information Object Not found"}) || len(warns) > 0 {
		t.Errorf("dciodvfy on the SR as sent: errors %q warnings %q; want only its missing IOD", errs, warns)
	}
	errs, warns = nil, nil
	run(withSOPClass(t, o.Part10, "1.2.840.10008.5.1.4.1.1.88.22"))
	return errs, warns
}

// withSOPClass is a DICOM file with its SOP Class UID replaced.
func withSOPClass(t *testing.T, b []byte, class string) []byte {
	t.Helper()
	ds, err := dicom.Parse(bytes.NewReader(b), int64(len(b)), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tg := range []tag.Tag{tag.SOPClassUID, tag.MediaStorageSOPClassUID} {
		el, err := ds.FindElementByTag(tg)
		if err != nil {
			t.Fatal(err)
		}
		if el.Value, err = dicom.NewValue([]string{class}); err != nil {
			t.Fatal(err)
		}
	}
	var out bytes.Buffer
	if err := dicom.Write(&out, ds); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// Every object passes dciodvfy without an error or a warning, and the
// SR dcmtk's check of its IOD's content constraints (dsrdump).
func TestEveryObjectPassesTheValidators(t *testing.T) {
	id := octdicomtest.Identity(testRef)
	for _, rep := range []*report.Report{cubeReport(), partialCube(), ungradableCube(), circleReport()} {
		for _, o := range build(t, id, rep, renderPDF(t, rep)) {
			errs, warns := validate(t, o)
			if len(errs) > 0 || len(warns) > 0 {
				t.Errorf("%s of a %s (%s): dciodvfy errors %q, warnings %q", o.Kind, rep.ScanPattern, rep.Quality.Gradable, errs, warns)
			}
			if o.Kind != "sr" {
				continue
			}
			dump := needTool(t, "dsrdump", "dcmtk")
			f := filepath.Join(t.TempDir(), "sr.dcm")
			if err := os.WriteFile(f, o.Part10, 0o600); err != nil {
				t.Fatal(err)
			}
			out, err := exec.Command(dump, f).CombinedOutput()
			if err != nil {
				t.Errorf("dsrdump: %v\n%s", err, out)
			}
			for _, line := range strings.Split(string(out), "\n") {
				// dcmtk checks no template, and its VR checker skips UTF-8.
				if strings.HasPrefix(line, "E:") || strings.HasPrefix(line, "F:") ||
					strings.HasPrefix(line, "W:") && !strings.Contains(line, "template constraints not yet supported") &&
						!strings.Contains(line, "does not support this Specific Character Set") {
					t.Errorf("dsrdump: %s", line)
				}
			}
		}
	}
}

// The objects declare UTF-8 exactly when some text they carry needs it.
func TestTheObjectsDeclareUTF8OnlyWhenTheyNeedIt(t *testing.T) {
	ascii := octdicomtest.Identity(testRef)
	ascii.PatientName = "Mueller^Juergen"
	orderInWords := octdicomtest.Identity(testRef)
	orderInWords.PatientName = ascii.PatientName
	orderInWords.Requests[0].RequestedProcedureDescription = "OCT Makula, Überweisung"
	withheldInWords := partialCube()
	withheldInWords.Withheld[0].Reason = "the ILM is reliable in 41 % of subfield OT (≥ 60 % needed)"
	cases := []struct {
		name string
		id   octdicom.Identity
		rep  *report.Report
		want string
	}{
		{"an ASCII identity and report", ascii, partialCube(), ""},
		{"a patient name in UTF-8", octdicomtest.Identity(testRef), partialCube(), "ISO_IR 192"},
		{"a reason in UTF-8", ascii, withheldInWords, "ISO_IR 192"},
		{"an order's description in UTF-8", orderInWords, partialCube(), "ISO_IR 192"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, o := range build(t, c.id, c.rep, renderPDF(t, c.rep)) {
				ds := parse(t, o)
				got := ""
				if el, err := ds.FindElementByTag(tag.SpecificCharacterSet); err == nil {
					got = strings.Join(el.Value.GetValue().([]string), `\`)
				}
				if got != c.want {
					t.Errorf("%s: Specific Character Set %q, want %q", o.Kind, got, c.want)
				}
			}
		})
	}
}

func TestBuildSoftwareNamesAVersion(t *testing.T) {
	if v := BuildSoftware().Version; v == "" || strings.ContainsAny(v, `\`) {
		t.Errorf("version %q", v)
	}
}
