package intake

import "testing"

// TestParseContentTypeTakesBareParameters: the parameters senders write
// bare although they hold a slash are read as if quoted; what is
// broken beyond that stays an error.
func TestParseContentTypeTakesBareParameters(t *testing.T) {
	for _, c := range []struct {
		in, typ, boundary string
		ok                bool
	}{
		{`multipart/related; type="application/dicom"; boundary=abc`, "application/dicom", "abc", true},
		{`multipart/related; type=application/dicom; boundary=abc`, "application/dicom", "abc", true},
		{`multipart/related;type=application/dicom;boundary=a/b`, "application/dicom", "a/b", true},
		{`multipart/related; boundary="x y"; type=application/dicom`, "application/dicom", "x y", true},
		{`multipart/related; type=application/dicom; type=text/plain`, "", "", false},
		{`multipart/related; type="application/dicom`, "", "", false},
		{`not a media type`, "", "", false},
	} {
		mediaType, params, err := parseContentType(c.in)
		if (err == nil) != c.ok {
			t.Errorf("%s: error %v, want ok %v", c.in, err, c.ok)
			continue
		}
		if c.ok && (mediaType != "multipart/related" || params["type"] != c.typ || params["boundary"] != c.boundary) {
			t.Errorf("%s: %s %v, want type %s, boundary %s", c.in, mediaType, params, c.typ, c.boundary)
		}
	}
}
