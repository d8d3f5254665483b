package api

import (
	"encoding/json"
	"errors"
	"mime"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"
	"go.uber.org/zap"

	"octflow/api/auditing"
	"octflow/api/auth"
	"octflow/api/intake"
	"octflow/api/problems"
	"octflow/exam"
	"octflow/octdicom"
)

// DICOMweb STOW-RS (PS3.18 §10.5): a device, or a router such as Orthanc
// forwarding what devices sent it by C-STORE, stores instances with
// POST /dicom-web/studies, or POST /dicom-web/studies/{study} for
// instances of one study. Each Ophthalmic Tomography instance becomes one
// exam, through the same intake as POST /v1/exams.

// PriorityHeader names the priority of the exams a STOW-RS request
// starts (urgent, normal or low; default normal).
const PriorityHeader = "X-Octflow-Priority"

// stowResult is one instance's outcome in the answer.
type stowResult struct {
	sopClass, sopInstance string
	reason                int    // 0: stored
	status                string // where the exam's status is, when stored
	transient             bool   // refused for now: worth sending again
}

// RefusalStatusHeader, set to "400" by a client that tells HTTP statuses
// apart only as 400, 401/403, 404 and the rest (Orthanc's DICOMweb
// client, which reports every other status as one network error), has a
// refusal no resend can mend answered 400 instead of its own status: 409
// (no instance stored, none for want of resources), 413, 415 or 422. A
// refusal worth sending again (408, 429, 5xx) keeps its status. The body
// is the same either way.
const RefusalStatusHeader = "X-Octflow-Refusal-Status"

// definitive says whether status is a refusal that a resend of the same
// request cannot mend: a 4xx other than 408 and 429.
func definitive(status int) bool {
	return status >= 400 && status < 500 && status != http.StatusRequestTimeout && status != http.StatusTooManyRequests
}

// storeInstances serves POST /dicom-web/studies (multipart/related;
// type="application/dicom"). Each part is one instance, taken as an exam
// whose device exam ID is "sop:" and its SOP Instance UID (kept, like any
// exam ID, only as its keyed reference), so that the same instance sent
// again is the same exam (its digest is of the data set, not of the
// file: octdicom.NewInstanceHash), and another data set under a stored
// SOP Instance UID is refused. Instances are refused one by one (Failed SOP
// Sequence), never the request for one of them: 200 when every instance
// is stored (a resent one counts as stored), 202 when some are, 409 when
// none is, 503 with Retry-After when none is and some could be later.
// Every part is received before any is taken (intake.ReceiveInstances):
// a body that is cut, too slow or too large, or that carries more than
// intake.MaxInstances parts, fails the request as a whole before any
// instance is stored (and sending it again is safe either way: what was
// stored is answered as stored).
func (s *Server) storeInstances(c echo.Context) error {
	err := s.storeInstancesAnswering(c, c.Request().Header.Get(RefusalStatusHeader) == "400")
	var p *problems.Problem
	if c.Request().Header.Get(RefusalStatusHeader) == "400" && errors.As(err, &p) && definitive(p.Status) &&
		p.Status != http.StatusUnauthorized && p.Status != http.StatusForbidden && p.Status != http.StatusNotFound {
		p.Status = http.StatusBadRequest
	}
	return err
}

// storeInstancesAnswering is storeInstances; as400 answers a request
// none of whose instances is stored, and none for want of resources, 400
// instead of 409 (RefusalStatusHeader).
func (s *Server) storeInstancesAnswering(c echo.Context, as400 bool) error {
	who := auth.Of(c)
	prio, err := exam.ParsePriority(c.Request().Header.Get(PriorityHeader))
	if err != nil {
		return problems.New(http.StatusBadRequest, "invalid-meta", PriorityHeader+": "+err.Error())
	}
	prio = intake.AllowedPriority(c, prio)
	study := c.Param("study")
	if study != "" && !octdicom.ValidUID(study) {
		return problems.New(http.StatusBadRequest, "malformed-request",
			"the study in /dicom-web/studies/{study} is not a UID (digits and dots, at most 64 characters)")
	}
	answerAs := stowAnswerType(c.Request().Header.Values(echo.HeaderAccept))
	if answerAs == "" {
		return problems.New(http.StatusNotAcceptable, "not-acceptable",
			"a STOW-RS answer is given as application/dicom+json or application/dicom+xml; the Accept header allows neither")
	}
	boundary, err := intake.InstancesBoundary(c.Request().Header.Get(echo.HeaderContentType))
	if err != nil {
		return err
	}
	release, err := s.intake.Turn(c)
	if err != nil {
		return err
	}
	defer release()
	received, err := s.intake.ReceiveInstances(c, boundary, prio) // nil for a part that is not application/dicom
	if err != nil {
		return err
	}
	defer func() {
		for _, up := range received {
			up.Close()
		}
	}()
	results := make([]stowResult, 0, len(received))
	for _, up := range received {
		res, err := s.storeInstance(c, who, study, up)
		if err != nil {
			return err
		}
		results = append(results, res)
	}
	stored, transient := 0, false
	for _, r := range results {
		if r.reason == 0 {
			stored++
		}
		transient = transient || r.transient
	}
	code := http.StatusOK
	switch {
	case stored == len(results):
	case stored > 0:
		code = http.StatusAccepted
	case transient:
		c.Response().Header().Set("Retry-After", "30")
		code = http.StatusServiceUnavailable
	case as400:
		code = http.StatusBadRequest
	default:
		code = http.StatusConflict
	}
	answer := stowAnswer(results, retrieveBase(c))
	var b []byte
	if answerAs == mediaDICOMXML {
		b, err = answer.NativeXML()
	} else {
		b, err = json.Marshal(answer)
	}
	if err != nil {
		return err
	}
	return c.Blob(code, answerAs, b)
}

