package results

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/suyashkumar/dicom"
	"github.com/suyashkumar/dicom/pkg/tag"

	"octflow/octdicom"
	"octflow/octdicom/octdicomtest"
	"octflow/report"
)

// srNode is one content item of an SR, as the template tests read it.
type srNode struct {
	rel, vt   string
	concept   srCode
	code      srCode // a CODE's value
	units     srCode // a NUM's units
	num       string // a NUM's value ("" without one)
	qualifier srCode // a NUM's Numeric Value Qualifier
	text, uid string
	children  []*srNode
}

// first is the first string value of tg in els.
func first(els []*dicom.Element, tg tag.Tag) string {
	for _, el := range els {
		if el.Tag == tg {
			if v, ok := el.Value.GetValue().([]string); ok && len(v) > 0 {
				return strings.TrimRight(v[0], "\x00 ")
			}
		}
	}
	return ""
}

// srNodes reads content items (the items of a Content Sequence).
func srNodes(items [][]*dicom.Element) []*srNode {
	var out []*srNode
	for _, it := range items {
		n := &srNode{rel: first(it, tag.RelationshipType), vt: first(it, tag.ValueType),
			text: first(it, tag.TextValue), uid: first(it, tag.UID)}
		n.concept, _ = codeIn(it, tag.ConceptNameCodeSequence)
		n.code, _ = codeIn(it, tag.ConceptCodeSequence)
		n.qualifier, _ = codeIn(it, tag.NumericValueQualifierCodeSequence)
		if mv := seqItems(it, tag.MeasuredValueSequence); len(mv) > 0 {
			n.num = first(mv[0], tag.NumericValue)
			n.units, _ = codeIn(mv[0], tag.MeasurementUnitsCodeSequence)
		}
		n.children = srNodes(seqItems(it, tag.ContentSequence))
		out = append(out, n)
	}
	return out
}

// srTree is an SR's content tree: its root container.
func srTree(t *testing.T, o Object) *srNode {
	t.Helper()
	ds := parse(t, o)
	root := srNodes([][]*dicom.Element{ds.Elements})[0]
	root.rel = ""
	return root
}

// find is the content items at path below n: each step a concept's code
// value, or IMAGE for an IMAGE item (which has no concept name).
func (n *srNode) find(path ...string) []*srNode {
	if len(path) == 0 {
		return []*srNode{n}
	}
	var out []*srNode
	for _, c := range n.children {
		if c.concept.value == path[0] || path[0] == "IMAGE" && c.vt == "IMAGE" {
			out = append(out, c.find(path[1:]...)...)
		}
	}
	return out
}

// walk calls f on n and every item below it.
func (n *srNode) walk(f func(*srNode)) {
	f(n)
	for _, c := range n.children {
		c.walk(f)
	}
}

// templateRow is one row of the templates the Macular Grid report is
// built by (TID 2100 and those it includes: 1204, 1002/1004, 2120, 300,
// 4019), as the SR must have it.
type templateRow struct {
	row     string   // which template row, for the message
	path    []string // concept code values from the root down to the item
	count   int      // items there
	rel, vt string
	concept srCode
	units   srCode // a NUM's units
	code    srCode // a CODE's value
}

var (
	um       = srCode{"um", "UCUM", "micrometer"}
	uL       = srCode{"uL", "UCUM", "microliter"}
	none     = srCode{"1", "UCUM", "no units"}
	pct      = srCode{"%", "UCUM", "%"}
	group    = "125007"
	notTried = srCode{"114007", "DCM", "Measurement not attempted"}
)

