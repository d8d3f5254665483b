package octdicom

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"

	"github.com/suyashkumar/dicom"
	"github.com/suyashkumar/dicom/pkg/tag"
)

// Deidentification says how a scan is de-identified.
type Deidentification struct {
	// PatientID replaces the Patient ID: the site's pseudonym for the
	// patient.
	PatientID string
	// UID maps an instance UID (study, series, SOP instance, frame of
	// reference, referenced instances) to its replacement. It must give
	// the same replacement for the same UID every time, so that scans of
	// one study still belong together, and be keyed per campus (a campus
	// is a tenant), so that one campus's copy cannot be linked to
	// another's by its UIDs.
	UID func(string) string
}

// WriteDeidentified writes the scan de-identified per DICOM PS3.15
// Annex E, the Basic Application Level Confidentiality Profile. It keeps
// only what an OCT image needs and identifies nobody (deidKeep: the
// image's geometry, pixels and their encoding, the acquisition's
// optics, the functional groups, the device's make and model) and drops
// everything else: names, IDs, birth date, age, addresses, accession
// number, other patient IDs, institution and physician names,
// descriptions, comments and labels, request attributes, private tags.
// Attributes the image's IOD requires are replaced, not removed (Annex E
// actions D and Z): those of the patient and study are written empty,
// dates and times, the device's serial number and software versions get
// dummy values wherever they are (deidDummy), a code's meaning is the
// standard's for the code or a dummy (free text a device may fill with
// anything), the Acquisition Context Sequence is empty. Instance UIDs
// are remapped (d.UID); the Patient ID is the pseudonym; Patient
// Identity Removed is YES and the De-identification Method (Code
// Sequence) says how.
//
// Pixel data cannot be cleaned here, so a scan whose Burned In
// Annotation says YES is refused with an error wrapping
// ErrInvalidVolume. The bits of each sample above Bits Stored, which
// carry nothing of the image but may carry anything else (overlays,
// vendor data), are zeroed: the samples read back as the same levels,
// since the reader masks them off too. They are zeroed in the scan's own
// pixel data, which nothing else reads once it is parsed (the Volume
// holds the levels), so the copy takes no memory for a second set; a
// Scan is therefore not to be de-identified by two goroutines at once.
func (s *Scan) WriteDeidentified(w io.Writer, d Deidentification) (err error) {
	defer func() {
		// The encoder trusts what the parser built; an element it
		// cannot handle must not take the gateway down.
		if p := recover(); p != nil {
			err = invalidf("de-identified copy cannot be encoded: %v", p)
		}
	}()
	if burnedIn(s.ds) {
		return invalidf("the scan's Burned In Annotation is YES: its pixels show identifying text, which octflow cannot remove; " +
			"export the scan without burned-in annotation")
	}
	if err := zeroUnusedBits(s.ds); err != nil {
		return err
	}
	keep := deidKeep()
	out := dicom.Dataset{Elements: deidElements(s.ds.Elements, keep, d)}
	add := func(t tag.Tag, v any) error {
		el, err := dicom.NewElement(t, v)
		if err != nil {
			return fmt.Errorf("de-identify: %v: %w", t, err)
		}
		out.Elements = append(out.Elements, el)
		return nil
	}
	method, err := codedEntry("113100", "DCM", "Basic Application Confidentiality Profile")
	if err != nil {
		return err
	}
	for _, a := range []struct {
		t tag.Tag
		v any
	}{
		// Type 2 (present, may be empty) attributes of the patient and study.
		{tag.PatientName, []string{""}},
		{tag.PatientID, []string{d.PatientID}},
		{tag.PatientBirthDate, []string{""}},
		{tag.PatientSex, []string{""}},
		{tag.StudyDate, []string{""}},
		{tag.StudyTime, []string{""}},
		{tag.ReferringPhysicianName, []string{""}},
		{tag.StudyID, []string{""}},
		{tag.AccessionNumber, []string{""}},
		// Type 2 of the Acquisition Context module: empty (action Z).
		{tag.AcquisitionContextSequence, [][]*dicom.Element{}},
		// Type 1 dates of the OPT image: a dummy (Annex E action D).
		{tag.ContentDate, []string{"19000101"}},
		{tag.ContentTime, []string{"000000"}},
		{tag.AcquisitionDateTime, []string{"19000101000000"}},
		{tag.PatientIdentityRemoved, []string{"YES"}},
		// LO: each value at most 64 characters.
		{tag.DeidentificationMethod, []string{
			"PS3.15 Annex E Basic Application Level Confidentiality Profile",
			"Patient ID replaced by a keyed pseudonym",
			"instance UIDs remapped by a hash keyed per campus",
			"burned-in annotation refused; unused pixel bits zeroed",
		}},
		{tag.DeidentificationMethodCodeSequence, [][]*dicom.Element{method}},
		{tag.LongitudinalTemporalInformationModified, []string{"REMOVED"}},
	} {
		if err := add(a.t, a.v); err != nil {
			return err
		}
	}
	sortElements(out.Elements)
	sink := &ioErrWriter{w: w}
	if err := dicom.Write(sink, out); err != nil {
		if sink.err != nil {
			return fmt.Errorf("de-identify: write: %w", sink.err)
		}
		// The writer refused what the parser accepted: the scan holds
		// something no valid DICOM object can (a length, a value).
		return invalidf("de-identified copy cannot be encoded: %v", err)
	}
	return nil
}

