// Package intake is the gateway's intake of an upload: it turns a
// request's body into a scan received, validated and de-identified, and
// stores what the exam keeps of it, before the gateway starts the exam.
//
// In the order an upload meets it: DeviceRate paces each device (a
// STOW-RS request pays for each instance), SpoolBudget bounds the bytes
// of uploads in flight per campus, Turn bounds a device's uploads in
// flight; Take (POST /v1/exams) and ReceiveInstances (STOW-RS) spool the
// body to disk encrypted with a key that lives only in the request
// (spool.go), within a pace (UploadPace); Clean validates the scan as an
// OCT volume within the validation slots and memory budget
// (validate.go, budget.go) and writes its de-identified copy under the
// campus's pseudonyms (pseudonym.go). Nothing is stored unless the whole
// upload is valid. Then the gateway, which decides whether the exam is
// new, stores through the intake: MarkIntake, KeepIdentity (the scan's
// original identity, sealed for its campus), StoreScan, and the exam's
// record (record.go).
//
// Every refusal is a *problems.Problem the gateway answers as it is.
package intake

import (
	"cmp"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
	"go.uber.org/zap"

	"octflow/api/auth"
	"octflow/api/problems"
	"octflow/callback"
	"octflow/codec"
	"octflow/exam"
	"octflow/imaging"
	"octflow/octdicom"
)

// Store is what the intake needs of the object store.
type Store interface {
	Put(ctx context.Context, key string, r io.Reader, size int64, contentType string) error
	Get(ctx context.Context, key string) (io.ReadCloser, int64, error)
	Exists(ctx context.Context, key string) (bool, error)
	Delete(ctx context.Context, key string) error
}

// Config holds the intake's dependencies and limits. Zero limits take
// the defaults.
type Config struct {
	Store         Store
	Pseudonymizer *Pseudonymizer
	// Identities seals each scan's identity for the way back to the PACS
	// (see KeepIdentity): the identity keys (nil: no identity is kept).
	Identities *codec.Codec
	// Callbacks decides which callback URLs a device may give (nil: none).
	Callbacks *callback.Guard
	Logger    *zap.Logger
	// MaxScanBytes bounds an upload (default 512 MiB).
	MaxScanBytes int64
	// SpoolDir holds uploads while they are validated (default:
	// os.TempDir). A directory given here is the intake's own: New removes
	// the spool files an earlier process left there (ciphertext whose key
	// died with it), which no quota counts.
	SpoolDir string
	// SpoolMaxBytes caps what all uploads in flight may put in SpoolDir
	// together (default DefaultSpoolMaxBytes); over it an upload is
	// answered 503 with Retry-After. It must hold one upload of
	// MaxScanBytes (SpoolBytesFor).
	SpoolMaxBytes int64
	// Uploads bounds what uploads may take of the gateway.
	Uploads Limits
	// DeviceRate limits each device's submissions.
	DeviceRate RateLimit
	// Campuses are the campuses whose devices or routers upload: each
	// holds at most its share of the spool and of the validations.
	Campuses []string
}

// Limits bound what uploads may take of the gateway. Zero fields take
// the defaults.
type Limits struct {
	// Validating bounds the scans being validated at once (default 4):
	// validation holds a whole volume in memory. A scan takes a turn only
	// once it has been received in full. Wait is how long it may wait
	// for a turn (default 30 s) before it is answered 503 with
	// Retry-After.
	Validating int
	Wait       time.Duration
	// ValidationBytes bounds the memory all validations together may
	// take, in bytes (default DefaultValidationBytes): each is charged
	// what its scan's header says reading and de-identifying it takes
	// (octdicom.PreScan), and waits for it within Wait; a scan that
	// could never fit is refused 413. Where several campuses upload,
	// each holds at most its share (or one larger scan, alone).
	ValidationBytes int64
	// PerDevice bounds one device's uploads in flight (default 2); over
	// it a device gets 429.
	PerDevice int
	// Pace bounds how slowly an upload may arrive (408 below it).
	Pace UploadPace
}

