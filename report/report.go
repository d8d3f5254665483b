// Package report renders an exam's report: the structured JSON that a
// workstation or a registry reads, and the PDF a clinician prints. It
// formats results; it computes nothing.
package report

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"image/png"
	"math"
	"slices"
	"strings"
	"time"

	"codeberg.org/go-pdf/fpdf"

	"octflow/imaging"
)

// SchemaVersion names the JSON layout below; bump it on any incompatible
// change.
// v2 added the scan pattern, the quality gate, line and RNFL results,
// and made every figure absent (never zero) when it was not measured.
const SchemaVersion = "octflow.report/v2"

// Report is the structured result of one exam. Measurements and lesions
// use the same schema as a phantom's truth.json.
type Report struct {
	SchemaVersion string    `json:"schemaVersion"`
	ExamID        string    `json:"examId"`
	PatientRef    string    `json:"patientRef,omitempty"` // keyed pseudonym, never the patient ID
	DeviceID      string    `json:"deviceId"`
	Campus        string    `json:"campus"`
	Eye           string    `json:"eye"`
	Priority      string    `json:"priority"`
	SubmittedAt   time.Time `json:"submittedAt"`
	GeneratedAt   time.Time `json:"generatedAt"`
	// ScanPattern is cube, line, circle or radial.
	ScanPattern imaging.Pattern `json:"scanPattern"`
	Volume      VolumeInfo      `json:"volume"`
	// Intensity is how the device had encoded reflectivity.
	Intensity *imaging.Intensity `json:"intensity,omitempty"`
	// Quality is the quality gate's verdict: gradable full, partial or
	// ungradable, with its reasons.
	Quality imaging.Quality `json:"quality"`
	// Measurable is false when the analysis could measure nothing;
	// NotMeasurable says why, and no figure is reported.
	Measurable    bool     `json:"measurable"`
	NotMeasurable []string `json:"notMeasurable,omitempty"`
	// Figures are the scan pattern's measurements, nil when nothing was
	// measured. In JSON they go under their scan type's report key
	// (measurements for a cube's, line for a line scan's, rnfl for a
	// circle scan's; see imaging.ScanType): at most one is present.
	Figures imaging.Figures  `json:"-"`
	Lesions []imaging.Lesion `json:"lesions"`
	// LesionsWithheld, when set, is why no lesion is reported although
	// the scan was measured: the boundaries fluid and drusen are found
	// between are not reliable. Lesions is then empty, and says nothing
	// of their absence.
	LesionsWithheld string `json:"lesionsWithheld,omitempty"`
	// LesionsUngraded counts the regions the lesion search found on
	// A-scans the quality gate could not grade: not reported (nothing
	// vouches for them), and the reason the report does not say there
	// is no lesion.
	LesionsUngraded int `json:"lesionsUngraded,omitempty"`
	// LesionFinding is what the lesion search concludes, in one
	// statement: the PDF writes it word for word, the SR carries it, and
	// it agrees with Lesions, LesionsWithheld and LesionsUngraded (see
	// lesionFinding). "No fluid or drusen detected." is written only
	// when the whole scan was graded, searched and nothing was found.
	// Empty when nothing was measured (NotMeasurable says why).
	LesionFinding string `json:"lesionFinding,omitempty"`
	// Withheld lists the figures the analysis does not vouch for, each
	// with its reason (a boundary it needs is not reliable where it is
	// measured); Boundaries how reliable each boundary is over the
	// graded A-scans. The figures present are the ones it vouches for.
	Withheld   []imaging.Withheld            `json:"withheld,omitempty"`
	Boundaries []imaging.BoundaryReliability `json:"boundaries,omitempty"`
	// Algorithms names the version of each stage that produced the result.
	Algorithms map[string]string `json:"algorithms"`
	// AlgorithmOrder lists the stages of Algorithms in the order the
	// pipeline runs them (AlgorithmStages reads them in that order).
	// Absent from a report written before it was recorded.
	AlgorithmOrder []string `json:"algorithmOrder,omitempty"`
	// Run is the pipeline run that wrote the report: a report is never
	// overwritten by another run, but by an admin's superseding rerun.
	Run string `json:"run,omitempty"`
	// Supersedes names the report this one replaced, on an admin's
	// superseding rerun (nil: it replaced none). The PDF says so under
	// its title.
	Supersedes *Supersedes `json:"supersedes,omitempty"`
}

