package octdicom

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/suyashkumar/dicom"
	"github.com/suyashkumar/dicom/pkg/frame"
	"github.com/suyashkumar/dicom/pkg/tag"

	"octflow/imaging"
)

// deviceScan writes an OPT image of a small volume as a device would,
// carrying extra elements besides (replacing the image's own of the same
// tag). bits is the sample size (8 or 16).
func deviceScan(t *testing.T, bits int, extra ...*dicom.Element) ([]byte, *imaging.Volume) {
	t.Helper()
	v := imaging.NewVolume(2, 16, 16, imaging.Spacing{AxialUm: 3.9, LateralUm: 11.7, FrameUm: 120})
	for i := range v.Data {
		v.Data[i] = float32(20 + i%200)
	}
	v.Laterality = "OD"
	var els []*dicom.Element
	for _, e := range otElements(v, Header{SOPInstanceUID: "1.3.6.1.4.1.9590.100.1.2.1111", StudyInstanceUID: "1.3.6.1.4.1.9590.100.1.2.2222",
		SeriesInstanceUID: "1.3.6.1.4.1.9590.100.1.2.3333", PatientID: "MRN-4471982", Bits: bits}) {
		if slices.ContainsFunc(extra, func(x *dicom.Element) bool { return x.Tag == e.t }) {
			continue
		}
		els = append(els, mustElement(t, e.t, e.data))
	}
	els = append(els, extra...)
	sortElements(els)
	var buf bytes.Buffer
	if err := dicom.Write(&buf, dicom.Dataset{Elements: els}); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), v
}

func mustElement(t *testing.T, tg tag.Tag, v any) *dicom.Element {
	t.Helper()
	el, err := dicom.NewElement(tg, v)
	if err != nil {
		t.Fatalf("element %v: %v", tg, err)
	}
	return el
}

// txt is a text element of the standard's VR for its tag.
func txt(t *testing.T, tg tag.Tag, v ...string) *dicom.Element { return mustElement(t, tg, v) }

// sq is a sequence element of items.
func sq(t *testing.T, tg tag.Tag, items ...[]*dicom.Element) *dicom.Element {
	return mustElement(t, tg, items)
}

func itemOf(els ...*dicom.Element) []*dicom.Element { return els }

// private is a private element (group 0009) of VR LO.
func private(t *testing.T, element uint16, v string) *dicom.Element {
	t.Helper()
	val, err := dicom.NewValue([]string{v})
	if err != nil {
		t.Fatal(err)
	}
	return &dicom.Element{Tag: tag.Tag{Group: 0x0009, Element: element}, ValueRepresentation: tag.VRString, RawValueRepresentation: "LO", Value: val}
}

// deidentify parses raw and writes its de-identified copy.
func deidentify(t *testing.T, raw []byte) ([]byte, error) {
	t.Helper()
	scan, err := ParseScan(bytes.NewReader(raw), int64(len(raw)))
	if err != nil {
		t.Fatalf("the device's scan does not parse: %v", err)
	}
	var out bytes.Buffer
	err = scan.WriteDeidentified(&out, Deidentification{PatientID: "pt-5f3c9a", UID: func(u string) string { return "2.25.4242" }})
	return out.Bytes(), err
}

// profileCase is one thing PS3.15 Annex E's Basic Profile removes or
// replaces, as a device writes it: the elements that carry it and the
// values of theirs no copy may hold.
type profileCase struct {
	name    string
	els     func(t *testing.T) []*dicom.Element
	secrets []string
}