// cid4285Rows are CID 4285's concepts (PS3.16, non-extensible) and
// their units.
var cid4285Rows = []struct {
	concept srCode
	units   srCode
}{
	{srCode{"57108-3", "LN", "Macular grid.center point thickness by OCT"}, um},
	{srCode{"57109-1", "LN", "Macular grid.center subfield thickness by OCT"}, um},
	{srCode{"57110-9", "LN", "Macular grid.inner superior subfield thickness by OCT"}, um},
	{srCode{"57111-7", "LN", "Macular grid.inner nasal subfield thickness by OCT"}, um},
	{srCode{"57112-5", "LN", "Macular grid.inner inferior subfield thickness by OCT"}, um},
	{srCode{"57113-3", "LN", "Macular grid.inner temporal subfield thickness by OCT"}, um},
	{srCode{"57114-1", "LN", "Macular grid.outer superior subfield thickness by OCT"}, um},
	{srCode{"57115-8", "LN", "Macular grid.outer nasal subfield thickness by OCT"}, um},
	{srCode{"57116-6", "LN", "Macular grid.outer inferior subfield thickness by OCT"}, um},
	{srCode{"57117-4", "LN", "Macular grid.outer temporal subfield thickness by OCT"}, um},
	{srCode{"57118-2", "LN", "Macular grid.total volume by OCT"}, uL},
	{srCode{"131255", "DCM", "Average macular thickness"}, um},
}

// macularTemplateRows are the rows a measured right eye's report has.
func macularTemplateRows() []templateRow {
	rows := []templateRow{
		{row: "TID 2100 row 1", count: 1, vt: "CONTAINER", concept: srCode{"111690", "DCM", "Macular Grid Thickness and Volume Report"}},
		{row: "TID 1204 row 1", path: []string{"121049"}, count: 1, rel: "HAS CONCEPT MOD", vt: "CODE",
			concept: srCode{"121049", "DCM", "Language of Content Item and Descendants"}, code: srCode{"en-US", "RFC5646", "English (United States)"}},
		{row: "TID 1002 row 1", path: []string{"121005"}, count: 1, rel: "HAS OBS CONTEXT", vt: "CODE",
			concept: srCode{"121005", "DCM", "Observer Type"}, code: srCode{"121007", "DCM", "Device"}},
		{row: "TID 1004 row 1", path: []string{"121012"}, count: 1, rel: "HAS OBS CONTEXT", vt: "UIDREF",
			concept: srCode{"121012", "DCM", "Device Observer UID"}},
		{row: "TID 1004 row 2", path: []string{"121013"}, count: 1, rel: "HAS OBS CONTEXT", vt: "TEXT",
			concept: srCode{"121013", "DCM", "Device Observer Name"}},
		{row: "TID 1004 row 3", path: []string{"121014"}, count: 1, rel: "HAS OBS CONTEXT", vt: "TEXT",
			concept: srCode{"121014", "DCM", "Device Observer Manufacturer"}},
		{row: "TID 1004 row 4", path: []string{"121015"}, count: 1, rel: "HAS OBS CONTEXT", vt: "TEXT",
			concept: srCode{"121015", "DCM", "Device Observer Model Name"}},
		{row: "TID 1004 row 5", path: []string{"121016"}, count: 1, rel: "HAS OBS CONTEXT", vt: "TEXT",
			concept: srCode{"121016", "DCM", "Device Observer Serial Number"}},
		{row: "TID 2120 row 1", path: []string{group}, count: 1, rel: "CONTAINS", vt: "CONTAINER",
			concept: srCode{"125007", "DCM", "Measurement Group"}},
		{row: "TID 2120 row 2", path: []string{group, "363698007"}, count: 1, rel: "HAS CONCEPT MOD", vt: "CODE",
			concept: srCode{"363698007", "SCT", "Finding Site"}, code: srCode{"81745001", "SCT", "Eye"}},
		{row: "TID 2120 row 3: under the finding site", path: []string{group, "363698007", "272741003"}, count: 1,
			rel: "HAS CONCEPT MOD", vt: "CODE", concept: srCode{"272741003", "SCT", "Laterality"}, code: srCode{"24028007", "SCT", "Right"}},
		{row: "TID 2120 row 3: not the finding site's sibling", path: []string{group, "272741003"}, count: 0},
		{row: "TID 2100: the quality, images used", path: []string{group, "111691"}, count: 1, rel: "CONTAINS", vt: "NUM",
			concept: srCode{"111691", "DCM", "Number of Images Used for Macular Measurements"}, units: none},
		{row: "TID 2100: the quality, samples per image", path: []string{group, "111692"}, count: 1, rel: "CONTAINS", vt: "NUM",
			concept: srCode{"111692", "DCM", "Number of Samples Used per Image"}, units: none},
		{row: "TID 2100: the quality, analysis", path: []string{group, "111693"}, count: 1, rel: "CONTAINS", vt: "NUM",
			concept: srCode{"111693", "DCM", "Analysis Quality Rating"}, units: pct},
		{row: "TID 2100: the quality, image set", path: []string{group, "111694"}, count: 1, rel: "CONTAINS", vt: "NUM",
			concept: srCode{"111694", "DCM", "Image Set Quality Rating"}, units: none},
	}
	for _, q := range []string{"111693", "111694"} {
		rows = append(rows,
			templateRow{row: "TID 4019 row 1 of the quality gate", path: []string{group, q, "111001"}, count: 1, rel: "HAS OBS CONTEXT",
				vt: "TEXT", concept: srCode{"111001", "DCM", "Algorithm Name"}},
			templateRow{row: "TID 4019 row 2 of the quality gate", path: []string{group, q, "111003"}, count: 1, rel: "HAS OBS CONTEXT",
				vt: "TEXT", concept: srCode{"111003", "DCM", "Algorithm Version"}})
	}
	stages := len(cubeReport().Algorithms)
	for _, f := range cid4285Rows {
		c := f.concept.value
		rows = append(rows, templateRow{row: "TID 2120 $Measurement, CID 4285 " + c, path: []string{group, c}, count: 1,
			rel: "CONTAINS", vt: "NUM", concept: f.concept, units: f.units})
		if c == "57108-3" {
			// Not measured by octflow: no algorithm, no source.
			rows = append(rows, templateRow{row: "TID 4019 of " + c, path: []string{group, c, "111001"}, count: 0},
				templateRow{row: "TID 300 INFERRED FROM of " + c, path: []string{group, c, "IMAGE"}, count: 0})
			continue
		}
		rows = append(rows,
			// One name and version per algorithm the report names (the
			// image stages': the denoising, the segmentation, the lesion
			// search, the grid).
			templateRow{row: "TID 4019 row 1 of " + c, path: []string{group, c, "111001"}, count: stages, rel: "HAS OBS CONTEXT",
				vt: "TEXT", concept: srCode{"111001", "DCM", "Algorithm Name"}},
			templateRow{row: "TID 4019 row 2 of " + c, path: []string{group, c, "111003"}, count: stages, rel: "HAS OBS CONTEXT",
				vt: "TEXT", concept: srCode{"111003", "DCM", "Algorithm Version"}},
			templateRow{row: "TID 300 INFERRED FROM of " + c, path: []string{group, c, "IMAGE"}, count: 1, rel: "INFERRED FROM", vt: "IMAGE"})
	}
	return rows
}

