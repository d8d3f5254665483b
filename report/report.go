// Package report renders an exam's report: the structured JSON that a
// workstation or a registry reads, and the PDF a clinician prints. It
// formats results; it computes nothing.
package report

import (
	"bytes"
	"fmt"
	"math"
	"sort"
	"time"

	"codeberg.org/go-pdf/fpdf"

	"octflow/imaging"
)

// SchemaVersion names the JSON layout below; bump it on any incompatible
// change.
const SchemaVersion = "octflow.report/v1"

// Report is the structured result of one exam. Measurements and lesions
// use the same schema as a phantom's truth.json.
type Report struct {
	SchemaVersion string               `json:"schemaVersion"`
	ExamID        string               `json:"examId"`
	PatientRef    string               `json:"patientRef,omitempty"` // keyed pseudonym, never the patient ID
	DeviceID      string               `json:"deviceId"`
	Campus        string               `json:"campus"`
	Eye           string               `json:"eye"`
	Priority      string               `json:"priority"`
	SubmittedAt   time.Time            `json:"submittedAt"`
	GeneratedAt   time.Time            `json:"generatedAt"`
	Volume        VolumeInfo           `json:"volume"`
	Measurements  imaging.Measurements `json:"measurements"`
	Lesions       []imaging.Lesion     `json:"lesions"`
	// Quality grades the scan by its signal-to-noise ratio.
	Quality Quality `json:"quality"`
	// Algorithms names the version of each stage that produced the result.
	Algorithms map[string]string `json:"algorithms"`
	// Run is the pipeline run that wrote the report: a report is never
	// overwritten by another run.
	Run string `json:"run,omitempty"`
}

// VolumeInfo describes the scan that was analysed.
type VolumeInfo struct {
	Frames  int             `json:"frames"`
	Rows    int             `json:"rows"`
	Cols    int             `json:"cols"`
	Spacing imaging.Spacing `json:"spacing"`
}

// Headline returns m without its per-A-scan thickness maps, which stay in
// measurements.json: the report carries the grid, the volume and the
// fovea, in the same schema as a phantom's truth.
func Headline(m *imaging.Measurements) imaging.Measurements {
	h := *m
	h.ThicknessMapUm = nil
	h.Layers = nil
	for _, l := range m.Layers {
		l.MapUm = nil
		h.Layers = append(h.Layers, l)
	}
	return h
}