func profileCases() []profileCase {
	one := func(tg tag.Tag, v string) func(t *testing.T) []*dicom.Element {
		return func(t *testing.T) []*dicom.Element { return []*dicom.Element{txt(t, tg, v)} }
	}
	return []profileCase{
		{"Patient ID", one(tag.PatientID, "MRN-4471982"), []string{"MRN-4471982"}},
		{"Patient's Name", one(tag.PatientName, "DOE^JANE^Q"), []string{"DOE^JANE", "JANE"}},
		{"Patient's Address", one(tag.PatientAddress, "12 Acacia Avenue, Leeds"), []string{"Acacia", "Leeds"}},
		{"Patient's Age", one(tag.PatientAge, "067Y"), []string{"067Y"}},
		{"Patient's Birth Date", one(tag.PatientBirthDate, "19580214"), []string{"19580214"}},
		{"Patient's Birth Time", one(tag.PatientBirthTime, "073512"), []string{"073512"}},
		{"Patient's Sex", one(tag.PatientSex, "F"), nil}, // one letter: checked by value below
		{"Patient's Size and Weight", func(t *testing.T) []*dicom.Element {
			return []*dicom.Element{txt(t, tag.PatientSize, "1.7318"), txt(t, tag.PatientWeight, "83.517")}
		}, []string{"1.7318", "83.517"}},
		{"Patient's Telephone Numbers", one(tag.PatientTelephoneNumbers, "+44 113 496 0000"), []string{"496 0000"}},
		{"Patient Comments", one(tag.PatientComments, "lives with her daughter Sarah"), []string{"daughter Sarah"}},
		{"Additional Patient History", one(tag.AdditionalPatientHistory, "diabetic since 1990"), []string{"diabetic"}},
		{"Ethnic Group and Occupation", func(t *testing.T) []*dicom.Element {
			return []*dicom.Element{txt(t, tag.EthnicGroup, "Cornish"), txt(t, tag.Occupation, "Lighthouse keeper")}
		}, []string{"Cornish", "Lighthouse"}},
		{"Other Patient IDs", one(tag.OtherPatientIDs, "NHS-943-476-5919"), []string{"NHS-943-476-5919"}},
		{"Other Patient IDs Sequence", func(t *testing.T) []*dicom.Element {
			return []*dicom.Element{sq(t, tag.OtherPatientIDsSequence, itemOf(txt(t, tag.PatientID, "MRN-OTHER-7781"),
				txt(t, tag.IssuerOfPatientID, "Leeds General MRN")))}
		}, []string{"MRN-OTHER-7781", "Leeds General"}},
		{"Issuer of Patient ID", one(tag.IssuerOfPatientID, "St Elsewhere MRN"), []string{"St Elsewhere"}},
		{"Institution Name", one(tag.InstitutionName, "St Elsewhere Eye Hospital"), []string{"Elsewhere"}},
		{"Institution Address", one(tag.InstitutionAddress, "1 Hospital Road, Boston"), []string{"Hospital Road"}},
		{"Institutional Department Name", one(tag.InstitutionalDepartmentName, "Retina Clinic B"), []string{"Retina Clinic B"}},
		{"Station Name", one(tag.StationName, "OCT-ROOM-4"), []string{"OCT-ROOM-4"}},
		{"Referring Physician's Name", one(tag.ReferringPhysicianName, "HOUSE^GREGORY"), []string{"HOUSE", "GREGORY"}},
		{"Referring Physician's Address", one(tag.ReferringPhysicianAddress, "221B Baker Street"), []string{"Baker Street"}},
		{"Performing and Reading Physicians", func(t *testing.T) []*dicom.Element {
			return []*dicom.Element{txt(t, tag.PerformingPhysicianName, "WATSON^JOHN"),
				txt(t, tag.NameOfPhysiciansReadingStudy, "QUINN^MICHAELA"), txt(t, tag.PhysiciansOfRecord, "KILDARE^JAMES")}
		}, []string{"WATSON", "QUINN", "KILDARE"}},
		{"Operators' Name", one(tag.OperatorsName, "RATCHED^MILDRED"), []string{"RATCHED"}},
		{"Accession Number", one(tag.AccessionNumber, "ACC-20261130-0042"), []string{"ACC-20261130-0042"}},
		{"Study ID", one(tag.StudyID, "STUDY-8841"), []string{"STUDY-8841"}},
		{"Study Description", one(tag.StudyDescription, "Jane Doe follow-up"), []string{"Jane Doe"}},
		{"Series Description", one(tag.SeriesDescription, "Macula cube, Mrs Doe"), []string{"Mrs Doe"}},
		{"Protocol Name", one(tag.ProtocolName, "Doe research protocol"), []string{"Doe research"}},
		{"Image Comments", one(tag.ImageComments, "patient anxious, call husband Tom"), []string{"husband Tom"}},
		{"Admitting Diagnoses Description", one(tag.AdmittingDiagnosesDescription, "suspected glaucoma"), []string{"suspected glaucoma"}},
		{"Performed Procedure Step", func(t *testing.T) []*dicom.Element {
			return []*dicom.Element{txt(t, tag.PerformedProcedureStepID, "PPS-99812"),
				txt(t, tag.PerformedProcedureStepDescription, "OCT for Jane")}
		}, []string{"PPS-99812", "OCT for Jane"}},
		{"Request Attributes Sequence", func(t *testing.T) []*dicom.Element {
			return []*dicom.Element{sq(t, tag.RequestAttributesSequence, itemOf(txt(t, tag.RequestedProcedureID, "RP-5512"),
				txt(t, tag.ScheduledProcedureStepID, "SPS-7781"), txt(t, tag.AccessionNumber, "ACC-REQ-0099"),
				txt(t, tag.RequestedProcedureDescription, "OCT macula, Doe")))}
		}, []string{"RP-5512", "SPS-7781", "ACC-REQ-0099", "macula, Doe"}},
		{"Software Versions", one(tag.SoftwareVersions, "HEYEX 6.16 licensed to St Mungo"), []string{"St Mungo", "HEYEX"}},
		{"Device Serial Number", one(tag.DeviceSerialNumber, "SN-77-1234"), []string{"SN-77-1234"}},
		{"Code Meaning of a known code", func(t *testing.T) []*dicom.Element {
			return []*dicom.Element{sq(t, tag.AnatomicRegionSequence, itemOf(txt(t, tag.CodeValue, "5665001"),
				txt(t, tag.CodingSchemeDesignator, "SCT"), txt(t, tag.CodeMeaning, "Retina of Jane Doe")))}
		}, []string{"of Jane Doe"}},
		{"Code Meaning of a device's own code", func(t *testing.T) []*dicom.Element {
			return []*dicom.Element{sq(t, tag.AcquisitionDeviceTypeCodeSequence, itemOf(txt(t, tag.CodeValue, "X-42"),
				txt(t, tag.CodingSchemeDesignator, "99ACME"), txt(t, tag.CodeMeaning, "Scanner in Dr Who's room")))}
		}, []string{"Dr Who"}},
		{"Acquisition Context Sequence", func(t *testing.T) []*dicom.Element {
			return []*dicom.Element{sq(t, tag.AcquisitionContextSequence, itemOf(txt(t, tag.ValueType, "TEXT"),
				txt(t, tag.TextValue, "patient blinked, Jane")))}
		}, []string{"blinked"}},
		{"dates and times", func(t *testing.T) []*dicom.Element {
			return []*dicom.Element{txt(t, tag.StudyDate, "20261130"), txt(t, tag.SeriesDate, "20261129"),
				txt(t, tag.AcquisitionDate, "20261128"), txt(t, tag.ContentDate, "20261127"), txt(t, tag.StudyTime, "093017.123"),
				txt(t, tag.AcquisitionDateTime, "20261126093017")}
		}, []string{"20261130", "20261129", "20261128", "20261127", "093017", "20261126"}},
		{"frame acquisition datetimes and comments", func(t *testing.T) []*dicom.Element {
			frame := func(at, ref, comment string) []*dicom.Element {
				return itemOf(sq(t, tag.FrameContentSequence, itemOf(txt(t, tag.FrameAcquisitionDateTime, at),
					txt(t, tag.FrameReferenceDateTime, ref), txt(t, tag.FrameComments, comment))))
			}
			return []*dicom.Element{sq(t, tag.PerFrameFunctionalGroupsSequence,
				frame("20261125093018", "20261124093019", "Jane moved"), frame("20261125093020", "20261124093021", "Jane moved again"))}
		}, []string{"2026112", "Jane moved"}},
		{"Dimension Description Label", func(t *testing.T) []*dicom.Element {
			return []*dicom.Element{sq(t, tag.DimensionIndexSequence, itemOf(mustElement(t, tag.DimensionIndexPointer, []int{0x0020, 0x9057}),
				txt(t, tag.DimensionDescriptionLabel, "stack of Jane Doe")))}
		}, []string{"stack of Jane"}},
		{"Position Reference Indicator", one(tag.PositionReferenceIndicator, "Jane's left eye"), []string{"left eye"}},
		{"private attributes", func(t *testing.T) []*dicom.Element {
			return []*dicom.Element{private(t, 0x0010, "ACME PRIVATE 1.0"), private(t, 0x1001, "DOE JANE PRIVATE")}
		}, []string{"ACME PRIVATE", "DOE JANE"}},
	}
}

