package imaging_test

import (
	"io"

	"octflow/imaging"
	"octflow/octdicom"
)

// init sets the hooks of dicom_hooks_test.go to octdicom's reader and
// writer, so that imaging's tests read and write DICOM as the gateway
// does.
func init() {
	imaging.ReadDICOM = func(r io.ReadSeeker, size int64) (*imaging.Volume, imaging.Header, error) {
		v, h, err := octdicom.ReadDICOM(r, size)
		return v, fromOctdicom(h), err
	}
	imaging.WriteDICOM = func(w io.Writer, v *imaging.Volume, h imaging.Header) error {
		return octdicom.WriteDICOM(w, v, octdicom.Header{
			DeviceSerialNumber: h.DeviceSerialNumber, SOPInstanceUID: h.SOPInstanceUID,
			StudyInstanceUID: h.StudyInstanceUID, SeriesInstanceUID: h.SeriesInstanceUID,
			PatientID: h.PatientID, Bits: h.Bits, Description: h.Description,
		})
	}
	imaging.ParseScan = func(r io.ReadSeeker, size int64) (*imaging.Scan, error) {
		s, err := octdicom.ParseScan(r, size)
		if err != nil {
			return nil, err
		}
		return &imaging.Scan{Volume: s.Volume, Header: fromOctdicom(s.Header)}, nil
	}
	imaging.PreScan = func(r io.Reader, size int64) (imaging.Declared, error) {
		d, err := octdicom.PreScan(r, size)
		return imaging.Declared{Frames: d.Frames, Rows: d.Rows, Cols: d.Cols, Bits: d.Bits, Peak: d.Peak}, err
	}
}

// fromOctdicom is h as imaging's tests see it. octdicom's reader never
// fills the header's Identity (it reads none of it back).
func fromOctdicom(h octdicom.Header) imaging.Header {
	return imaging.Header{
		DeviceSerialNumber: h.DeviceSerialNumber, SOPInstanceUID: h.SOPInstanceUID,
		StudyInstanceUID: h.StudyInstanceUID, SeriesInstanceUID: h.SeriesInstanceUID,
		PatientID: h.PatientID, Bits: h.Bits, Description: h.Description,
	}
}