// ioErrWriter remembers the first error of w, so that a failure of the
// destination is told apart from an element the encoder refuses.
type ioErrWriter struct {
	w   io.Writer
	err error
}

func (e *ioErrWriter) Write(p []byte) (int, error) {
	n, err := e.w.Write(p)
	if err != nil && e.err == nil {
		e.err = err
	}
	return n, err
}

// deidElements keeps the elements on the keep list, gives those of
// deidDummy their dummy value and a Code Meaning its code's, remaps
// instance UIDs and filters sequence items the same way.
func deidElements(in []*dicom.Element, keep map[tag.Tag]bool, d Deidentification) []*dicom.Element {
	var out []*dicom.Element
	for _, el := range in {
		dummy, replace := deidDummy[el.Tag]
		if el.Tag == tag.CodeMeaning {
			dummy, replace = codeMeaning(in), true
		}
		if replace {
			if r, err := dicom.NewElement(el.Tag, []string{dummy}); err == nil {
				out = append(out, r)
			}
			continue
		}
		if !keep[el.Tag] {
			continue
		}
		cp := *el
		vr, ok := standardVR(el)
		if !ok {
			// A device wrote a value representation the standard does
			// not allow and the value cannot be read as one it does:
			// the attribute is unreadable, so the copy goes without it.
			continue
		}
		cp.RawValueRepresentation = vr
		switch el.Value.ValueType() {
		case dicom.Sequences:
			var items [][]*dicom.Element
			for _, item := range el.Value.GetValue().([]*dicom.SequenceItemValue) {
				items = append(items, deidElements(item.GetValue().([]*dicom.Element), keep, d))
			}
			v, err := dicom.NewValue(items)
			if err != nil {
				continue
			}
			cp.Value = v
		case dicom.Strings:
			if el.RawValueRepresentation != "UI" || el.Tag.Group == 0x0002 && el.Tag != tag.MediaStorageSOPInstanceUID {
				break
			}
			var uids []string
			for _, u := range el.Value.GetValue().([]string) {
				u = strings.TrimRight(u, "\x00 ")
				// Well-known UIDs (classes, transfer syntaxes, coding
				// schemes) identify no instance and stay.
				if !strings.HasPrefix(u, "1.2.840.10008.") {
					u = d.UID(u)
				}
				uids = append(uids, u)
			}
			v, err := dicom.NewValue(uids)
			if err != nil {
				continue
			}
			cp.Value = v
		}
		cp.ValueLength = 0 // the writer computes it
		out = append(out, &cp)
	}
	return out
}

// deidDummy are the attributes a device may fill with anything, which
// the IOD requires (Type 1, 1C or 2) wherever they are, with the value
// that replaces theirs (PS3.15 Annex E actions D and Z).
var deidDummy = map[tag.Tag]string{
	// Enhanced General Equipment (Type 1 in the OPT image).
	tag.DeviceSerialNumber: "REMOVED",
	tag.SoftwareVersions:   "REMOVED",
	// Frame Content of each frame's functional groups (Type 1C).
	tag.FrameAcquisitionDateTime: "19000101000000",
	tag.FrameReferenceDateTime:   "19000101000000",
	// Frame of Reference (Type 2): free text.
	tag.PositionReferenceIndicator: "",
}

// codeMeanings are the meanings of the codes an OCT scan carries, by
// coding scheme and code value, as the standard's resources give them.
var codeMeanings = map[[2]string]string{
	{"SCT", "5665001"}:   "Retina",
	{"SRT", "T-AA610"}:   "Retina",
	{"SCT", "81745001"}:  "Eye",
	{"SRT", "T-AA000"}:   "Eye",
	{"SCT", "24028007"}:  "Right",
	{"SCT", "7771000"}:   "Left",
	{"SCT", "51440002"}:  "Right and left",
	{"SCT", "392012008"}: "Optical Coherence Tomography Scanner",
	{"DCM", "113100"}:    "Basic Application Confidentiality Profile",
}