// TestTheMacularGridReportFollowsItsTemplatesRowByRow walks a measured
// cube's SR and checks each template row it must have: where it is
// (nested under what), how many, its relationship, value type, concept
// (value, scheme and meaning), units or coded value. No tool here checks
// templates (dsrdump checks the IOD's relationships only).
func TestTheMacularGridReportFollowsItsTemplatesRowByRow(t *testing.T) {
	rep := cubeReport()
	root := srTree(t, build(t, octdicomtest.Identity(testRef), rep, []byte("%PDF-1.4 test"))[1])
	for _, r := range macularTemplateRows() {
		t.Run(r.row, func(t *testing.T) {
			got := root.find(r.path...)
			if len(got) != r.count {
				t.Fatalf("%d items at %v, want %d", len(got), r.path, r.count)
			}
			for _, n := range got {
				if n.rel != r.rel || n.vt != r.vt || n.concept != r.concept {
					t.Errorf("at %v: %s %s %v, want %s %s %v", r.path, n.rel, n.vt, n.concept, r.rel, r.vt, r.concept)
				}
				// A NUM without a value has no units.
				if n.vt == "NUM" && n.num != "" && n.units != r.units {
					t.Errorf("at %v: units %v, want %v", r.path, n.units, r.units)
				}
				if n.vt == "CODE" && n.code != r.code {
					t.Errorf("at %v: value %v, want %v", r.path, n.code, r.code)
				}
				if n.vt == "TEXT" && n.text == "" || n.vt == "UIDREF" && !octdicom.ValidUID(n.uid) {
					t.Errorf("at %v: no value", r.path)
				}
			}
		})
	}
	t.Run("no other measurement in the group", func(t *testing.T) {
		want := []string{"111691", "111692", "111693", "111694"}
		for _, f := range cid4285Rows {
			want = append(want, f.concept.value)
		}
		for _, n := range root.find(group)[0].children {
			if n.vt == "NUM" && !slices.Contains(want, n.concept.value) {
				t.Errorf("the group measures %v, which is neither CID 4285's nor a quality concept", n.concept)
			}
		}
	})
	t.Run("no volume in mm3", func(t *testing.T) {
		root.walk(func(n *srNode) {
			if n.units.value == "mm3" {
				t.Errorf("%v is in mm3: CID 4285 gives the volume in uL", n.concept)
			}
		})
	})
}

