package intake

import (
	"bytes"
	"encoding/json"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/labstack/echo/v4"
	"go.uber.org/zap"

	"octflow/api/auth"
	"octflow/api/problems"
)

// testKey is the pseudonym key of the tests' intakes.
const testKey = "0123456789abcdef"

// newIntake builds an intake of cfg for a test: pseudonyms under testKey
// and a spool of the test's own unless cfg says.
func newIntake(t testing.TB, cfg Config) *Intake {
	t.Helper()
	if cfg.Pseudonymizer == nil {
		cfg.Pseudonymizer = NewPseudonymizer([]byte(testKey))
	}
	if cfg.SpoolDir == "" {
		cfg.SpoolDir = t.TempDir()
	}
	in, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return in
}

// device is the token entry of a device of campus, named and
// authenticated by token.
func device(token, id, campus string) auth.TokenEntry {
	return auth.TokenEntry{SHA256: auth.HashToken(token),
		Principal: auth.Principal{Name: token, Role: auth.RoleDevice, DeviceID: id, Campus: campus}}
}

// gateway serves POST /v1/exams over HTTP as the gateway does, up to its
// admission: the devices' bearer tokens, then the intake of cfg, whose
// campuses are the devices'; an upload taken is answered 202 and stored
// nowhere.
func gateway(t testing.TB, cfg Config, devices ...auth.TokenEntry) (*Intake, *httptest.Server) {
	t.Helper()
	tokens, err := auth.NewTokens(devices)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Campuses = tokens.UploadCampuses()
	in := newIntake(t, cfg)
	e := echo.New()
	e.HTTPErrorHandler = problems.Handler(zap.NewNop())
	admit := func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			p, ok := tokens.Bearer(c.Request())
			if !ok {
				return problems.New(http.StatusUnauthorized, "unauthenticated", "no device's token")
			}
			auth.Set(c, p)
			return next(c)
		}
	}
	e.POST("/v1/exams", func(c echo.Context) error {
		release, err := in.Turn(c)
		if err != nil {
			return err
		}
		defer release()
		up, clean, err := in.Take(c)
		defer up.Close()
		defer clean.Close()
		if err != nil {
			return err
		}
		return c.NoContent(http.StatusAccepted)
	}, admit, in.DeviceRate, in.SpoolBudget)
	ts := httptest.NewServer(e)
	t.Cleanup(ts.Close)
	return in, ts
}

// deviceContext is req, answered into w, as a device of campus sends it
// once admitted.
func deviceContext(req *http.Request, w http.ResponseWriter, campus string) echo.Context {
	c := echo.New().NewContext(req, w)
	auth.Set(c, auth.Principal{Name: campus, Role: auth.RoleDevice, DeviceID: "oct-1", Campus: campus})
	return c
}

// uploadForm is a multipart upload of meta and scan.
func uploadForm(meta Meta, scan []byte) (string, []byte) {
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	w, _ := mw.CreateFormField("meta")
	_ = json.NewEncoder(w).Encode(meta)
	w, _ = mw.CreateFormFile("scan", "scan.dcm")
	w.Write(scan)
	mw.Close()
	return mw.FormDataContentType(), body.Bytes()
}

// take runs the intake of one upload of meta and scan from a device of
// campus; the caller closes what it returns.
func take(in *Intake, campus string, meta Meta, scan []byte) (*httptest.ResponseRecorder, *Upload, *Scan, error) {
	contentType, body := uploadForm(meta, scan)
	req := httptest.NewRequest(http.MethodPost, "/v1/exams", bytes.NewReader(body))
	req.Header.Set(echo.HeaderContentType, contentType)
	rec := httptest.NewRecorder()
	up, clean, err := in.Take(deviceContext(req, rec, campus))
	return rec, up, clean, err
}