// storeInstance takes one received part (nil: not application/dicom). An
// instance refused is a result with its reason; an error is the
// gateway's own failure.
// Sent to a study's resource (study not ""), an instance of another
// study is refused (octdicom.FailureOtherStudy) and starts nothing.
func (s *Server) storeInstance(c echo.Context, who auth.Principal, study string, up *intake.Upload) (stowResult, error) {
	var res stowResult
	if up == nil {
		res.reason = octdicom.FailureCannotUnderstand
		return res, nil
	}
	clean, err := s.intake.Clean(c, up)
	defer clean.Close()
	if err != nil {
		return s.refused(named(res, up), err)
	}
	if clean.SOPInstance == "" {
		res = named(res, up)
		res.reason = octdicom.FailureCannotUnderstand
		return res, nil
	}
	res.sopClass, res.sopInstance = octdicom.OphthalmicTomographySOPClass, clean.SOPInstance
	if study != "" && clean.Study != study {
		s.cfg.Logger.Info("STOW-RS instance refused: of another study than the resource it was sent to")
		res.reason = octdicom.FailureOtherStudy
		return res, nil
	}
	ref := s.cfg.Pseudonymizer.ExamRef(who.Campus, "sop:"+clean.SOPInstance)
	a, err := s.admit(c.Request().Context(), who, routedDevice(who, clean.Device), ref, up, clean)
	if err != nil {
		return s.refused(res, err)
	}
	auditing.Note(c, "store-instances", a.ref)
	res.status = examLocation(a.ref)
	return res, nil
}

// named is res naming the instance up holds by the SOP Class and SOP
// Instance UIDs its meta information declares, so that a sender learns
// which instance was refused (PS3.18 §10.5.3: a Failed SOP Sequence item
// carries both); a part that is not a Part 10 file names none.
func named(res stowResult, up *intake.Upload) stowResult {
	if class, instance, ok := up.SOP(); ok {
		res.sopClass, res.sopInstance = class, instance
	}
	return res
}

// refused turns why an instance was not stored into its Failure Reason;
// anything but a problem is the gateway's own failure and fails the
// request.
func (s *Server) refused(res stowResult, err error) (stowResult, error) {
	var p *problems.Problem
	// The reason's text stays here: a STOW-RS answer carries only its
	// code. (No patient data: the pre-scan and the parser name
	// structure, never values that identify.)
	s.cfg.Logger.Info("STOW-RS instance refused", zap.Error(err))
	switch {
	case errors.Is(err, octdicom.ErrNotOCT):
		res.reason = octdicom.FailureSOPClassNotSupported
	case errors.Is(err, octdicom.ErrTransferSyntax):
		res.reason = octdicom.FailureTransferSyntax
	case errors.As(err, &p) && p.Status == http.StatusConflict:
		res.reason = octdicom.FailureDuplicateInstance
	case errors.As(err, &p) && (p.Status == http.StatusServiceUnavailable || p.Status == http.StatusTooManyRequests):
		res.reason, res.transient = octdicom.FailureOutOfResources, true
	case errors.As(err, &p) && p.Status == http.StatusRequestEntityTooLarge:
		// Too large ever to validate: final, not "out of resources",
		// which senders send again.
		res.reason = octdicom.FailureCannotUnderstand
	case errors.As(err, &p) && p.Status < 500:
		res.reason = octdicom.FailureCannotUnderstand
	default:
		return res, err
	}
	return res, nil
}