// TestTheMacularGridReportGivesEveryFigureOrSaysWhyNot reads each CID
// 4285 figure of a measured and a partly gradable cube: the report's own
// value in the concept's units (the volume's figure the report's mm³,
// 1 mm³ being 1 µL), or no value, the qualifier that says why and a
// comment.
func TestTheMacularGridReportGivesEveryFigureOrSaysWhyNot(t *testing.T) {
	indeterminate := srCode{"114011", "DCM", "Value indeterminate"}
	for _, c := range []struct {
		name string
		rep  *report.Report
		// want is each concept's value, or its qualifier's code value
		// prefixed by "!".
		want     map[string]string
		comments []string
	}{
		{"measured", cubeReport(), map[string]string{
			"57108-3": "!" + notTried.value, "57109-1": "271.43", "57110-9": "338.1", "57111-7": "341.7", "57112-5": "335.2",
			"57113-3": "322.9", "57114-1": "297.4", "57115-8": "312.8", "57116-6": "286.5", "57117-4": "280.2",
			"57118-2": "8.614", "131255": "301", "111691": "49", "111692": "512", "111693": "97", "111694": "8.2",
		}, []string{"center point thickness not measured: "}},
		{"partly gradable", partialCube(), map[string]string{
			"57108-3": "!" + notTried.value, "57109-1": "271.43", "57117-4": "!" + indeterminate.value,
			"57118-2": "!" + indeterminate.value, "131255": "301",
		}, []string{"subfield OT not reported: the ILM is reliable in 41% of subfield OT",
			"total volume not reported: subfield OT is not reported", "Quality gate: partial: some figures withheld."}},
	} {
		t.Run(c.name, func(t *testing.T) {
			root := srTree(t, build(t, octdicomtest.Identity(testRef), c.rep, []byte("%PDF-1.4 test"))[1])
			for concept, want := range c.want {
				got := root.find(group, concept)
				if len(got) != 1 {
					t.Errorf("%s: %d items, want 1", concept, len(got))
					continue
				}
				n := got[0]
				if q, ok := strings.CutPrefix(want, "!"); ok {
					if n.num != "" || n.qualifier.value != q {
						t.Errorf("%s = %q, qualifier %v; want no value, qualifier %s", concept, n.num, n.qualifier, q)
					}
					continue
				}
				if n.num != want || n.qualifier != (srCode{}) {
					t.Errorf("%s = %q (qualifier %v), want %s", concept, n.num, n.qualifier, want)
				}
			}
			var comments []string
			for _, n := range root.find(group, "121106") {
				comments = append(comments, n.text)
			}
			for _, want := range append(c.comments, "Computed automatically by octflow, to be reviewed by a clinician.") {
				if !slices.ContainsFunc(comments, func(s string) bool { return strings.HasPrefix(s, want) }) {
					t.Errorf("no comment %q among %q", want, comments)
				}
			}
		})
	}
}