// PDF renders the printable report: exam data and scan quality, the
// ETDRS grid with its values, the colour thickness map with the grid and
// its scale, the layer thickness table, then the central B-scan with the boundaries and lesion
// outlines, the lesion table and the algorithm versions.
func PDF(r *Report, f *Figures) ([]byte, error) {
	pdf := fpdf.New("P", "mm", "A4", "")
	pdf.SetTitle("OCT report "+r.ExamID, true)
	pdf.SetCreator("octflow", true)
	pdf.SetAutoPageBreak(true, 15)
	tr := pdf.UnicodeTranslatorFromDescriptor("")
	pdf.SetFooterFunc(func() {
		pdf.SetY(-12)
		pdf.SetFont("Helvetica", "", 8)
		pdf.SetTextColor(110, 110, 110)
		pdf.CellFormat(0, 5, tr(fmt.Sprintf("Exam %s · %s · page %d · computed automatically, to be reviewed by a clinician",
			r.ExamID, r.GeneratedAt.UTC().Format(time.RFC3339), pdf.PageNo())), "", 0, "C", false, 0, "")
		pdf.SetTextColor(0, 0, 0)
	})
	pdf.AddPage()

	pdf.SetFont("Helvetica", "B", 16)
	pdf.CellFormat(0, 9, "Macular OCT report", "", 1, "L", false, 0, "")
	section(pdf, "Exam")
	quality := "not assessed"
	if r.Quality.Grade != "" {
		quality = tr(fmt.Sprintf("%s (signal-to-noise %.1f dB)", r.Quality.Grade, r.Quality.SNRdB))
	}
	for _, kv := range [][2]string{
		{"Exam ID", r.ExamID},
		{"Patient reference (pseudonymised)", orDash(r.PatientRef)},
		{"Device / campus", r.DeviceID + " / " + r.Campus},
		{"Eye", eyeName(r.Eye)},
		{"Priority", r.Priority},
		{"Submitted / report", r.SubmittedAt.UTC().Format(time.RFC3339) + " / " + r.GeneratedAt.UTC().Format(time.RFC3339)},
		{"Volume", tr(fmt.Sprintf("%d B-scans × %d × %d, %.2f × %.2f × %.1f µm",
			r.Volume.Frames, r.Volume.Rows, r.Volume.Cols,
			r.Volume.Spacing.AxialUm, r.Volume.Spacing.LateralUm, r.Volume.Spacing.FrameUm))},
		{"Scan quality", quality},
	} {
		row(pdf, kv[0], kv[1])
	}

	section(pdf, "Retinal thickness, ILM to Bruch's membrane")
	m := r.Measurements
	row(pdf, "Central subfield thickness (CST)", tr(fmt.Sprintf("%.0f µm", m.CentralSubfieldThicknessUm)))
	row(pdf, "Total macular volume (6 mm)", tr(fmt.Sprintf("%.2f mm³", m.TotalVolumeMm3)))
	row(pdf, "Mean / min / max", tr(fmt.Sprintf("%.0f / %.0f / %.0f µm", m.MeanThicknessUm, m.MinThicknessUm, m.MaxThicknessUm)))
	top := pdf.GetY() + 4
	etdrsGrid(pdf, tr, 50, top+38, 34, m.ETDRS, r.Eye)
	if f != nil {
		if err := thicknessMap(pdf, tr, f, 110, top, 76, r.Eye); err != nil {
			return nil, err
		}
	}
	pdf.SetY(top + 84)
	pdf.SetFont("Helvetica", "", 8)
	pdf.MultiCell(0, 4, tr("ETDRS subfields in µm on circles of 1, 3 and 6 mm centred on the fovea: C centre; inner (I) and outer (O) rings, "+
		"superior (S), nasal (N), inferior (I), temporal (T). The map shows the same grid over the retinal thickness."), "", "L", false)
	if len(m.Layers) > 0 {
		section(pdf, "Layer thickness")
		var rows [][]string
		for _, l := range m.Layers {
			rows = append(rows, []string{l.Name, l.Top + " to " + l.Bottom, fmt.Sprintf("%.1f", l.MeanUm), fmt.Sprintf("%.1f", l.ETDRS["C"])})
		}
		table(pdf, 45, []string{"Layer", "Boundaries", "Mean, 6 mm (um)", "Centre (um)"}, rows)
	}

	pdf.AddPage()
	section(pdf, "Central B-scan through the fovea")
	if f != nil {
		png, err := bscanPNG(f)
		if err != nil {
			return nil, err
		}
		pdf.RegisterImageOptionsReader("bscan", fpdf.ImageOptions{ImageType: "PNG"}, bytes.NewReader(png))
		w := 180.0
		h := w * float64(f.Rows) * f.Spacing.AxialUm / (float64(f.Cols) * f.Spacing.LateralUm) * 3 // depth stretched 3×, as OCT viewers do
		y := pdf.GetY() + 1
		pdf.ImageOptions("bscan", 15, y, w, h, false, fpdf.ImageOptions{ImageType: "PNG"}, 0, "")
		pdf.SetY(y + h + 2)
		pdf.SetFont("Helvetica", "", 8)
		pdf.MultiCell(0, 4, tr(fmt.Sprintf("B-scan %d of %d, depth stretched 3×. Lines, top to bottom: ILM red, RNFL/GCL orange, IPL/INL magenta, INL/OPL blue, OPL/ONL violet, EZ white, RPE yellow, BM green. "+
			"Cyan boxes outline lesions on this B-scan.", f.FoveaFrame+1, f.Frames)), "", "L", false)
	}

	section(pdf, "Lesions")
	if len(r.Lesions) == 0 {
		pdf.CellFormat(0, 6, "No fluid or drusen detected.", "", 1, "L", false, 0, "")
	} else {
		var rows [][]string
		for _, l := range r.Lesions {
			rows = append(rows, []string{l.Type, fmt.Sprint(l.Frame + 1), fmt.Sprintf("%.2f", l.XMm), fmt.Sprintf("%.2f", l.YMm),
				fmt.Sprintf("%.3f", l.AreaMm2), fmt.Sprintf("%.4f", l.VolumeMm3)})
		}
		table(pdf, 30, []string{"Type", "B-scan", "x (mm)", "y (mm)", "Area (mm2)", "Volume (mm3)"}, rows)
	}

	section(pdf, "Algorithms")
	stages := make([]string, 0, len(r.Algorithms))
	for s := range r.Algorithms {
		stages = append(stages, s)
	}
	sort.Strings(stages)
	for _, s := range stages {
		row(pdf, s, r.Algorithms[s])
	}

	var buf bytes.Buffer
	if err := pdf.Output(&buf); err != nil {
		return nil, fmt.Errorf("render pdf: %w", err)
	}
	return buf.Bytes(), nil
}

