package octdicom

import (
	"bytes"
	"fmt"
	"slices"
	"strings"

	"github.com/suyashkumar/dicom"
	"github.com/suyashkumar/dicom/pkg/tag"
	"github.com/suyashkumar/dicom/pkg/uid"
)

// implementationClassUID names octflow as the writer of the objects'
// File Meta Information (a UID derived like the others, from "octflow").
func implementationClassUID() string { return DerivedUID("octflow", "implementation") }

// implementationVersionName is the File Meta Information's writer name
// (SH: at most 16 characters).
const implementationVersionName = "OCTFLOW"

// Elements collects the elements of one object or sequence item, as
// octflow writes its own objects (here and in package results, which
// writes an exam's results): the first error stops it and is kept, and
// EncodePart10 returns it.
type Elements struct {
	els []*dicom.Element
	err error
}

// Add appends t with value v: []string, []int, []float64, []byte or
// [][]*dicom.Element (a sequence), as the DICOM library takes them.
func (e *Elements) Add(t tag.Tag, v any) {
	if e.err != nil {
		return
	}
	el, err := dicom.NewElement(t, v)
	if err != nil {
		e.err = fmt.Errorf("dicom element %v: %w", t, err)
		return
	}
	e.els = append(e.els, el)
}

// Str appends a single-valued text element; "" writes it empty (a Type 2
// attribute).
func (e *Elements) Str(t tag.Tag, v string) { e.Add(t, []string{v}) }

// Multi appends a text element of the values that DICOM joins with a
// backslash, as Identity keeps them.
func (e *Elements) Multi(t tag.Tag, joined string) { e.Add(t, strings.Split(joined, `\`)) }

// Seq appends a sequence of items, each in tag order (none: an empty
// Type 2 sequence); an item's error is e's.
func (e *Elements) Seq(t tag.Tag, items ...*Elements) {
	if e.err != nil {
		return
	}
	out := make([][]*dicom.Element, 0, len(items))
	for _, it := range items {
		if it.err != nil {
			e.err = it.err
			return
		}
		sortElements(it.els)
		out = append(out, it.els)
	}
	e.Add(t, out)
}

// Code is a Code Sequence Macro item: value, scheme, meaning.
func Code(value, scheme, meaning string) *Elements {
	it := &Elements{}
	it.Str(tag.CodeValue, value)
	it.Str(tag.CodingSchemeDesignator, scheme)
	it.Str(tag.CodeMeaning, meaning)
	return it
}

// sortElements puts elements in tag order, as a dataset must be.
func sortElements(els []*dicom.Element) {
	slices.SortStableFunc(els, func(a, b *dicom.Element) int { return a.Tag.Compare(b.Tag) })
}

// EncodePart10 writes the elements as a Part 10 file in Explicit VR
// Little Endian, with its File Meta Information naming sopClass and
// sopInstance (the dataset's own) and octflow as its writer; the
// elements' first error, if any, instead.
func EncodePart10(e *Elements, sopClass, sopInstance string) ([]byte, error) {
	meta := &Elements{}
	meta.Add(tag.FileMetaInformationVersion, []byte{0, 1})
	meta.Str(tag.MediaStorageSOPClassUID, sopClass)
	meta.Str(tag.MediaStorageSOPInstanceUID, sopInstance)
	meta.Str(tag.TransferSyntaxUID, uid.ExplicitVRLittleEndian)
	meta.Str(tag.ImplementationClassUID, implementationClassUID())
	meta.Str(tag.ImplementationVersionName, implementationVersionName)
	if meta.err != nil {
		return nil, meta.err
	}
	if e.err != nil {
		return nil, e.err
	}
	ds := dicom.Dataset{Elements: append(meta.els, e.els...)}
	sortElements(ds.Elements)
	var buf bytes.Buffer
	if err := dicom.Write(&buf, ds); err != nil {
		return nil, fmt.Errorf("write dicom: %w", err)
	}
	return buf.Bytes(), nil
}
