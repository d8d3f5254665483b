package api

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

// TestAcceptsDICOMJSON: the answer is DICOM JSON, acceptable unless the
// client's Accept rules it out.
func TestAcceptsDICOMJSON(t *testing.T) {
	for _, c := range []struct {
		accept []string
		want   bool
	}{
		{nil, true},
		{[]string{"application/dicom+json"}, true},
		{[]string{"application/json"}, true},
		{[]string{"*/*"}, true},
		{[]string{"application/*;q=0.2"}, true},
		{[]string{"application/dicom+xml", "application/dicom+json"}, true},
		{[]string{"application/dicom+xml"}, false},
		{[]string{"application/dicom+json;q=0"}, false},
		{[]string{"application/dicom+json;q=0.000, text/html"}, false},
		{[]string{"multipart/related; type=\"application/dicom\""}, false},
	} {
		if got := acceptsDICOMJSON(c.accept); got != c.want {
			t.Errorf("Accept %q: %v, want %v", c.accept, got, c.want)
		}
	}
}