// Intake takes uploads; one serves every request of a gateway.
type Intake struct {
	cfg        Config
	validating chan struct{} // one token per scan being validated
	budget     *byteBudget   // the memory of validations (Uploads.ValidationBytes)
	// campusSlots is each campus's share of the validation slots.
	campusSlots map[string]chan struct{}
	// campusBudgets is each campus's share of the validation memory.
	campusBudgets map[string]*byteBudget
	// deviceUploads counts each device's uploads in flight.
	deviceMu      sync.Mutex
	deviceUploads map[string]int
	// spool bounds the bytes of uploads in flight.
	spool *spoolQuota
	// rates is each device's rate of exams, over both submitting routes.
	rates *deviceRates
}

// New builds the intake; it refuses a spool cap that holds no upload.
func New(cfg Config) (*Intake, error) {
	if cfg.MaxScanBytes == 0 {
		cfg.MaxScanBytes = 512 << 20
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	u := &cfg.Uploads
	u.Validating = cmp.Or(max(u.Validating, 0), 4)
	u.Wait = cmp.Or(u.Wait, 30*time.Second)
	u.ValidationBytes = cmp.Or(max(u.ValidationBytes, 0), DefaultValidationBytes)
	u.PerDevice = cmp.Or(max(u.PerDevice, 0), 2)
	u.Pace.Idle = cmp.Or(u.Pace.Idle, 30*time.Second)
	u.Pace.Grace = cmp.Or(u.Pace.Grace, 10*time.Second)
	u.Pace.MinRate = cmp.Or(u.Pace.MinRate, 16<<10)
	u.Pace.Longest = cmp.Or(u.Pace.Longest, 30*time.Minute)
	cfg.SpoolMaxBytes = cmp.Or(cfg.SpoolMaxBytes, DefaultSpoolMaxBytes)
	if need := SpoolBytesFor(cfg.MaxScanBytes); cfg.SpoolMaxBytes < need {
		return nil, fmt.Errorf("spool cap %d bytes holds no upload of %d bytes: want at least %d", cfg.SpoolMaxBytes, cfg.MaxScanBytes, need)
	}
	if cfg.SpoolDir != "" {
		if err := clearSpool(cfg.SpoolDir, cfg.Logger); err != nil {
			return nil, err
		}
	}
	return &Intake{cfg: cfg, validating: make(chan struct{}, u.Validating), budget: newByteBudget(u.ValidationBytes),
		campusSlots: campusSlots(u.Validating, cfg.Campuses), campusBudgets: campusBudgets(u.ValidationBytes, cfg.Campuses),
		deviceUploads: map[string]int{}, spool: newSpoolQuota(cfg.SpoolMaxBytes, len(cfg.Campuses), SpoolBytesFor(cfg.MaxScanBytes)),
		rates: newDeviceRates(cfg.DeviceRate)}, nil
}

// Meta is the JSON "meta" part of POST /v1/exams.
type Meta struct {
	ExamID      string `json:"examId"`
	Priority    string `json:"priority"`
	Eye         string `json:"eye"`
	CallbackURL string `json:"callbackUrl"`
	// PatientRef, if given, is pseudonymised like the DICOM Patient ID.
	PatientRef string `json:"patientRef"`
	// ScanType is cube, line or circle, for devices whose DICOM does not
	// say; it must agree with the DICOM where the DICOM does.
	ScanType string `json:"scanType,omitempty"`
}

// Upload is a submission received: its metadata, and the scan as sent,
// spooled encrypted while it is checked.
type Upload struct {
	Meta Meta
	// Ref is the exam Meta names: its exam ID in the device's campus,
	// under its reference (the ID itself is never kept); zero for a
	// STOW-RS instance, whose exam is known once it is read.
	Ref exam.Ref
	// Priority is the bucket the exam runs in: meta's (or the STOW-RS
	// request's), parsed once at intake and allowed (AllowedPriority).
	Priority exam.Priority
	// Digest is of the instance sent (octdicom.NewInstanceHash): a
	// resend, direct or through a router, is the same exam.
	Digest string
	scan   *spool
	size   int64
}

// Close removes the spooled upload.
func (u *Upload) Close() {
	if u != nil && u.scan != nil {
		u.scan.remove()
	}
}

// Scan is an upload's scan, validated and de-identified, ready to store.
type Scan struct {
	file       *os.File
	size       int64
	Laterality string
	PatientRef string // the pseudonym, or ""
	Pattern    imaging.Pattern
	// SOPInstance and Device are the original's SOP Instance UID and
	// Device Serial Number, for a STOW-RS answer and the exam's reference
	// only: the stored copy keeps neither.
	SOPInstance, Device string
	// Study is the original's Study Instance UID, held to the study of a
	// STOW-RS request sent to a study's resource.
	Study string
}

// Close removes the de-identified copy.
func (c *Scan) Close() {
	if c != nil && c.file != nil {
		c.file.Close()
		os.Remove(c.file.Name())
	}
}

// Turn admits one more upload from the request's device, or answers 429:
// one device cannot hold every connection. The upload holds its turn
// until it calls release.
func (in *Intake) Turn(c echo.Context) (release func(), err error) {
	who := auth.Of(c)
	key := who.Campus + "/" + who.DeviceID
	in.deviceMu.Lock()
	defer in.deviceMu.Unlock()
	if in.deviceUploads[key] >= in.cfg.Uploads.PerDevice {
		c.Response().Header().Set("Retry-After", "5")
		return func() {}, problems.New(http.StatusTooManyRequests, "rate-limited",
			fmt.Sprintf("this device already sends %d scans at once", in.cfg.Uploads.PerDevice))
	}
	in.deviceUploads[key]++
	return func() {
		in.deviceMu.Lock()
		defer in.deviceMu.Unlock()
		if in.deviceUploads[key]--; in.deviceUploads[key] <= 0 {
			delete(in.deviceUploads, key)
		}
	}, nil
}

// Take is everything the gateway does with an upload of POST /v1/exams
// before it asks Temporal or the object store anything: receive the
// body, then validate and de-identify the scan. The caller closes both
// results, whatever the error.
func (in *Intake) Take(c echo.Context) (*Upload, *Scan, error) {
	up, err := in.receive(c)
	if err != nil {
		return up, nil, err
	}
	clean, err := in.Clean(c, up)
	return up, clean, err
}

// bound holds the request's body to the largest upload and to the pace.
func (in *Intake) bound(c echo.Context) {
	req := c.Request()
	body := http.MaxBytesReader(c.Response(), req.Body, in.cfg.MaxScanBytes+1<<20)
	req.Body = newPacedReader(body, http.NewResponseController(c.Response()), in.cfg.Uploads.Pace)
}

// receive reads the multipart body: the metadata, checked, and the scan,
// spooled encrypted and hashed as sent. Every failure is a 4xx problem.
func (in *Intake) receive(c echo.Context) (*Upload, error) {
	up := &Upload{}
	req := c.Request()
	mediaType, _, err := mime.ParseMediaType(req.Header.Get(echo.HeaderContentType))
	if err != nil || mediaType != "multipart/form-data" {
		return up, problems.New(http.StatusUnsupportedMediaType, "unsupported-media",
			"POST /v1/exams takes multipart/form-data with parts meta (JSON) and scan (DICOM)")
	}
	in.bound(c)
	mr, err := req.MultipartReader()
	if err != nil {
		return up, problems.New(http.StatusBadRequest, "malformed-request", "multipart body without a boundary")
	}
	var metaSeen bool
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return up, readProblem(err, in.cfg.MaxScanBytes)
		}
		switch part.FormName() {
		case "meta":
			if metaSeen {
				return up, problems.New(http.StatusBadRequest, "malformed-request", "more than one meta part")
			}
			dec := json.NewDecoder(io.LimitReader(part, 64<<10))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&up.Meta); err != nil {
				if p := readProblem(err, in.cfg.MaxScanBytes); !isMalformed(p) {
					return up, p
				}
				return up, problems.JSON("the meta part", err)
			}
			metaSeen = true
		case "scan":
			if up.scan != nil {
				return up, problems.New(http.StatusBadRequest, "malformed-request", "more than one scan part")
			}
			if err := in.spoolScan(up, part); err != nil {
				return up, err
			}
		default:
			return up, problems.New(http.StatusBadRequest, "malformed-request", "a part other than meta and scan")
		}
	}
	if !metaSeen {
		return up, problems.New(http.StatusBadRequest, "malformed-request", "missing meta part")
	}
	if up.scan == nil || up.size == 0 {
		return up, problems.New(http.StatusBadRequest, "malformed-request", "missing scan part")
	}
	prio, err := validateMeta(up.Meta)
	if err != nil {
		return up, err
	}
	up.Priority = AllowedPriority(c, prio)
	up.Ref = in.cfg.Pseudonymizer.ExamRef(auth.Of(c).Campus, up.Meta.ExamID)
	if up.Meta.CallbackURL != "" {
		if in.cfg.Callbacks == nil {
			return up, problems.New(http.StatusUnprocessableEntity, "invalid-callback", "this gateway accepts no callback URLs")
		}
		if err := in.cfg.Callbacks.Check(up.Meta.CallbackURL); err != nil {
			return up, problems.New(http.StatusUnprocessableEntity, "invalid-callback", err.Error())
		}
	}
	return up, nil
}