// TestDeidentificationRemovesWhatTheBasicProfileRemoves: a scan carrying
// any attribute of PS3.15 Annex E's Basic Application Level
// Confidentiality Profile that octflow must remove or replace — one at a
// time, then all at once — de-identifies to a copy that holds none of
// its values anywhere in its bytes and that imaging reads back as the
// same volume.
func TestDeidentificationRemovesWhatTheBasicProfileRemoves(t *testing.T) {
	cases := profileCases()
	check := func(t *testing.T, els []*dicom.Element, secrets []string) {
		raw, v := deviceScan(t, 16, els...)
		for _, s := range secrets {
			if !bytes.Contains(raw, []byte(s)) {
				t.Fatalf("the device's scan does not carry %q: the case tests nothing", s)
			}
		}
		out, err := deidentify(t, raw)
		if err != nil {
			t.Fatal(err)
		}
		v, _, err = ReadDICOM(bytes.NewReader(raw), int64(len(raw)))
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range secrets {
			if bytes.Contains(out, []byte(s)) {
				t.Errorf("the de-identified copy still holds %q", s)
			}
		}
		back, h, err := ReadDICOM(bytes.NewReader(out), int64(len(out)))
		if err != nil {
			t.Fatalf("imaging does not read the de-identified copy: %v", err)
		}
		if h.PatientID != "pt-5f3c9a" || h.SOPInstanceUID != "2.25.4242" {
			t.Errorf("read back header %+v", h)
		}
		if back.Frames != v.Frames || back.Rows != v.Rows || back.Cols != v.Cols || back.Spacing != v.Spacing ||
			back.Laterality != v.Laterality || !slices.Equal(back.Data, v.Data) {
			t.Errorf("the copy reads back as another volume: %d×%d×%d %+v %s, want %d×%d×%d %+v %s", back.Frames, back.Rows, back.Cols,
				back.Spacing, back.Laterality, v.Frames, v.Rows, v.Cols, v.Spacing, v.Laterality)
		}
		ds, err := dicom.Parse(bytes.NewReader(out), int64(len(out)), nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, tg := range []tag.Tag{tag.PatientSex, tag.PatientName, tag.PatientBirthDate} {
			if got := str(ds, tg); got != "" {
				t.Errorf("%v is %q, want empty", tg, got)
			}
		}
	}
	var all []*dicom.Element
	var secrets []string
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			els := c.els(t)
			all = append(all, els...)
			secrets = append(secrets, c.secrets...)
			check(t, els, c.secrets)
		})
	}
	t.Run("all at once", func(t *testing.T) {
		if len(all) == 0 {
			t.Skip("no case ran")
		}
		check(t, all, secrets)
	})
}