// Supersedes is the report a superseding run's report replaced: its run,
// when it was made, and the admin's reason.
type Supersedes struct {
	Run         string    `json:"run"`
	GeneratedAt time.Time `json:"generatedAt"`
	Reason      string    `json:"reason"`
}

// Line is what the PDF prints of the replaced report, one short line.
func (s *Supersedes) Line() string {
	return "Replaces the report of " + s.GeneratedAt.UTC().Format(time.RFC3339) + ": " + s.Reason
}

// AlgorithmStages are the stages Algorithms names, each once: in the
// pipeline's order (AlgorithmOrder), then any it does not order (every
// one, for a report that recorded no order) by name.
func (r *Report) AlgorithmStages() []string {
	out := make([]string, 0, len(r.Algorithms))
	for _, s := range r.AlgorithmOrder {
		if _, ok := r.Algorithms[s]; ok && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	ordered := len(out)
	for s := range r.Algorithms {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	slices.Sort(out[ordered:])
	return out
}

// FromAnalysis fills the report's pattern, quality and measurements from
// the measure stage's analysis, with the figures it withheld, and keeps
// only the lesions on gradable A-scans (none when nothing could be
// measured, or when the analysis withholds them: LesionsWithheld says
// why).
func (r *Report) FromAnalysis(a *imaging.Analysis, lesions []imaging.Lesion, cols int) {
	r.ScanPattern, r.Quality, r.Measurable, r.NotMeasurable = a.Pattern, a.Quality, a.Measurable(), a.NotMeasurable
	r.Figures = a.Figures
	if m, ok := a.Figures.(*imaging.Measurements); ok {
		h := Headline(m) // a cube's per-A-scan maps stay in measurements.json
		r.Figures = &h
	}
	r.Withheld, r.Boundaries = a.Withheld, a.Boundaries
	r.Lesions = []imaging.Lesion{}
	defer func() { r.LesionFinding = lesionFinding(r) }()
	if !r.Measurable {
		return
	}
	if why := a.LesionsWithheld(); why != "" {
		r.LesionsWithheld = why
		return
	}
	for _, l := range lesions {
		switch i := l.Frame*cols + l.Col; {
		case a.LesionKindWithheld(l.Type) != "":
			// Its kind is withheld (listed in Withheld): not reported.
		case a.Quality.Mask == nil || i >= 0 && i < len(a.Quality.Mask) && a.Quality.Mask[i]:
			r.Lesions = append(r.Lesions, l)
		default:
			r.LesionsUngraded++
		}
	}
}

// Outlines are the boxes of the report's lesions on B-scan frame: what
// the report's B-scan panel outlines, so that its drawing and its text
// name the same lesions.
func (r *Report) Outlines(frame int) []imaging.Box {
	var out []imaging.Box
	for _, l := range r.Lesions {
		for _, b := range l.Boxes {
			if b.Frame == frame {
				out = append(out, b)
			}
		}
	}
	return out
}

// Finding is the report's lesion finding (LesionFinding), stated from
// its lesions when a report made before it was recorded lacks it.
func (r *Report) Finding() string { return cmp.Or(r.LesionFinding, lesionFinding(r)) }

// NoLesionFound is the lesion finding of a scan graded in full on which
// the search found nothing: the only case a report says so unqualified.
const NoLesionFound = "No fluid or drusen detected."

// fullyGraded is the graded share from which a scan counts as searched
// whole (the gate's own rounding aside).
const fullyGraded = 0.995

// lesionFinding states what the lesion search found, from the report's
// lesions, what it withholds (all lesions, or one kind: Withheld's
// lesions:fluid or lesions:drusen), its ungraded regions and quality: a
// negative finding is qualified by the share of the scan and the kinds
// it covers, and never given unqualified while a kind is withheld or
// regions found where the scan is not graded are left out.
func lesionFinding(r *Report) string {
	const review = " Review the B-scans for fluid and drusen."
	switch {
	case !r.Measurable:
		return ""
	case r.LesionsWithheld != "":
		return "Not reported: " + r.LesionsWithheld + "." + review
	}
	var notes []string
	none := "None found"
	var fluid, drusen string // why a kind is withheld
	for _, w := range r.Withheld {
		switch w.Figure {
		case imaging.FigureFluid:
			fluid = w.Reason
			notes, none = append(notes, "Fluid not reported: "+w.Reason+"."), "No drusen found"
		case imaging.FigureDrusen:
			drusen = w.Reason
			notes, none = append(notes, "Drusen not reported: "+w.Reason+"."), "No fluid found"
		}
	}
	if fluid != "" && drusen != "" { // both kinds: nothing is reported
		return "Not reported: " + fluid + "; " + drusen + "." + review
	}
	if r.LesionsUngraded > 0 {
		notes = append(notes, fmt.Sprintf("%d more %s found where the scan could not be graded %s not reported: nothing vouches for %s.",
			r.LesionsUngraded, plural(r.LesionsUngraded, "region", "regions"), plural(r.LesionsUngraded, "is", "are"), plural(r.LesionsUngraded, "it", "them")))
	}
	partial := r.Quality.GradableFraction < fullyGraded
	var s string
	switch {
	case len(r.Lesions) > 0:
		counts := map[string]int{}
		var types []string
		for _, l := range r.Lesions {
			if counts[l.Type] == 0 {
				types = append(types, l.Type)
			}
			counts[l.Type]++
		}
		parts := make([]string, len(types))
		for i, t := range types {
			parts[i] = fmt.Sprintf("%d %s", counts[t], strings.ReplaceAll(t, "_", " "))
		}
		s = "Found: " + strings.Join(parts, ", ") + " (outlined in cyan on the B-scan shown, where they cross it)."
	case len(notes) == 0 && !partial:
		return NoLesionFound
	case partial:
		s = fmt.Sprintf("%s on the graded %.0f%% of the A-scans; the rest could not be graded.", none, math.Floor(100*r.Quality.GradableFraction))
	default:
		s = none + "."
	}
	if len(notes) > 0 {
		s += " " + strings.Join(notes, " ")
	}
	if len(notes) > 0 || partial && len(r.Lesions) == 0 {
		s += review
	}
	return s
}

// plural is one or many by n.
func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// MarshalJSON writes the report with its figures under their scan type's
// report key (measurements, line or rnfl), right after measurable and
// notMeasurable.
func (r Report) MarshalJSON() ([]byte, error) {
	type plain Report // without these methods
	obj, err := json.Marshal(plain(r))
	if err != nil {
		return nil, err
	}
	return imaging.InsertFigures(obj, r.Figures, imaging.ReportKey, "measurable", "notMeasurable")
}

// UnmarshalJSON reads a report and the figures under its scan type's
// report key.
func (r *Report) UnmarshalJSON(b []byte) error {
	type plain Report // without these methods
	var p plain
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	f, err := imaging.ExtractFigures(b, imaging.ReportKey)
	if err != nil {
		return fmt.Errorf("report: %w", err)
	}
	*r = Report(p)
	r.Figures = f
	return nil
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
	// Page streams are a few kB of text operators; compressing each page
	// costs a fresh 1 MB compressor, more than the report saves.
	pdf.SetCompression(false)
	enc := newPNGEncoder()
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
	pdf.CellFormat(0, 9, title(r.ScanPattern), "", 1, "L", false, 0, "")
	if r.Supersedes != nil {
		pdf.SetFont("Helvetica", "B", 10)
		pdf.MultiCell(0, 5, tr(r.Supersedes.Line()), "", "L", false)
	}
	section(pdf, "Exam")
	intensity := "not recorded"
	if in := r.Intensity; in != nil {
		intensity = string(in.Encoding)
		if in.Encoding == imaging.Power {
			intensity = fmt.Sprintf("power law (levels ~ reflectivity^%.2f, against the working scale)", in.Exponent)
		}
	}
	for _, kv := range [][2]string{
		{"Exam ID", r.ExamID},
		{"Patient reference (pseudonymised)", orDash(r.PatientRef)},
		{"Device / campus", r.DeviceID + " / " + r.Campus},
		{"Eye", eyeName(r.Eye)},
		{"Priority", r.Priority},
		{"Submitted / report", r.SubmittedAt.UTC().Format(time.RFC3339) + " / " + r.GeneratedAt.UTC().Format(time.RFC3339)},
		{"Scan", tr(fmt.Sprintf("%s, %d B-scan(s) × %d × %d, %.2f × %.2f × %.1f µm", patternName(r.ScanPattern),
			r.Volume.Frames, r.Volume.Rows, r.Volume.Cols, r.Volume.Spacing.AxialUm, r.Volume.Spacing.LateralUm, r.Volume.Spacing.FrameUm))},
		{"Intensity encoding", tr(intensity)},
		{"Scan quality", tr(fmt.Sprintf("%s: signal strength %.1f / 10 (%s), %.0f%% of A-scans graded", gradableName(r.Quality.Gradable),
			r.Quality.SignalStrength, r.Quality.Grade, 100*r.Quality.GradableFraction))},
	} {
		row(pdf, kv[0], kv[1])
	}

	switch {
	case !r.Measurable:
		section(pdf, "Not measurable")
		pdf.SetFont("Helvetica", "", 10)
		for _, why := range r.NotMeasurable {
			pdf.MultiCell(0, 5, tr("- "+why), "", "L", false)
		}
		pdf.SetFont("Helvetica", "B", 10)
		pdf.MultiCell(0, 5, "No thickness, volume or lesion figures are reported for this exam: the scan could not be analysed. "+
			"Review the B-scan and repeat the scan if needed.", "", "L", false)
	default:
		if r.Quality.Gradable == imaging.PartlyGradable {
			pdf.Ln(1)
			pdf.SetFont("Helvetica", "B", 9)
			pdf.MultiCell(0, 4, tr("Partly gradable: the figures below cover the graded A-scans only ("+strings.Join(r.Quality.Reasons, "; ")+")."),
				"", "L", false)
		}
		if r.Figures != nil {
			if write := patterns[r.Figures.Pattern()].section; write != nil {
				if err := write(pdf, tr, r, f, enc); err != nil {
					return nil, err
				}
			}
		}
	}
	withheldSection(pdf, tr, r.Withheld)

	pdf.AddPage()
	if f != nil {
		section(pdf, bscanTitle(r.ScanPattern))
		shown := *f
		if !r.Measurable { // no boundary from a failed analysis
			shown.Boundaries = nil
		}
		png, err := bscanPNG(&shown, r.Outlines(f.FoveaFrame), enc)
		if err != nil {
			return nil, err
		}
		pdf.RegisterImageOptionsReader("bscan", fpdf.ImageOptions{ImageType: "PNG"}, bytes.NewReader(png))
		w := 180.0
		h := min(w*float64(f.Rows)*f.Spacing.AxialUm/(float64(f.Cols)*f.Spacing.LateralUm)*3, 120) // depth stretched 3×, as OCT viewers do
		y := pdf.GetY() + 1
		pdf.ImageOptions("bscan", 15, y, w, h, false, fpdf.ImageOptions{ImageType: "PNG"}, 0, "")
		pdf.SetY(y + h + 2)
		pdf.SetFont("Helvetica", "", 8)
		caption := fmt.Sprintf("B-scan %d of %d, depth stretched. Lines, top to bottom: ILM red, RNFL/GCL orange, IPL/INL magenta, INL/OPL blue, OPL/ONL violet, EZ white, RPE yellow, BM green. "+
			"Cyan boxes outline lesions on this B-scan.", f.FoveaFrame+1, f.Frames)
		if !r.Measurable {
			caption = fmt.Sprintf("B-scan %d of %d as scanned; no boundaries are drawn, as none could be found with confidence.", f.FoveaFrame+1, f.Frames)
		}
		pdf.MultiCell(0, 4, tr(caption), "", "L", false)
	}

	if r.Measurable {
		section(pdf, "Lesions")
		finding := r.Finding()
		if finding != NoLesionFound {
			pdf.SetFont("Helvetica", "B", 10)
		}
		pdf.MultiCell(0, 5, tr(finding), "", "L", false)
		pdf.SetFont("Helvetica", "", 10)
		if len(r.Lesions) > 0 {
			var rows [][]string
			for _, l := range r.Lesions {
				rows = append(rows, []string{l.Type, fmt.Sprint(l.Frame + 1), fmt.Sprintf("%.2f", l.XMm), fmt.Sprintf("%.2f", l.YMm),
					fmt.Sprintf("%.3f", l.AreaMm2), fmt.Sprintf("%.4f", l.VolumeMm3)})
			}
			table(pdf, 30, []string{"Type", "B-scan", "x (mm)", "y (mm)", "Area (mm2)", "Volume (mm3)"}, rows)
		}
	}

	section(pdf, "Algorithms")
	for _, s := range r.AlgorithmStages() {
		row(pdf, s, r.Algorithms[s])
	}

	var buf bytes.Buffer
	if err := pdf.Output(&buf); err != nil {
		return nil, fmt.Errorf("render pdf: %w", err)
	}
	return buf.Bytes(), nil
}

// cubeSection is a macular cube's figures: thickness, the ETDRS grid,
// the thickness map and the layers.
func cubeSection(pdf *fpdf.Fpdf, tr func(string) string, r *Report, m *imaging.Measurements, f *Figures, enc *png.Encoder) error {
	section(pdf, "Retinal thickness, ILM to Bruch's membrane")
	row(pdf, "Central subfield thickness (CST)", tr(fmt.Sprintf("%.0f µm", m.CentralSubfieldThicknessUm)))
	volume := "not measured: " + strings.Join(m.Unmeasured, ", ") + " could not be graded"
	if m.TotalVolumeMm3 > 0 {
		volume = fmt.Sprintf("%.2f mm³", m.TotalVolumeMm3)
	}
	row(pdf, "Total macular volume (6 mm)", tr(volume))
	row(pdf, "Mean / min / max", tr(fmt.Sprintf("%.0f / %.0f / %.0f µm", m.MeanThicknessUm, m.MinThicknessUm, m.MaxThicknessUm)))
	top := pdf.GetY() + 4
	etdrsGrid(pdf, tr, 50, top+38, 34, m.ETDRS, r.Eye)
	if f != nil && len(f.Thickness) == f.Frames*f.Cols {
		if err := thicknessMap(pdf, tr, f, 110, top, 76, r.Eye, enc); err != nil {
			return err
		}
	}
	pdf.SetY(top + 84)
	pdf.SetFont("Helvetica", "", 8)
	pdf.MultiCell(0, 4, tr("ETDRS subfields in µm on circles of 1, 3 and 6 mm centred on the fovea: C centre; inner (I) and outer (O) rings, "+
		"superior (S), nasal (N), inferior (I), temporal (T); - where too little was graded. The map shows the same grid over the retinal thickness."), "", "L", false)
	if len(m.Layers) > 0 {
		section(pdf, "Layer thickness")
		var rows [][]string
		for _, l := range m.Layers {
			centre := "-"
			if c, ok := l.ETDRS["C"]; ok {
				centre = fmt.Sprintf("%.1f", c)
			}
			rows = append(rows, []string{l.Name, l.Top + " to " + l.Bottom, fmt.Sprintf("%.1f", l.MeanUm), centre})
		}
		table(pdf, 45, []string{"Layer", "Boundaries", "Mean, 6 mm (um)", "Centre (um)"}, rows)
	}
	return nil
}

// withheldSection lists the figures not reported because a boundary they
// need is not reliable where they are measured, with the reasons.
func withheldSection(pdf *fpdf.Fpdf, tr func(string) string, withheld []imaging.Withheld) {
	if len(withheld) == 0 {
		return
	}
	section(pdf, "Not reported: boundaries not reliable")
	pdf.SetFont("Helvetica", "", 9)
	pdf.MultiCell(0, 4, "These figures are withheld: the image does not show the boundaries they rest on plainly enough where they are measured. "+
		"The figures above are the ones this report vouches for.", "", "L", false)
	for _, w := range withheld {
		pdf.MultiCell(0, 4, tr("- "+figureName(w.Figure)+": "+w.Reason), "", "L", false)
	}
}

// figureName is how the report names a withheld figure.
func figureName(figure string) string {
	switch {
	case strings.HasPrefix(figure, imaging.FigureETDRS):
		return "ETDRS subfield " + strings.TrimPrefix(figure, imaging.FigureETDRS)
	case strings.HasPrefix(figure, imaging.FigureRNFLSector):
		return "RNFL sector " + strings.TrimPrefix(figure, imaging.FigureRNFLSector)
	case strings.HasPrefix(figure, imaging.FigureLayer):
		return "Layer thickness " + strings.TrimPrefix(figure, imaging.FigureLayer)
	}
	names := map[string]string{
		imaging.FigureRNFLGlobal: "RNFL global thickness", imaging.FigureRNFLSectors: "RNFL sectors",
		imaging.FigureCentral: "Central thickness (1 mm)", imaging.FigureCST: "Central subfield thickness",
		imaging.FigureVolume:  "Total macular volume",
		imaging.FigureLesions: "Lesions", imaging.FigureMeasurements: "Measurements",
	}
	if n, ok := names[figure]; ok {
		return n
	}
	return figure
}

// lineSection is a line scan's figures: the central thickness through
// the fovea, or why there is none, and the thickness profile.
func lineSection(pdf *fpdf.Fpdf, tr func(string) string, _ *Report, m *imaging.LineMeasurements, _ *Figures, _ *png.Encoder) error {
	section(pdf, "Retinal thickness along the line, ILM to Bruch's membrane")
	central := "not measured: " + m.NoFovea
	if m.NoFovea == "" {
		central = "not reported: see below"
	}
	if m.FoveaCol != nil {
		central = fmt.Sprintf("%.0f µm (foveal pit %.0f µm deep, at A-scan %d)", m.CentralThicknessUm, m.PitDepthUm, *m.FoveaCol+1)
	}
	pdf.SetFont("Helvetica", "", 10)
	pdf.CellFormat(70, 6, "Central thickness (1 mm)", "", 0, "L", false, 0, "")
	pdf.SetFont("Helvetica", "B", 10)
	pdf.MultiCell(0, 6, tr(central), "", "L", false)
	row(pdf, "Mean / min / max", tr(fmt.Sprintf("%.0f / %.0f / %.0f µm over %.1f mm", m.MeanThicknessUm, m.MinThicknessUm, m.MaxThicknessUm, m.LengthMm)))
	profilePlot(pdf, tr, m.ProfileUm, 600, "Thickness profile along the line, µm (gaps: not graded)", nil)
	return nil
}

// rnflSection is a circle scan's figures: the RNFL's global and sector
// thickness and its TSNIT profile.
func rnflSection(pdf *fpdf.Fpdf, tr func(string) string, _ *Report, m *imaging.RNFLMeasurements, _ *Figures, _ *png.Encoder) error {
	section(pdf, "Peripapillary retinal nerve fibre layer, ILM to RNFL/GCL")
	row(pdf, "Global mean thickness", tr(fmt.Sprintf("%.0f µm", m.GlobalUm)))
	row(pdf, "Circle", tr(fmt.Sprintf("%.2f mm long, %.2f mm across; retina %.0f µm", m.CircumferenceMm, m.DiameterMm, m.RetinaMeanUm)))
	var cells []string
	for _, s := range imaging.RNFLSectors {
		v := "-"
		if x, ok := m.Sectors[s]; ok {
			v = fmt.Sprintf("%.0f", x)
		}
		cells = append(cells, v)
	}
	pdf.Ln(2)
	table(pdf, 30, imaging.RNFLSectors, [][]string{cells})
	pdf.SetFont("Helvetica", "", 8)
	pdf.MultiCell(0, 4, tr("Sector means in µm; the global mean weighs each sector by its length. Reading: "+m.Convention+"."), "", "L", false)
	n := float64(len(m.ProfileUm))
	profilePlot(pdf, tr, m.ProfileUm, 250, "RNFL thickness profile, µm (gaps: not graded)",
		[]profileMark{{0, "T"}, {n / 4, "S"}, {n / 2, "N"}, {3 * n / 4, "I"}, {n - 1, "T"}})
	return nil
}

// profileMark labels a position on a profile's x axis.
type profileMark struct {
	at    float64
	label string
}

// profilePlot draws values (0: not graded, left out) as a line over the
// page's width, 0 to yMax µm.
func profilePlot(pdf *fpdf.Fpdf, tr func(string) string, values []float32, yMax float64, caption string, marks []profileMark) {
	for _, v := range values {
		yMax = max(yMax, float64(v)*1.05)
	}
	x0, w, h := 25.0, 165.0, 50.0
	y0 := pdf.GetY() + 4
	pdf.SetDrawColor(120, 120, 120)
	pdf.SetLineWidth(0.2)
	pdf.Rect(x0, y0, w, h, "D")
	pdf.SetFont("Helvetica", "", 7)
	for _, t := range []float64{0, yMax / 2, yMax} {
		y := y0 + h - t/yMax*h
		pdf.SetXY(x0-14, y-2)
		pdf.CellFormat(12, 4, fmt.Sprintf("%.0f", t), "", 0, "R", false, 0, "")
	}
	n := max(len(values)-1, 1)
	for _, m := range marks {
		x := x0 + m.at/float64(n)*w
		pdf.SetXY(x-3, y0+h+1)
		pdf.CellFormat(6, 4, m.label, "", 0, "C", false, 0, "")
	}
	pdf.SetDrawColor(200, 30, 30)
	pdf.SetLineWidth(0.4)
	for i := 1; i < len(values); i++ {
		a, b := float64(values[i-1]), float64(values[i])
		if a <= 0 || b <= 0 {
			continue
		}
		pdf.Line(x0+float64(i-1)/float64(n)*w, y0+h-a/yMax*h, x0+float64(i)/float64(n)*w, y0+h-b/yMax*h)
	}
	pdf.SetDrawColor(0, 0, 0)
	pdf.SetXY(x0, y0+h+5)
	pdf.SetFont("Helvetica", "", 8)
	pdf.CellFormat(w, 4, tr(caption), "", 1, "C", false, 0, "")
}

// patterns is how the report prints each scan pattern: its title, the
// heading of its B-scan, its name and, for a pattern octflow measures,
// the section of its figures (see imaging.ScanType).
var patterns = map[imaging.Pattern]struct {
	title, bscan, name string
	section            figuresSection
}{
	imaging.Cube:   {"Macular OCT report", "Central B-scan through the fovea", "macular cube", sectionOf(cubeSection)},
	imaging.Line:   {"OCT line scan report", "B-scan", "line scan", sectionOf(lineSection)},
	imaging.Circle: {"Peripapillary RNFL report", "Circle scan around the optic disc, unrolled (TSNIT)", "peripapillary circle scan", sectionOf(rnflSection)},
	imaging.Radial: {title: "OCT report", bscan: "B-scan", name: "radial scan"},
}

// figuresSection prints the figures of r (r.Figures) on the first page.
type figuresSection func(pdf *fpdf.Fpdf, tr func(string) string, r *Report, f *Figures, enc *png.Encoder) error

// sectionOf is the figuresSection of write, which prints figures of type
// T; figures of another type are an error.
func sectionOf[T imaging.Figures](write func(pdf *fpdf.Fpdf, tr func(string) string, r *Report, m T, f *Figures, enc *png.Encoder) error) figuresSection {
	return func(pdf *fpdf.Fpdf, tr func(string) string, r *Report, f *Figures, enc *png.Encoder) error {
		m, ok := r.Figures.(T)
		if !ok {
			return fmt.Errorf("report: no section prints figures of type %T as a %s scan's", r.Figures, r.ScanPattern)
		}
		return write(pdf, tr, r, m, f, enc)
	}
}

func title(p imaging.Pattern) string { return cmp.Or(patterns[p].title, "OCT report") }

// Title is the title the report's PDF prints ("Macular OCT report" for a
// macular cube): what the Encapsulated PDF's Document Title says.
func Title(r *Report) string { return title(r.ScanPattern) }

func bscanTitle(p imaging.Pattern) string { return cmp.Or(patterns[p].bscan, "B-scan") }

func patternName(p imaging.Pattern) string { return cmp.Or(patterns[p].name, "unknown pattern") }

func gradableName(g imaging.Gradability) string {
	switch g {
	case imaging.Gradable:
		return "gradable"
	case imaging.PartlyGradable:
		return "partly gradable"
	case imaging.Ungradable:
		return "ungradable"
	}
	return "not assessed"
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
func thicknessMap(pdf *fpdf.Fpdf, tr func(string) string, f *Figures, x, y, w float64, eye string, enc *png.Encoder) error {
	png, err := thicknessPNG(f, enc)
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