// etdrsGrid draws the ETDRS circles (1, 3, 6 mm) centred at (cx, cy) with
// outer radius rad (mm on paper) and writes each subfield's value in it.
// Nasal is drawn towards the nose: right for OD, left for OS, as on a
// fundus photograph.
func etdrsGrid(pdf *fpdf.Fpdf, tr func(string) string, cx, cy, rad float64, values map[string]float64, eye string) {
	pdf.SetDrawColor(40, 40, 40)
	pdf.SetLineWidth(0.3)
	for _, k := range []float64{1, 3, 6} {
		pdf.Circle(cx, cy, rad*k/6, "D")
	}
	for _, a := range []float64{45, 135, 225, 315} {
		s, c := math.Sin(a*math.Pi/180), math.Cos(a*math.Pi/180)
		pdf.Line(cx+c*rad/6, cy+s*rad/6, cx+c*rad, cy+s*rad)
	}
	nasal := 1.0
	if eye == "OS" {
		nasal = -1
	}
	put := func(key string, dx, dy float64) {
		txt := "-"
		if v, ok := values[key]; ok {
			txt = fmt.Sprintf("%.0f", v)
		}
		pdf.SetFont("Helvetica", "B", 8)
		pdf.SetXY(cx+dx-7, cy+dy-2)
		pdf.CellFormat(14, 4, txt, "", 0, "C", false, 0, "")
	}
	put("C", 0, 0)
	ri, ro := rad*2/6, rad*4.5/6
	put("IS", 0, -ri)
	put("II", 0, ri)
	put("IN", nasal*ri, 0)
	put("IT", -nasal*ri, 0)
	put("OS", 0, -ro)
	put("OI", 0, ro)
	put("ON", nasal*ro, 0)
	put("OT", -nasal*ro, 0)
	pdf.SetFont("Helvetica", "", 7)
	for _, l := range []struct {
		txt    string
		dx, dy float64
	}{{"S", 0, -rad - 3}, {"I", 0, rad + 3}, {"N", nasal * (rad + 3), 0}, {"T", -nasal * (rad + 3), 0}} {
		pdf.SetXY(cx+l.dx-3, cy+l.dy-2)
		pdf.CellFormat(6, 4, l.txt, "", 0, "C", false, 0, "")
	}
	pdf.SetFont("Helvetica", "", 8)
	pdf.SetXY(cx-rad, cy+rad+5)
	pdf.CellFormat(2*rad, 4, tr("ETDRS grid, µm"), "", 0, "C", false, 0, "")
}