// TestDeidentifiedCopyReplacesWhatItsIODRequires: what the OPT image
// requires is replaced by a dummy or emptied, never removed (PS3.15
// actions D and Z), and what the copy writes itself fits its VR.
func TestDeidentifiedCopyReplacesWhatItsIODRequires(t *testing.T) {
	var all []*dicom.Element
	for _, c := range profileCases() {
		all = append(all, c.els(t)...)
	}
	raw, _ := deviceScan(t, 16, all...)
	out, err := deidentify(t, raw)
	if err != nil {
		t.Fatal(err)
	}
	ds, err := dicom.Parse(bytes.NewReader(out), int64(len(out)), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		tag  tag.Tag
		want string // "" for present and empty
	}{
		{tag.DeviceSerialNumber, "REMOVED"},              // Type 1, Enhanced General Equipment
		{tag.SoftwareVersions, "REMOVED"},                // Type 1, Enhanced General Equipment
		{tag.FrameAcquisitionDateTime, "19000101000000"}, // Type 1C, Frame Content
		{tag.FrameReferenceDateTime, "19000101000000"},   // Type 1C, Frame Content
		{tag.ContentDate, "19000101"},
		{tag.AcquisitionDateTime, "19000101000000"},
		{tag.PositionReferenceIndicator, ""}, // Type 2, Frame of Reference
		{tag.AccessionNumber, ""},
		{tag.StudyID, ""},
		{tag.PatientIdentityRemoved, "YES"},
	} {
		if el := findNested(ds, c.tag); el == nil {
			t.Errorf("the copy has no %v", c.tag)
		} else if got := str(ds, c.tag); got != c.want {
			t.Errorf("%v is %q, want %q", c.tag, got, c.want)
		}
	}
	frames := findNested(ds, tag.PerFrameFunctionalGroupsSequence)
	if frames == nil || len(frames.Value.GetValue().([]*dicom.SequenceItemValue)) != 2 {
		t.Error("the copy lost the per-frame functional groups")
	}
	acq, err := ds.FindElementByTag(tag.AcquisitionContextSequence)
	if err != nil {
		t.Error("the copy has no Acquisition Context Sequence (Type 2)")
	} else if n := len(acq.Value.GetValue().([]*dicom.SequenceItemValue)); n != 0 {
		t.Errorf("the Acquisition Context Sequence has %d items, want none", n)
	}
	var meanings []string
	for it := ds.FlatStatefulIterator(); it.HasNext(); {
		if el := it.Next(); el.Tag == tag.CodeMeaning {
			meanings = append(meanings, el.Value.GetValue().([]string)[0])
		}
	}
	slices.Sort(meanings)
	if want := []string{"Basic Application Confidentiality Profile", "REMOVED", "Retina"}; !slices.Equal(meanings, want) {
		t.Errorf("code meanings %q, want %q", meanings, want)
	}
	method := strs(ds, tag.DeidentificationMethod)
	if len(method) == 0 {
		t.Error("no De-identification Method")
	}
	for _, m := range method {
		if len(m) > 64 {
			t.Errorf("De-identification Method value of %d characters (LO holds 64): %q", len(m), m)
		}
	}
}