// TestTheAlgorithmsBehindAFigureAreIdentified reads the TID 4019 items
// of a figure: one name and version per stage the report names an
// algorithm of, in the pipeline's order as the report records it (a
// report that recorded none: by name), as the report names them
// ("name/version"; a served model's URL is all name, of an unknown
// version). A stage added to the pipeline is identified with no change
// here; one replaced drops out.
func TestTheAlgorithmsBehindAFigureAreIdentified(t *testing.T) {
	reference := map[string]string{"denoise": "nlm-log/v1", "layers": "kserve:http://triton:8000/v2/models/layers",
		"lesions": "fluid-drusen/v1", "measure": "etdrs-layers/v1.2"}
	withFlatten := maps.Clone(reference)
	withFlatten["flatten"] = "rpe-flatten/v2"
	withoutDenoise := maps.Clone(reference)
	delete(withoutDenoise, "denoise")
	pair := func(name, version string) []string {
		return []string{"Algorithm Name=" + name, "Algorithm Version=" + version}
	}
	denoise, layers := pair("nlm-log", "v1"), pair("kserve:http://triton:8000/v2/models/layers", "unknown")
	lesions, measure, flatten := pair("fluid-drusen", "v1"), pair("etdrs-layers", "v1.2"), pair("rpe-flatten", "v2")
	for _, c := range []struct {
		name       string
		algorithms map[string]string
		order      []string
		want       [][]string
	}{
		{"the reference pipeline", reference, []string{"denoise", "layers", "lesions", "measure"},
			[][]string{denoise, layers, lesions, measure}},
		{"a stage added, in its place", withFlatten, []string{"denoise", "flatten", "layers", "lesions", "measure"},
			[][]string{denoise, flatten, layers, lesions, measure}},
		{"a stage gone", withoutDenoise, []string{"layers", "lesions", "measure"}, [][]string{layers, lesions, measure}},
		{"a report that recorded no order", withFlatten, nil, [][]string{denoise, flatten, layers, lesions, measure}},
		{"an order naming a stage of no algorithm", reference, []string{"measure", "report", "denoise"},
			[][]string{measure, denoise, layers, lesions}},
	} {
		t.Run(c.name, func(t *testing.T) {
			rep := cubeReport()
			rep.Algorithms, rep.AlgorithmOrder = c.algorithms, c.order
			root := srTree(t, build(t, octdicomtest.Identity(testRef), rep, []byte("%PDF-1.4 test"))[1])
			var got []string
			for _, n := range root.find(group, "57109-1")[0].children {
				if n.rel == "HAS OBS CONTEXT" {
					got = append(got, n.concept.meaning+"="+n.text)
				}
			}
			if want := slices.Concat(c.want...); !slices.Equal(got, want) {
				t.Errorf("the central subfield's algorithms\n got %q\nwant %q", got, want)
			}
		})
	}
	for _, c := range []struct{ in, name, version string }{
		{"chiu-graph/v1", "chiu-graph", "v1"},
		{"model/3", "model", "3"},
		{"kserve:http://h/v2/models/layers", "kserve:http://h/v2/models/layers", "unknown"},
		{"etdrs-v2", "etdrs-v2", "unknown"},
		{"trailing/", "trailing/", "unknown"},
	} {
		if name, version := splitAlgorithm(c.in); name != c.name || version != c.version {
			t.Errorf("splitAlgorithm(%q) = %q, %q; want %q, %q", c.in, name, version, c.name, c.version)
		}
	}
}

