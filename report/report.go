// Package report renders an exam's report: the structured JSON that a
// workstation or a registry reads, and the PDF a clinician prints. It
// formats results; it computes nothing.
package report

import (
	"bytes"
	"fmt"
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
	// Algorithms names the version of each stage that produced the result.
	Algorithms map[string]string `json:"algorithms"`
}

// VolumeInfo describes the scan that was analysed.
type VolumeInfo struct {
	Frames  int             `json:"frames"`
	Rows    int             `json:"rows"`
	Cols    int             `json:"cols"`
	Spacing imaging.Spacing `json:"spacing"`
}

// Headline returns m without its per-A-scan thickness map, which stays in
// measurements.json: the report carries the grid, the volume and the
// fovea, in the same schema as a phantom's truth.
func Headline(m *imaging.Measurements) imaging.Measurements {
	h := *m
	h.ThicknessMapUm = nil
	return h
}

// PDF renders the printable report.
func PDF(r *Report) ([]byte, error) {
	pdf := fpdf.New("P", "mm", "A4", "")
	pdf.SetTitle("OCT report "+r.ExamID, true)
	pdf.SetCreator("octflow", true)
	pdf.AddPage()
	tr := pdf.UnicodeTranslatorFromDescriptor("")

	pdf.SetFont("Helvetica", "B", 16)
	pdf.CellFormat(0, 10, "Macular OCT report", "", 1, "L", false, 0, "")
	pdf.SetFont("Helvetica", "", 10)
	pdf.CellFormat(0, 5, tr("For clinical review. Values are computed automatically and must be checked by a clinician."), "", 1, "L", false, 0, "")
	pdf.Ln(3)

	section(pdf, "Exam")
	for _, kv := range [][2]string{
		{"Exam ID", r.ExamID},
		{"Patient reference (pseudonymised)", orDash(r.PatientRef)},
		{"Device / campus", r.DeviceID + " / " + r.Campus},
		{"Eye", eyeName(r.Eye)},
		{"Priority", r.Priority},
		{"Submitted", r.SubmittedAt.UTC().Format(time.RFC3339)},
		{"Report generated", r.GeneratedAt.UTC().Format(time.RFC3339)},
		{"Volume", tr(fmt.Sprintf("%d B-scans × %d × %d, %.2f × %.2f × %.1f µm",
			r.Volume.Frames, r.Volume.Rows, r.Volume.Cols,
			r.Volume.Spacing.AxialUm, r.Volume.Spacing.LateralUm, r.Volume.Spacing.FrameUm))},
	} {
		row(pdf, kv[0], kv[1])
	}

	section(pdf, "Retinal thickness (ILM to BM)")
	row(pdf, "Central subfield thickness", tr(fmt.Sprintf("%.0f µm", r.Measurements.CentralSubfieldThicknessUm)))
	row(pdf, "Total macular volume (6 mm)", tr(fmt.Sprintf("%.2f mm³", r.Measurements.TotalVolumeMm3)))
	row(pdf, "Mean / min / max", tr(fmt.Sprintf("%.0f / %.0f / %.0f µm", r.Measurements.MeanThicknessUm,
		r.Measurements.MinThicknessUm, r.Measurements.MaxThicknessUm)))
	pdf.Ln(2)
	pdf.SetFont("Helvetica", "B", 9)
	for _, k := range imaging.ETDRSSubfields {
		pdf.CellFormat(20, 6, k, "1", 0, "C", false, 0, "")
	}
	pdf.Ln(-1)
	pdf.SetFont("Helvetica", "", 9)
	for _, k := range imaging.ETDRSSubfields {
		pdf.CellFormat(20, 6, fmt.Sprintf("%.0f", r.Measurements.ETDRS[k]), "1", 0, "C", false, 0, "")
	}
	pdf.Ln(-1)
	pdf.CellFormat(0, 5, tr("ETDRS subfields in µm: C centre (1 mm); I inner ring (1-3 mm), O outer ring (3-6 mm); S superior, N nasal, I inferior, T temporal."), "", 1, "L", false, 0, "")

	section(pdf, "Lesions")
	if len(r.Lesions) == 0 {
		pdf.CellFormat(0, 6, "No fluid or drusen detected.", "", 1, "L", false, 0, "")
	} else {
		pdf.SetFont("Helvetica", "B", 9)
		for _, h := range []string{"Type", "B-scan", "x (mm)", "y (mm)", "Area (mm2)", "Volume (mm3)"} {
			pdf.CellFormat(30, 6, h, "1", 0, "C", false, 0, "")
		}
		pdf.Ln(-1)
		pdf.SetFont("Helvetica", "", 9)
		for _, l := range r.Lesions {
			for _, v := range []string{l.Type, fmt.Sprint(l.Frame), fmt.Sprintf("%.2f", l.XMm), fmt.Sprintf("%.2f", l.YMm),
				fmt.Sprintf("%.3f", l.AreaMm2), fmt.Sprintf("%.4f", l.VolumeMm3)} {
				pdf.CellFormat(30, 6, v, "1", 0, "C", false, 0, "")
			}
			pdf.Ln(-1)
		}
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