// deviceName is what a Device Serial Number may be to name a device: it
// becomes a metric label and a search attribute.
var deviceName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// routedDevice names the device of an instance: a device's own token
// names it; a router's instance is named by its Device Serial Number
// (0018,1000) under the router's ID, or the router's ID alone when the
// instance has none that can name it.
func routedDevice(who auth.Principal, serial string) string {
	if who.Role != auth.RoleRouter || !deviceName.MatchString(serial) {
		return who.DeviceID
	}
	return who.DeviceID + "." + serial
}

// retrieveBase is the scheme and host the request reached the api by:
// the api has no public address configured of its own, and a Retrieve
// URL must be absolute. Behind a TLS proxy, X-Forwarded-Proto says https.
func retrieveBase(c echo.Context) string {
	scheme := "http"
	if c.Scheme() == "https" {
		scheme = "https"
	}
	return (&url.URL{Scheme: scheme, Host: c.Request().Host}).String()
}

// stowAnswer is the Store Instances Response Module in DICOM JSON
// (PS3.18 Annex I): the Retrieve URL (0008,1190) of the study, present
// and empty as octflow serves no WADO-RS; Referenced SOP Sequence
// (0008,1199) for the instances stored, each with its Retrieve URL
// (empty likewise), the Warning Reason (0008,1196) Coercion of Data
// Elements (octdicom.WarningCoercion), and in a private attribute (creator OCTFLOW,
// (0009,1001)) the absolute URL, on base, of its exam's status; and
// Failed SOP Sequence (0008,1198) with each refusal's Failure Reason
// (0008,1197). Every item names its instance (Referenced SOP Class and
// Instance UIDs) where the instance could be read that far; a part that
// is not DICOM has neither.
func stowAnswer(results []stowResult, base string) octdicom.JSONDataset {
	var referenced, failed []any
	for _, r := range results {
		item := octdicom.JSONDataset{}
		if r.sopClass != "" {
			item[octdicom.TagReferencedSOPClassUID] = octdicom.JSONAttribute{VR: "UI", Value: []any{r.sopClass}}
		}
		if r.sopInstance != "" {
			item[octdicom.TagReferencedSOPInstanceUID] = octdicom.JSONAttribute{VR: "UI", Value: []any{r.sopInstance}}
		}
		if r.reason == 0 {
			item[octdicom.TagRetrieveURL] = octdicom.JSONAttribute{VR: "UR"}
			item[octdicom.TagWarningReason] = octdicom.JSONAttribute{VR: "US", Value: []any{octdicom.WarningCoercion}}
			item[octdicom.TagPrivateCreator] = octdicom.JSONAttribute{VR: "LO", Value: []any{octdicom.PrivateCreator}}
			item[octdicom.TagExamStatusURL] = octdicom.JSONAttribute{VR: "UR", Value: []any{base + r.status}}
			referenced = append(referenced, item)
			continue
		}
		item[octdicom.TagFailureReason] = octdicom.JSONAttribute{VR: "US", Value: []any{r.reason}}
		failed = append(failed, item)
	}
	out := octdicom.JSONDataset{octdicom.TagRetrieveURL: {VR: "UR"}}
	if len(referenced) > 0 {
		out[octdicom.TagReferencedSOPSequence] = octdicom.JSONAttribute{VR: "SQ", Value: referenced}
	}
	if len(failed) > 0 {
		out[octdicom.TagFailedSOPSequence] = octdicom.JSONAttribute{VR: "SQ", Value: failed}
	}
	return out
}

// The media types a STOW-RS answer is given in (PS3.18 §10.5.3).
const (
	mediaDICOMJSON = "application/dicom+json"
	mediaDICOMXML  = "application/dicom+xml"
)

// stowAnswerType is the media type the answer is given in, by the Accept
// headers: application/dicom+json where they allow it (no Accept, an
// empty one, application/json, application/*, */*), else
// application/dicom+xml where they allow that (dcm4che's stowrs asks for
// it by default), else "" (406). A range with q=0, or a q that is not a
// number, allows nothing.
func stowAnswerType(accept []string) string {
	var ranges []string
	for _, header := range accept {
		for _, r := range strings.Split(header, ",") {
			if r = strings.TrimSpace(r); r != "" {
				ranges = append(ranges, r)
			}
		}
	}
	if len(ranges) == 0 {
		return mediaDICOMJSON
	}
	allowed := map[string]bool{}
	for _, r := range ranges {
		mediaType, params, err := mime.ParseMediaType(r)
		if err != nil {
			continue
		}
		if q, ok := params["q"]; ok {
			if v, err := strconv.ParseFloat(q, 64); err != nil || v <= 0 || v > 1 {
				continue
			}
		}
		allowed[mediaType] = true
	}
	switch {
	case allowed[mediaDICOMJSON] || allowed["application/json"] || allowed["application/*"] || allowed["*/*"]:
		return mediaDICOMJSON
	case allowed[mediaDICOMXML]:
		return mediaDICOMXML
	}
	return ""
}