// TestTheDeviceIsTheInstallation: the SR's Device Observer UID and
// serial number (TID 1004) and every object's Device Serial Number are
// the installation's: the same for its every exam and campus, another
// for another installation; an installation that names itself not is
// told apart by its campus.
func TestTheDeviceIsTheInstallation(t *testing.T) {
	device := func(installation, campus string) (uid, serial string) {
		t.Helper()
		ref := testRef
		ref.Campus = campus
		rep := cubeReport()
		rep.Campus = campus
		objs, err := Build(octdicomtest.Identity(ref), rep, []byte("%PDF-1.4 test"), Software{Version: "v1", Installation: installation})
		if err != nil {
			t.Fatal(err)
		}
		root := srTree(t, objs[1])
		uid, serial = root.find("121012")[0].uid, root.find("121016")[0].text
		for _, o := range objs {
			if got := value(t, parse(t, o), tag.DeviceSerialNumber); got != serial {
				t.Errorf("%s: Device Serial Number %q, the SR's observer %q", o.Kind, got, serial)
			}
		}
		if !octdicom.ValidUID(uid) || len(serial) > 64 || serial == "" {
			t.Errorf("observer UID %q, serial number %q", uid, serial)
		}
		return uid, serial
	}
	type dev struct{ uid, serial string }
	get := func(installation, campus string) dev {
		u, s := device(installation, campus)
		return dev{u, s}
	}
	eye := get("eye-clinic.example.org", "north")
	for _, c := range []struct {
		name string
		got  dev
		same bool
	}{
		{"the same installation, another campus", get("eye-clinic.example.org", "south"), true},
		{"another installation, the same campus", get("city-hospital.example.org", "north"), false},
		{"no installation named", get("", "north"), false},
	} {
		if (c.got == eye) != c.same {
			t.Errorf("%s: %+v, the installation's %+v: want same %v", c.name, c.got, eye, c.same)
		}
	}
	if get("", "north") == get("", "south") {
		t.Error("without an installation named, two campuses are one device")
	}
}

// TestTheResultsAreWrittenInTheSourcesZone: the objects' dates and times
// are in the zone of the source study (its Timezone Offset From UTC),
// which they declare; a source that names none gets times in UTC and no
// declaration (its study time's zone is unknown), the DT values naming
// +0000.
func TestTheResultsAreWrittenInTheSourcesZone(t *testing.T) {
	// The report was generated 2026-12-02 08:00 UTC.
	for _, c := range []struct {
		offset           string
		date, time, dt   string
		declaredAsOffset string // "" : not declared
	}{
		{"+0100", "20261202", "090000", "20261202090000+0100", "+0100"},
		{"-0500", "20261202", "030000", "20261202030000-0500", "-0500"},
		{"-1000", "20261201", "220000", "20261201220000-1000", "-1000"},
		{"+0530", "20261202", "133000", "20261202133000+0530", "+0530"},
		{"", "20261202", "080000", "20261202080000+0000", ""},
		{"+2500", "20261202", "080000", "20261202080000+0000", ""},
		{"0100", "20261202", "080000", "20261202080000+0000", ""},
	} {
		t.Run(fmt.Sprintf("offset %q", c.offset), func(t *testing.T) {
			id := octdicomtest.Identity(testRef)
			id.TimezoneOffset = c.offset
			rep := cubeReport()
			for _, o := range build(t, id, rep, renderPDF(t, rep)) {
				ds := parse(t, o)
				for _, tg := range []tag.Tag{tag.InstanceCreationDate, tag.SeriesDate, tag.ContentDate} {
					if got := value(t, ds, tg); got != c.date {
						t.Errorf("%s %v = %s, want %s", o.Kind, tg, got, c.date)
					}
				}
				for _, tg := range []tag.Tag{tag.InstanceCreationTime, tag.SeriesTime, tag.ContentTime} {
					if got := value(t, ds, tg); got != c.time {
						t.Errorf("%s %v = %s, want %s", o.Kind, tg, got, c.time)
					}
				}
				el, err := ds.FindElementByTag(tag.TimezoneOffsetFromUTC)
				switch {
				case c.declaredAsOffset == "" && err == nil:
					t.Errorf("%s declares %v although the source names no zone", o.Kind, el.Value)
				case c.declaredAsOffset != "" && (err != nil || value(t, ds, tag.TimezoneOffsetFromUTC) != c.declaredAsOffset):
					t.Errorf("%s: Timezone Offset From UTC %v, want %s", o.Kind, el, c.declaredAsOffset)
				}
				ce := seqItems(ds.Elements, tag.ContributingEquipmentSequence)
				if got := first(ce[0], tag.ContributionDateTime); got != c.dt {
					t.Errorf("%s: Contribution DateTime %s, want %s", o.Kind, got, c.dt)
				}
				if o.Kind == KindPDF {
					if got := value(t, ds, tag.AcquisitionDateTime); got != c.dt {
						t.Errorf("pdf: Acquisition DateTime %s, want %s", got, c.dt)
					}
				}
			}
		})
	}
}