// TestBurnedInAnnotationIsRefused: pixels that show identifying text
// cannot be cleaned, so such a scan is refused as invalid (422 at the
// gateway) and no copy is written.
func TestBurnedInAnnotationIsRefused(t *testing.T) {
	for _, c := range []struct {
		name    string
		els     func(t *testing.T) []*dicom.Element
		refused bool
	}{
		{"absent", func(*testing.T) []*dicom.Element { return nil }, false},
		{"NO", func(t *testing.T) []*dicom.Element { return []*dicom.Element{txt(t, tag.BurnedInAnnotation, "NO")} }, false},
		{"YES", func(t *testing.T) []*dicom.Element { return []*dicom.Element{txt(t, tag.BurnedInAnnotation, "YES")} }, true},
		{"yes, padded", func(t *testing.T) []*dicom.Element { return []*dicom.Element{txt(t, tag.BurnedInAnnotation, " yes ")} }, true},
		{"YES in a functional group", func(t *testing.T) []*dicom.Element {
			return []*dicom.Element{sq(t, tag.SharedFunctionalGroupsSequence, itemOf(txt(t, tag.BurnedInAnnotation, "YES")))}
		}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			raw, _ := deviceScan(t, 16, c.els(t)...)
			out, err := deidentify(t, raw)
			if !c.refused {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, imaging.ErrInvalidVolume) || !strings.Contains(err.Error(), "Burned In Annotation") {
				t.Fatalf("got %v, want an invalid volume that names Burned In Annotation", err)
			}
			if len(out) != 0 {
				t.Errorf("a refused scan's copy has %d bytes", len(out))
			}
		})
	}
}