// codeMeaning is the Code Meaning of the coded entry item holds: the
// standard's for its code when codeMeanings has it, else a dummy. A
// device's own is free text (Type 1, so replaced rather than removed).
func codeMeaning(item []*dicom.Element) string {
	var code [2]string
	for _, el := range item {
		v, ok := el.Value.GetValue().([]string)
		if !ok || len(v) == 0 {
			continue
		}
		switch el.Tag {
		case tag.CodingSchemeDesignator:
			code[0] = strings.TrimSpace(v[0])
		case tag.CodeValue:
			code[1] = strings.TrimSpace(v[0])
		}
	}
	if m, ok := codeMeanings[code]; ok {
		return m
	}
	return "REMOVED"
}

// burnedIn reports whether the object says, anywhere, that its pixels
// show identifying text (Burned In Annotation YES).
func burnedIn(ds dicom.Dataset) bool {
	for it := ds.FlatStatefulIterator(); it.HasNext(); {
		el := it.Next()
		if el.Tag != tag.BurnedInAnnotation {
			continue
		}
		v, _ := el.Value.GetValue().([]string)
		for _, x := range v {
			if strings.EqualFold(strings.TrimSpace(strings.TrimRight(x, "\x00")), "YES") {
				return true
			}
		}
	}
	return false
}

// zeroUnusedBits clears, in the native pixel data of ds, the bits of
// each sample that Bits Stored leaves unused: exactly those the reader
// masks off (readPixelEncoding), so every sample keeps its level.
func zeroUnusedBits(ds dicom.Dataset) error {
	enc, err := readPixelEncoding(ds)
	if err != nil {
		return err
	}
	el, err := ds.FindElementByTag(tag.PixelData)
	if err != nil {
		return nil
	}
	pix, ok := el.Value.GetValue().(dicom.PixelDataInfo)
	if !ok || pix.IsEncapsulated {
		return nil
	}
	for _, fr := range pix.Frames {
		nf, err := fr.GetNativeFrame()
		if err != nil {
			return invalidf("pixel data: %v", err)
		}
		switch raw := nf.RawDataSlice().(type) {
		case []uint8:
			if m := uint8(enc.mask); uint32(m) == enc.mask && m != 0xff {
				for i := range raw {
					raw[i] &= m
				}
			}
		case []uint16:
			if m := uint16(enc.mask); uint32(m) == enc.mask && m != 0xffff {
				for i := range raw {
					raw[i] &= m
				}
			}
		default:
			return invalidf("pixel data of unsupported sample type %T", raw)
		}
	}
	return nil
}

// standardVR is the value representation el is written with: its own
// when the standard allows it for the tag, else the standard's first one
// whose encoding holds el's value (a device labelled an unsigned short
// SS, say). ok is false when no allowed one does.
func standardVR(el *dicom.Element) (vr string, ok bool) {
	info, err := tag.Find(el.Tag)
	if err != nil || slices.Contains(info.VRs, el.RawValueRepresentation) {
		return el.RawValueRepresentation, true
	}
	for _, vr := range info.VRs {
		if valueFits(el, vr) {
			return vr, true
		}
	}
	return "", false
}

// valueFits reports whether el's value is of the kind a value of
// representation vr is encoded from.
func valueFits(el *dicom.Element, vr string) bool {
	got := el.Value.ValueType()
	switch vr {
	case "US", "UL", "SS", "SL", "AT":
		return got == dicom.Ints
	case "SQ":
		return got == dicom.Sequences
	case "OB", "OW":
		if el.Tag == tag.PixelData {
			return got == dicom.PixelData
		}
		return got == dicom.Bytes
	case "UN":
		return got == dicom.Bytes || got == dicom.Sequences
	case "FL", "FD":
		return got == dicom.Floats
	case "OF", "OD", "OL", "OV", "SV", "UV":
		return false // the encoder writes none of these
	default:
		return got == dicom.Strings
	}
}

// codedEntry is one coded-entry sequence item.
func codedEntry(value, scheme, meaning string) ([]*dicom.Element, error) {
	var item []*dicom.Element
	for _, a := range []struct {
		t tag.Tag
		v string
	}{{tag.CodeValue, value}, {tag.CodingSchemeDesignator, scheme}, {tag.CodeMeaning, meaning}} {
		el, err := dicom.NewElement(a.t, []string{a.v})
		if err != nil {
			return nil, fmt.Errorf("de-identify: %w", err)
		}
		item = append(item, el)
	}
	return item, nil
}

