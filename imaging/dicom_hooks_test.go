package imaging

import "io"

// The DICOM reader and writer live in package octdicom, which imports
// imaging; imaging's own tests, which read real scans and write phantoms
// as a device would, reach them through these hooks, which
// dicom_loader_ext_test.go (package imaging_test, which may import
// octdicom) sets before any test runs. The types are the parts of
// octdicom's that imaging's tests use: a type cannot be injected, and
// imaging itself names nothing of DICOM.

// Header is what imaging's tests write into a DICOM object and read back
// of one: octdicom.Header without the device's identity.
type Header struct {
	DeviceSerialNumber string
	SOPInstanceUID     string
	StudyInstanceUID   string
	SeriesInstanceUID  string
	PatientID          string
	// Bits is the stored sample size WriteDICOM uses: 8 or 16 (default).
	Bits int
	// Description is the Series Description WriteDICOM writes.
	Description string
}

// Scan is a scan as octdicom.ParseScan reads it: its volume and header.
type Scan struct {
	Volume *Volume
	Header Header
}

// Declared is what octdicom.PreScan reads of an object: its image's
// geometry and what reading it takes.
type Declared struct {
	Frames, Rows, Cols, Bits int
	Peak                     int64
}

// The hooks: octdicom's functions of the same names.
var (
	ReadDICOM  func(r io.ReadSeeker, size int64) (*Volume, Header, error)
	WriteDICOM func(w io.Writer, v *Volume, h Header) error
	ParseScan  func(r io.ReadSeeker, size int64) (*Scan, error)
	PreScan    func(r io.Reader, size int64) (Declared, error)
)