// spoolScan spools a scan as sent into up, encrypted, and hashes it as an
// instance (its data set, not the file a router rewrote around it). A
// scan over the gateway's limit is 413; a failed read, a 4xx problem.
func (in *Intake) spoolScan(up *Upload, r io.Reader) error {
	var err error
	if up.scan, err = newSpool(in.cfg.SpoolDir); err != nil {
		return fmt.Errorf("spool upload: %w", err)
	}
	h := octdicom.NewInstanceHash()
	n, err := io.Copy(io.MultiWriter(up.scan, h), io.LimitReader(r, in.cfg.MaxScanBytes+1))
	if err != nil {
		return readProblem(err, in.cfg.MaxScanBytes)
	}
	if n > in.cfg.MaxScanBytes {
		return problems.New(http.StatusRequestEntityTooLarge, "too-large", fmt.Sprintf("scan exceeds %d bytes", in.cfg.MaxScanBytes))
	}
	up.size, up.Digest = n, hex.EncodeToString(h.Sum(nil))
	return nil
}

// validateMeta checks a submission's meta part and returns its priority,
// parsed here once.
func validateMeta(m Meta) (exam.Priority, error) {
	bad := func(detail string) error { return problems.New(http.StatusBadRequest, "invalid-meta", detail) }
	if err := exam.ValidateID(m.ExamID); err != nil {
		return "", bad(err.Error())
	}
	if exam.IsReference(m.ExamID) {
		return "", bad("exam id: ex- and 24 hex digits is the form of octflow's own exam references; a device's exam ID cannot take it")
	}
	prio, err := exam.ParsePriority(m.Priority)
	if err != nil {
		return "", bad(err.Error())
	}
	if _, err := exam.ParseEye(m.Eye); err != nil {
		return "", bad(err.Error())
	}
	if _, err := imaging.ParsePattern(m.ScanType); err != nil {
		return "", bad("scanType: not a scan pattern octflow reads (see the API reference)")
	}
	if len(m.PatientRef) > 256 || len(m.CallbackURL) > 2048 {
		return "", bad("patientRef or callbackUrl is too long")
	}
	return prio, nil
}

// readProblem is the problem for a body that could not be read: too
// large (413), too slow (408) or broken (400).
func readProblem(err error, limit int64) error {
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		return problems.New(http.StatusRequestEntityTooLarge, "too-large", fmt.Sprintf("request exceeds %d bytes", limit))
	case errors.Is(err, errUploadTooSlow):
		return problems.New(http.StatusRequestTimeout, "too-slow", err.Error())
	}
	return problems.New(http.StatusBadRequest, "malformed-request", "the body is not well-formed multipart")
}

func isMalformed(err error) bool {
	var p *problems.Problem
	return errors.As(err, &p) && p.Status == http.StatusBadRequest
}