// TestUnusedPixelBitsAreZeroed: the bits of a sample above Bits Stored
// may carry anything (an overlay, a device's data); the copy holds them
// zero, and reads back as the same levels.
func TestUnusedPixelBitsAreZeroed(t *testing.T) {
	for _, c := range []struct {
		allocated, stored int
		signed            bool
	}{{16, 12, false}, {16, 10, false}, {16, 12, true}, {8, 6, false}, {16, 16, false}, {8, 8, false}} {
		t.Run(fmt.Sprintf("%d of %d bits, signed %v", c.stored, c.allocated, c.signed), func(t *testing.T) {
			rep := 0
			if c.signed {
				rep = 1
			}
			// Levels in the stored bits, garbage (or, signed, the sign) above.
			high := uint32(0xa5a5) &^ (1<<c.stored - 1) & (1<<c.allocated - 1)
			sample := func(i int) uint32 {
				x := uint32(i*37) & (1<<c.stored - 1)
				if c.signed && x&(1<<(c.stored-1)) != 0 {
					return x | (1<<c.allocated-1)&^(1<<c.stored-1) // sign-extended
				}
				return x | high
			}
			var frames []*frame.Frame
			for f := range 2 {
				if c.allocated == 8 {
					raw := make([]uint8, 16*16)
					for i := range raw {
						raw[i] = uint8(sample(f*256 + i))
					}
					frames = append(frames, &frame.Frame{NativeData: &frame.NativeFrame[uint8]{InternalBitsPerSample: 8,
						InternalRows: 16, InternalCols: 16, InternalSamplesPerPixel: 1, RawData: raw}})
					continue
				}
				raw := make([]uint16, 16*16)
				for i := range raw {
					raw[i] = uint16(sample(f*256 + i))
				}
				frames = append(frames, &frame.Frame{NativeData: &frame.NativeFrame[uint16]{InternalBitsPerSample: 16,
					InternalRows: 16, InternalCols: 16, InternalSamplesPerPixel: 1, RawData: raw}})
			}
			raw, _ := deviceScan(t, c.allocated, mustElement(t, tag.BitsStored, []int{c.stored}),
				mustElement(t, tag.HighBit, []int{c.stored - 1}), mustElement(t, tag.PixelRepresentation, []int{rep}),
				mustElement(t, tag.PixelData, dicom.PixelDataInfo{Frames: frames}))
			before, _, err := ReadDICOM(bytes.NewReader(raw), int64(len(raw)))
			if err != nil {
				t.Fatal(err)
			}
			out, err := deidentify(t, raw)
			if err != nil {
				t.Fatal(err)
			}
			after, _, err := ReadDICOM(bytes.NewReader(out), int64(len(out)))
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(before.Data, after.Data) {
				t.Error("the copy's samples read back as other levels")
			}
			ds, err := dicom.Parse(bytes.NewReader(out), int64(len(out)), nil)
			if err != nil {
				t.Fatal(err)
			}
			el, err := ds.FindElementByTag(tag.PixelData)
			if err != nil {
				t.Fatal(err)
			}
			set := 0
			for _, fr := range el.Value.GetValue().(dicom.PixelDataInfo).Frames {
				nf, err := fr.GetNativeFrame()
				if err != nil {
					t.Fatal(err)
				}
				for i := range nf.Rows() * nf.Cols() {
					px, err := nf.GetPixel(i%nf.Cols(), i/nf.Cols())
					if err != nil {
						t.Fatal(err)
					}
					if uint32(px[0])>>c.stored != 0 {
						set++
					}
				}
			}
			if set != 0 {
				t.Errorf("%d samples of the copy have bits above Bits Stored set", set)
			}
		})
	}
}