// thicknessMap draws the colour thickness map at (x, y), side w mm, with
// the ETDRS circles over the fovea and the colour scale beside it.
func thicknessMap(pdf *fpdf.Fpdf, tr func(string) string, f *Figures, x, y, w float64, eye string) error {
	png, err := thicknessPNG(f)
	if err != nil {
		return err
	}
	pdf.RegisterImageOptionsReader("thickness", fpdf.ImageOptions{ImageType: "PNG"}, bytes.NewReader(png))
	widthMm := float64(f.Cols) * f.Spacing.LateralUm / 1000
	heightMm := float64(f.Frames) * f.Spacing.FrameUm / 1000
	h := w * heightMm / widthMm
	pdf.ImageOptions("thickness", x, y, w, h, false, fpdf.ImageOptions{ImageType: "PNG"}, 0, "")
	// Grid over the fovea, at the map's scale.
	scale := w / widthMm
	fx := x + (float64(f.FoveaCol)+0.5)*f.Spacing.LateralUm/1000*scale
	fy := y + (float64(f.FoveaFrame)+0.5)*f.Spacing.FrameUm/1000*scale
	pdf.SetDrawColor(255, 255, 255)
	pdf.SetLineWidth(0.3)
	for _, d := range []float64{1, 3, 6} {
		pdf.Circle(fx, fy, d/2*scale, "D")
	}
	// Colour scale.
	steps := 30
	for i := range steps {
		c := thicknessColour(mapMaxUm - float64(i)*(mapMaxUm-mapMinUm)/float64(steps-1))
		pdf.SetFillColor(int(c.R), int(c.G), int(c.B))
		pdf.Rect(x+w+3, y+float64(i)*h/float64(steps), 4, h/float64(steps)+0.1, "F")
	}
	pdf.SetFont("Helvetica", "", 7)
	for _, v := range []float64{mapMaxUm, (mapMaxUm + mapMinUm) / 2, mapMinUm} {
		pdf.SetXY(x+w+8, y+(mapMaxUm-v)/(mapMaxUm-mapMinUm)*h-2)
		pdf.CellFormat(14, 4, tr(fmt.Sprintf("%.0f µm", v)), "", 0, "L", false, 0, "")
	}
	pdf.SetXY(x, y+h+1)
	pdf.SetFont("Helvetica", "", 8)
	pdf.CellFormat(w, 4, tr(fmt.Sprintf("Thickness map, %.0f × %.0f mm, superior up, %s", widthMm, heightMm,
		map[string]string{"OD": "nasal right", "OS": "nasal left"}[eye])), "", 0, "C", false, 0, "")
	pdf.SetDrawColor(0, 0, 0)
	return nil
}

// table draws a header row and rows of equal-width cells.
func table(pdf *fpdf.Fpdf, width float64, header []string, rows [][]string) {
	pdf.SetFont("Helvetica", "B", 9)
	for _, h := range header {
		pdf.CellFormat(width, 6, h, "1", 0, "C", false, 0, "")
	}
	pdf.Ln(-1)
	pdf.SetFont("Helvetica", "", 9)
	for _, row := range rows {
		for _, v := range row {
			pdf.CellFormat(width, 6, v, "1", 0, "C", false, 0, "")
		}
		pdf.Ln(-1)
	}
}

func section(pdf *fpdf.Fpdf, title string) {
	pdf.Ln(3)
	pdf.SetFont("Helvetica", "B", 12)
	pdf.CellFormat(0, 8, title, "B", 1, "L", false, 0, "")
	pdf.SetFont("Helvetica", "", 10)
}

func row(pdf *fpdf.Fpdf, k, v string) {
	pdf.SetFont("Helvetica", "", 10)
	pdf.CellFormat(70, 6, k, "", 0, "L", false, 0, "")
	pdf.SetFont("Helvetica", "B", 10)
	pdf.CellFormat(0, 6, v, "", 1, "L", false, 0, "")
}

func eyeName(e string) string {
	switch e {
	case "OD":
		return "right (OD)"
	case "OS":
		return "left (OS)"
	}
	return "not recorded"
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