// deidKeep is the allow-list of attributes a de-identified scan keeps,
// by DICOM keyword. Anything absent is dropped, so an attribute a device
// adds (free text, a private tag, a new identifier) can never carry PHI
// through. UIDs on it are remapped; none of the rest identifies a person.
var deidKeep = sync.OnceValue(func() map[tag.Tag]bool {
	keep := map[tag.Tag]bool{}
	for _, name := range []string{
		// File meta information (instance UID remapped).
		"FileMetaInformationVersion", "MediaStorageSOPClassUID", "MediaStorageSOPInstanceUID", "TransferSyntaxUID",
		"ImplementationClassUID", "ImplementationVersionName",
		// SOP, series, frame of reference, equipment: what and how, not who.
		"SpecificCharacterSet", "SOPClassUID", "SOPInstanceUID", "ImageType", "Modality",
		"StudyInstanceUID", "SeriesInstanceUID", "SeriesNumber", "InstanceNumber", "AcquisitionNumber",
		"FrameOfReferenceUID", "Manufacturer", "ManufacturerModelName",
		"Laterality", "ImageLaterality", "AcquisitionDuration", "FrameAcquisitionDuration",
		// Image pixel and its encoding (normalisation reads these).
		"SamplesPerPixel", "PhotometricInterpretation", "Rows", "Columns", "BitsAllocated", "BitsStored", "HighBit",
		"PixelRepresentation", "PlanarConfiguration", "NumberOfFrames", "PixelData", "PixelSpacing", "SliceThickness",
		"SpacingBetweenSlices", "RescaleIntercept", "RescaleSlope", "RescaleType", "WindowCenter", "WindowWidth",
		"VOILUTFunction", "PresentationLUTShape", "LossyImageCompression", "BurnedInAnnotation",
		// Multi-frame functional groups and dimensions.
		"SharedFunctionalGroupsSequence", "PerFrameFunctionalGroupsSequence", "PixelMeasuresSequence",
		"FrameContentSequence", "StackID", "InStackPositionNumber", "DimensionIndexValues", "PlanePositionSequence",
		"ImagePositionPatient", "PlaneOrientationSequence", "ImageOrientationPatient", "FrameAnatomySequence",
		"FrameLaterality", "DimensionOrganizationSequence", "DimensionOrganizationUID", "DimensionIndexSequence",
		"DimensionIndexPointer", "FunctionalGroupPointer",
		"OphthalmicFrameLocationSequence", "ReferenceCoordinates", "DepthOfTransverseImage", "OphthalmicImageOrientation",
		"ReferencedSOPClassUID", "ReferencedSOPInstanceUID",
		// Coded entries (anatomy, device type) and the acquisition's optics.
		"AnatomicRegionSequence", "AnatomicRegionModifierSequence", "AcquisitionDeviceTypeCodeSequence",
		"LightPathFilterTypeStackCodeSequence", "CodeValue", "CodingSchemeDesignator", "CodingSchemeVersion", "CodeMeaning",
		"AxialLengthOfTheEye", "HorizontalFieldOfView", "EmmetropicMagnification", "IntraOcularPressure", "PupilDilated",
		"DegreeOfDilation", "RefractiveStateSequence", "SphericalLensPower", "CylinderLensPower", "CylinderAxis",
		"DetectorType", "IlluminationWaveLength", "IlluminationPower", "IlluminationBandwidth",
		"DepthSpatialResolution", "MaximumDepthDistortion", "AlongScanSpatialResolution", "MaximumAlongScanDistortion",
		"AcrossScanSpatialResolution", "MaximumAcrossScanDistortion",
		// The agent a dilated pupil was dilated with (Type 2C when Pupil
		// Dilated is YES), the vertex distance of the optics.
		"MydriaticAgentSequence", "MydriaticAgentCodeSequence", "MydriaticAgentConcentration",
		"MydriaticAgentConcentrationUnitsSequence", "VertexDistance",
		// A scan split over several instances (concatenation, UIDs
		// remapped) and the synchronization of its frames' times; the
		// free-text trigger source and the time source's address are not
		// kept.
		"ConcatenationUID", "InConcatenationNumber", "InConcatenationTotalNumber", "ConcatenationFrameOffsetNumber",
		"SOPInstanceUIDOfConcatenationSource", "SynchronizationFrameOfReferenceUID", "SynchronizationTrigger",
		"AcquisitionTimeSynchronized", "SynchronizationChannel",
		// The scan pattern, and what it brings: the anatomic reference
		// point the scan is placed by and whether the frames make a
		// volume.
		"ScanPatternTypeCodeSequence", "OphthalmicVolumetricPropertiesFlag",
		"OphthalmicAnatomicReferencePointXCoordinate", "OphthalmicAnatomicReferencePointYCoordinate",
	} {
		info, err := tag.FindByName(name)
		if err != nil {
			panic("imaging: de-identification keeps an unknown attribute " + name) // a typo in the list above
		}
		keep[info.Tag] = true
	}
	return keep
})