// TestTheResultsReferenceTheOrder: the SR's Referenced Request Sequence
// and the PDF's Request Attributes Sequence name the order the scan was
// made for: the source's requests, else the study's accession number;
// neither when the source names no order.
func TestTheResultsReferenceTheOrder(t *testing.T) {
	withRequest := octdicomtest.Identity(testRef)
	accessionOnly := octdicomtest.Identity(testRef)
	accessionOnly.Requests = nil
	noOrder := accessionOnly
	noOrder.AccessionNumber = ""
	for _, c := range []struct {
		name string
		id   octdicom.Identity
		// want: accession number, requested procedure ID, description,
		// code value; nil: no sequence.
		want []string
	}{
		{"the source's request", withRequest, []string{"ACC-2026-0042", "RP-7731", "OCT Makula beidseits", "OCT-MAC"}},
		{"only an accession number", accessionOnly, []string{"ACC-2026-0042", "", "", ""}},
		{"no order", noOrder, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			rep := cubeReport()
			objs := build(t, c.id, rep, renderPDF(t, rep))
			for _, o := range objs {
				seq := map[string]tag.Tag{KindPDF: tag.RequestAttributesSequence, KindMacularGridSR: tag.ReferencedRequestSequence}[o.Kind]
				items := seqItems(parse(t, o).Elements, seq)
				if c.want == nil {
					if len(items) > 0 {
						t.Errorf("%s has a %v of no order", o.Kind, seq)
					}
					continue
				}
				if len(items) != 1 {
					t.Fatalf("%s: %d items in %v, want 1", o.Kind, len(items), seq)
				}
				it := items[0]
				procCode, _ := codeIn(it, tag.RequestedProcedureCodeSequence)
				got := []string{first(it, tag.AccessionNumber), first(it, tag.RequestedProcedureID),
					first(it, tag.RequestedProcedureDescription), procCode.value}
				if !slices.Equal(got, c.want) || first(it, tag.StudyInstanceUID) != c.id.StudyInstanceUID {
					t.Errorf("%s %v: %q of study %s, want %q of study %s", o.Kind, seq, got, first(it, tag.StudyInstanceUID),
						c.want, c.id.StudyInstanceUID)
				}
			}
		})
	}
}

// TestTheEncapsulatedPDFHasACodedTitle: the PDF's Document Title is the
// one it prints, and its Concept Name is LOINC's Diagnostic Imaging
// Report (CID 7000).
func TestTheEncapsulatedPDFHasACodedTitle(t *testing.T) {
	for _, c := range []struct {
		rep   *report.Report
		title string
	}{
		{cubeReport(), "Macular OCT report"},
		{circleReport(), "Peripapillary RNFL report"},
	} {
		ds := parse(t, build(t, octdicomtest.Identity(testRef), c.rep, []byte("%PDF-1.4 test"))[0])
		if got := value(t, ds, tag.DocumentTitle); got != c.title {
			t.Errorf("%s: Document Title %q, want %q", c.rep.ScanPattern, got, c.title)
		}
		if got, _ := codeIn(ds.Elements, tag.ConceptNameCodeSequence); got != (srCode{"18748-4", "LN", "Diagnostic Imaging Report"}) {
			t.Errorf("%s: Concept Name %v, want (18748-4, LN, \"Diagnostic Imaging Report\")", c.rep.ScanPattern, got)
		}
	}
}
