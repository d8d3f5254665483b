package intake

import (
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"octflow/api/auth"
	"octflow/api/problems"
	"octflow/exam"
	"octflow/octdicom"
)

// MaxInstances is how many instances one STOW-RS request may carry; a
// router sends more in further requests. A request with more is refused
// (413) before any of its instances is taken.
const MaxInstances = 64

// InstancesBoundary is the multipart boundary of a STOW-RS request's
// Content-Type, which must be multipart/related; type="application/dicom"
// (415 otherwise).
func InstancesBoundary(contentType string) (string, error) {
	mediaType, params, err := parseContentType(contentType)
	if err != nil || mediaType != "multipart/related" || params["boundary"] == "" ||
		!strings.EqualFold(params["type"], "application/dicom") {
		return "", problems.New(http.StatusUnsupportedMediaType, "unsupported-media",
			`POST /dicom-web/studies takes multipart/related; type="application/dicom", one DICOM instance per part`)
	}
	return params["boundary"], nil
}

// ReceiveInstances receives every part of a STOW-RS request's body
// (multipart/related with boundary), each spooled encrypted and hashed as
// sent, as an upload of priority prio: nil for a part that is not
// application/dicom, which is not read. Every part is received before
// any is taken, so that a request over MaxInstances is refused before it
// starts an exam: a resend of it would otherwise fail again after the
// same exams, every time. A body that is cut, too slow or too large, or
// that carries more than MaxInstances parts, fails the request as a
// whole (and what was received is removed). The device's rate counts
// exams: the request was admitted as one, and pays for the rest of its
// instances here. The caller closes the uploads.
func (in *Intake) ReceiveInstances(c echo.Context, boundary string, prio exam.Priority) ([]*Upload, error) {
	in.bound(c)
	parts := multipart.NewReader(c.Request().Body, boundary)
	var received []*Upload
	fail := func(err error) ([]*Upload, error) {
		for _, up := range received {
			up.Close()
		}
		return nil, err
	}
	for {
		part, err := parts.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			// The body itself is broken, cut, too slow or too large: the
			// request fails as a whole, before any instance is taken.
			return fail(readProblem(err, in.cfg.MaxScanBytes))
		}
		if len(received) == MaxInstances {
			part.Close()
			return fail(problems.New(http.StatusRequestEntityTooLarge, "too-large",
				fmt.Sprintf("one request carries at most %d instances; none was taken: send them in requests of at most %d", MaxInstances, MaxInstances)))
		}
		up, err := in.receiveInstance(part, prio)
		received = append(received, up)
		if err != nil {
			return fail(err)
		}
	}
	if len(received) == 0 {
		return nil, problems.New(http.StatusBadRequest, "malformed-request", "no instance in the request")
	}
	in.rates.charge(deviceKey(auth.Of(c)), len(received)-1, time.Now())
	return received, nil
}

// receiveInstance spools one part as sent; a part that is not
// application/dicom is not read (nil). An error fails the request.
func (in *Intake) receiveInstance(part *multipart.Part, prio exam.Priority) (*Upload, error) {
	defer part.Close()
	if ct, _, err := mime.ParseMediaType(part.Header.Get(echo.HeaderContentType)); err == nil && ct != "application/dicom" {
		return nil, nil
	}
	up := &Upload{Priority: prio}
	// The body failed while this part was read (cut, too slow, too
	// large, the spool full): the request fails as a whole.
	return up, in.spoolScan(up, part)
}

// SOP is the SOP Class and SOP Instance UIDs the upload's meta
// information declares, so that a sender can learn which instance was
// refused; a part that is not a Part 10 file names none (ok false).
func (u *Upload) SOP() (class, instance string, ok bool) {
	r, err := u.scan.reader()
	if err != nil {
		return "", "", false
	}
	return octdicom.FileMetaSOP(r)
}

// parseContentType reads a Content-Type as mime.ParseMediaType does, and
// also the parameters senders write unquoted although they hold a
// character that needs quotes: `type=application/dicom` (the slash), a
// boundary with one. PS3.18 §8.7 writes them quoted; dcm4che, pynetdicom
// and others send them bare, and refusing them gains nothing.
func parseContentType(v string) (string, map[string]string, error) {
	mediaType, params, err := mime.ParseMediaType(v)
	if err == nil {
		return mediaType, params, nil
	}
	fields := strings.Split(v, ";")
	for i := 1; i < len(fields); i++ {
		name, value, ok := strings.Cut(fields[i], "=")
		value = strings.TrimSpace(value)
		if !ok || strings.HasPrefix(value, `"`) || strings.ContainsAny(value, `"\`) {
			continue
		}
		fields[i] = name + `="` + value + `"`
	}
	return mime.ParseMediaType(strings.Join(fields, ";"))
}
