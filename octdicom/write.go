package octdicom

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"time"

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

// elems collects the elements of one object or item; the first error
// stops it and is kept.
type elems struct {
	els []*dicom.Element
	err error
}

// add appends t with value v: []string, []int, []float64, []byte or
// [][]*dicom.Element (a sequence), as the DICOM library takes them.
func (e *elems) add(t tag.Tag, v any) {
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

// str appends a single-valued text element; "" writes it empty (a Type 2
// attribute).
func (e *elems) str(t tag.Tag, v string) { e.add(t, []string{v}) }

// multi appends a text element of the values that DICOM joins with a
// backslash, as Identity keeps them.
func (e *elems) multi(t tag.Tag, joined string) { e.add(t, strings.Split(joined, `\`)) }

// seq appends a sequence of items (none: an empty Type 2 sequence).
func (e *elems) seq(t tag.Tag, items ...*elems) {
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
	e.add(t, out)
}

// code is a Code Sequence Macro item: value, scheme, meaning.
func code(value, scheme, meaning string) *elems {
	it := &elems{}
	it.str(tag.CodeValue, value)
	it.str(tag.CodingSchemeDesignator, scheme)
	it.str(tag.CodeMeaning, meaning)
	return it
}

// sortElements puts elements in tag order, as a dataset must be.
func sortElements(els []*dicom.Element) {
	slices.SortStableFunc(els, func(a, b *dicom.Element) int { return a.Tag.Compare(b.Tag) })
}

// encode writes the elements as a Part 10 file in Explicit VR Little
// Endian, with its File Meta Information, its SOP class and instance
// taken from the dataset's.
func encode(e *elems, sopClass, sopInstance string) ([]byte, error) {
	meta := &elems{}
	meta.add(tag.FileMetaInformationVersion, []byte{0, 1})
	meta.str(tag.MediaStorageSOPClassUID, sopClass)
	meta.str(tag.MediaStorageSOPInstanceUID, sopInstance)
	meta.str(tag.TransferSyntaxUID, uid.ExplicitVRLittleEndian)
	meta.str(tag.ImplementationClassUID, implementationClassUID())
	meta.str(tag.ImplementationVersionName, implementationVersionName)
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

// da and tm are a time as DICOM's DA and TM write it, in t's own zone
// (the builder's: the source study's, or UTC).
func da(t time.Time) string { return t.Format("20060102") }
func tm(t time.Time) string { return t.Format("150405") }
