package intake

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"octflow/api/problems"
	"octflow/internal/testwait"
	"os"
	"strings"
	"testing"
	"time"
)

// spoolGateway is a gateway whose spool holds exactly one largest upload
// (a scan of 1024 bytes).
func spoolGateway(t *testing.T) (*Intake, *httptest.Server, string) {
	t.Helper()
	dir := t.TempDir()
	in, ts := gateway(t, Config{MaxScanBytes: 1024, SpoolDir: dir, SpoolMaxBytes: SpoolBytesFor(1024)},
		device("dev-1", "oct-1", "north"), device("dev-2", "oct-2", "north"))
	return in, ts, dir
}

// lowForm is a multipart upload of scan, a low-priority exam.
func lowForm(scan string) (string, []byte) {
	return uploadForm(Meta{ExamID: "E1", Priority: "low"}, []byte(scan))
}

// sendUpload sends body (of length n, -1: chunked) and returns the status and
// the problem's type.
func sendUpload(t *testing.T, ctx context.Context, base, token, contentType string, body io.Reader, n int64) (int, string, http.Header) {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/exams", body)
	req.ContentLength = n
	req.Header.Set("Content-Type", contentType)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err.Error(), nil
	}
	defer resp.Body.Close()
	var p problems.Problem
	_ = json.NewDecoder(resp.Body).Decode(&p)
	return resp.StatusCode, strings.TrimPrefix(p.Type, "urn:octflow:problem:"), resp.Header
}

// onlyChunks hides a reader's length, so the request is sent chunked.
type onlyChunks struct{ io.Reader }

// While the spool is full an upload is answered 503 with Retry-After:
// one with no room for its first bytes before a byte is read, one whose
// bytes stop fitting once they do; an upload holds what it has sent, not
// what it declares, and the space comes back when uploads end.
func TestUploadsAreRefusedWhileTheSpoolIsFull(t *testing.T) {
	in, ts, _ := spoolGateway(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// An upload that has sent a megabyte and then waits holds twice
	// that of the spool's 2 MiB and a bit.
	held, holdBody := io.Pipe()
	heldDone := make(chan int)
	go func() {
		code, _, _ := sendUpload(t, ctx, ts.URL, "dev-1", "multipart/form-data; boundary=x", held, 1<<20)
		heldDone <- code
	}()
	holdBody.Write(preamble(1_000_000))
	testwait.Until(t, "the held upload is charged what it sent", func() bool { return in.spool.inUse() >= 2_000_000 })

	// Refused before its body is read: this body never comes.
	never, _ := io.Pipe()
	if code, kind, h := sendUpload(t, ctx, ts.URL, "dev-2", "multipart/form-data; boundary=x", never, 1<<20); code != http.StatusServiceUnavailable || kind != "unavailable" || h.Get("Retry-After") != "30" {
		t.Errorf("an upload with no room for its first bytes: %d %s, Retry-After %q; want 503 unavailable, 30", code, kind, h.Get("Retry-After"))
	}
	ct, big := lowForm(strings.Repeat("x", 1000))
	if code, kind, _ := sendUpload(t, ctx, ts.URL, "dev-2", ct, onlyChunks{bytes.NewReader(append(preamble(200_000), big...))}, -1); code != http.StatusServiceUnavailable || kind != "unavailable" {
		t.Errorf("a chunked upload over the room left: %d %s, want 503 unavailable", code, kind)
	}
	ct2, small := lowForm("not a dicom file")
	if code, kind, _ := sendUpload(t, ctx, ts.URL, "dev-2", ct2, bytes.NewReader(small), int64(len(small))); code != http.StatusUnprocessableEntity {
		t.Errorf("an upload that fits: %d %s, want it validated (422: not DICOM)", code, kind)
	}

	holdBody.CloseWithError(io.ErrUnexpectedEOF)
	<-heldDone
	testwait.Until(t, "an ended upload gives its room back", func() bool { return in.spool.inUse() == 0 })
	if code, kind, _ := sendUpload(t, ctx, ts.URL, "dev-2", ct, bytes.NewReader(big), int64(len(big))); code != http.StatusUnprocessableEntity {
		t.Errorf("after the held upload ended: %d %s, want 422 (not DICOM)", code, kind)
	}
}

// Whichever way an upload ends, its charge to the spool is given back
// and its files are gone. (The refusal of a full spool gives back too:
// see TestUploadsAreRefusedWhileTheSpoolIsFull.)
func TestUploadsGiveBackTheSpoolOnEveryPath(t *testing.T) {
	in, ts, dir := spoolGateway(t)
	ct, notDICOM := lowForm("not a dicom file")
	_, tooBig := lowForm(strings.Repeat("x", 4096))
	_, noMeta := func() (string, []byte) {
		var body bytes.Buffer
		mw := multipart.NewWriter(&body)
		w, _ := mw.CreateFormFile("scan", "scan.dcm")
		w.Write([]byte("x"))
		mw.Close()
		return "", body.Bytes()
	}()
	_, huge := lowForm(strings.Repeat("x", 3<<20))
	cases := []struct {
		name, token, contentType string
		body                     []byte
		chunked                  bool
		status                   int
	}{
		{"no token", "", ct, notDICOM, false, 401},
		{"json body", "dev-1", "application/json", []byte("{}"), false, 415},
		{"scan too large", "dev-1", formType(tooBig), tooBig, false, 413},
		{"scan too large, chunked", "dev-1", formType(tooBig), tooBig, true, 413},
		{"missing meta", "dev-1", formType(noMeta), noMeta, false, 400},
		{"not DICOM", "dev-1", ct, notDICOM, false, 422},
		{"not DICOM, chunked", "dev-1", ct, notDICOM, true, 422},
		{"over the request limit", "dev-1", formType(huge), huge, false, 413},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var body io.Reader = bytes.NewReader(c.body)
			n := int64(len(c.body))
			if c.chunked {
				body, n = onlyChunks{body}, -1
			}
			code, kind, _ := sendUpload(t, context.Background(), ts.URL, c.token, c.contentType, body, n)
			if code != c.status {
				t.Errorf("%d %s, want %d", code, kind, c.status)
			}
			testwait.Until(t, "the spool is given back", func() bool { return in.spool.inUse() == 0 })
			if files, _ := os.ReadDir(dir); len(files) > 0 {
				t.Errorf("left in the spool: %v", files)
			}
		})
	}
	t.Run("client gone mid-body", func(t *testing.T) {
		r, w := io.Pipe()
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			sendUpload(t, ctx, ts.URL, "dev-1", ct, r, 1<<20)
		}()
		w.Write(notDICOM[:100])
		testwait.Until(t, "the upload is charged", func() bool { return in.spool.inUse() > 0 })
		cancel()
		w.Close()
		<-done
		testwait.Until(t, "the spool is given back", func() bool { return in.spool.inUse() == 0 })
	})
}

// formType is a multipart body's content type, its boundary read from
// its first line.
func formType(body []byte) string {
	line, _, _ := bytes.Cut(body, []byte("\r\n"))
	return "multipart/form-data; boundary=" + strings.TrimPrefix(string(line), "--")
}

// preamble is n bytes and more of short lines, which a multipart reader
// reads and skips before the first boundary.
func preamble(n int) []byte {
	line := strings.Repeat("p", 62) + "\r\n"
	return []byte(strings.Repeat(line, n/len(line)+1))
}

// One campus's burst fills what the other campuses leave of the spool,
// never the share each is owed.
func TestOneCampusCannotTakeAnothersShareOfTheSpool(t *testing.T) {
	// Two campuses, a share each of one largest upload.
	in, ts := gateway(t, Config{MaxScanBytes: 1024, SpoolMaxBytes: 2 * SpoolBytesFor(1024)},
		device("north-1", "oct-1", "north"), device("north-2", "oct-2", "north"), device("south-1", "oct-1", "south"))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	// North trickles an upload that holds 2.08 MB of the 4.2 MB spool,
	// all but 19 KB of its half.
	held, holdBody := io.Pipe()
	heldDone := make(chan int)
	go func() {
		code, _, _ := sendUpload(t, ctx, ts.URL, "north-1", "multipart/form-data; boundary=x", held, 1<<20)
		heldDone <- code
	}()
	if _, err := holdBody.Write(preamble(1_040_000)); err != nil {
		t.Fatalf("north's first upload was cut off within the spool's room: %v", err)
	}
	testwait.Until(t, "north's upload holds what it sent", func() bool { return in.spool.inUse() >= 2_080_000 })

	// What is left is south's: north's next upload of 40 KB waits.
	ct, small := lowForm("not a dicom file")
	next := append(preamble(20_000), small...)
	if code, kind, _ := sendUpload(t, ctx, ts.URL, "north-2", ct, bytes.NewReader(next), int64(len(next))); code != http.StatusServiceUnavailable || kind != "unavailable" {
		t.Errorf("north's second upload while north holds more than its share: %d %s, want 503", code, kind)
	}
	// South's uploads are taken: its share is free.
	for i := range 2 {
		body := append(preamble(150_000), small...)
		if code, kind, _ := sendUpload(t, ctx, ts.URL, "south-1", ct, bytes.NewReader(body), int64(len(body))); code != http.StatusUnprocessableEntity {
			t.Errorf("south's upload %d while north holds the spool: %d %s, want it taken (422: not DICOM)", i, code, kind)
		}
	}
	holdBody.CloseWithError(io.ErrUnexpectedEOF)
	<-heldDone
	testwait.Until(t, "north's ended upload gives its room back", func() bool { return in.spool.inUse() == 0 })
	if code, kind, _ := sendUpload(t, ctx, ts.URL, "north-2", ct, bytes.NewReader(small), int64(len(small))); code != http.StatusUnprocessableEntity {
		t.Errorf("north's upload once its first ended: %d %s, want 422", code, kind)
	}
}

func TestAnUploadHasACeilingOnItsTotalTime(t *testing.T) {
	_, ts := gateway(t, Config{MaxScanBytes: 1 << 20,
		Uploads: Limits{Pace: UploadPace{Idle: time.Second, MinRate: 1, Grace: time.Hour, Longest: 300 * time.Millisecond}}},
		device("dev-1", "oct-1", "north"))
	r, w := io.Pipe()
	done := make(chan int)
	go func() {
		code, _, _ := sendUpload(t, context.Background(), ts.URL, "dev-1", "multipart/form-data; boundary=x", r, 1<<20)
		done <- code
	}()
	// Well paced (a line every 50 ms, within Idle and over MinRate), but
	// never done.
	deadline := time.After(10 * time.Second)
	for {
		select {
		case code := <-done:
			if code != http.StatusRequestTimeout {
				t.Fatalf("an upload past its ceiling: %d, want 408", code)
			}
			return
		case <-deadline:
			w.Close()
			t.Fatal("an upload that never ends is still read after 10 s with a ceiling of 300 ms")
		case <-time.After(50 * time.Millisecond):
			w.Write(preamble(64))
		}
	}
}

// One campus's validations wait behind each other, not in front of the
// other campuses': each holds at most its share of the slots.
func TestOneCampusCannotTakeAnothersValidationSlots(t *testing.T) {
	in := newIntake(t, Config{Campuses: []string{"north", "south"}, Uploads: Limits{Validating: 4, Wait: 50 * time.Millisecond}})
	turn := func(campus string) (func(), error) {
		return in.takeUploadTurn(deviceContext(httptest.NewRequest(http.MethodPost, "/v1/exams", nil), httptest.NewRecorder(), campus), 1)
	}
	var held []func()
	for i := range 2 {
		release, err := turn("north")
		if err != nil {
			t.Fatalf("north's validation %d within its share of 2: %v", i, err)
		}
		held = append(held, release)
	}
	if _, err := turn("north"); err == nil {
		t.Fatal("north took a third of 4 validation slots shared by two campuses")
	}
	release, err := turn("south")
	if err != nil {
		t.Fatalf("south's validation while north holds its share: %v", err)
	}
	release()
	for _, r := range held {
		r()
	}
	if release, err := turn("north"); err != nil {
		t.Errorf("north's validation once its own ended: %v", err)
	} else {
		release()
	}
}

// One campus's large scans wait behind each other, not in front of the
// other campuses': each holds at most its share of the validation
// memory, or one scan larger than that share.
func TestOneCampusCannotTakeAnothersValidationMemory(t *testing.T) {
	const budget = 100
	in := newIntake(t, Config{Campuses: []string{"north", "south"},
		Uploads: Limits{Validating: 8, Wait: 50 * time.Millisecond, ValidationBytes: budget}})
	turn := func(campus string, peak int64) (func(), error) {
		return in.takeUploadTurn(deviceContext(httptest.NewRequest(http.MethodPost, "/v1/exams", nil), httptest.NewRecorder(), campus), peak)
	}
	// North validates one scan larger than its half, alone.
	big, err := turn("north", 70)
	if err != nil {
		t.Fatalf("north's one scan over its share, holding nothing: %v", err)
	}
	if _, err := turn("north", 20); err == nil {
		t.Fatal("north took more while holding its one large scan")
	}
	// South still finds the rest.
	south, err := turn("south", 30)
	if err != nil {
		t.Fatalf("south's scan while north holds its large one: %v", err)
	}
	south()
	big()
	// Within its share, north takes several; past it, it waits.
	a, err := turn("north", 25)
	if err != nil {
		t.Fatal(err)
	}
	b, err := turn("north", 25)
	if err != nil {
		t.Fatalf("north's second scan within its half: %v", err)
	}
	if _, err := turn("north", 1); err == nil {
		t.Error("north passed its half of the validation memory")
	}
	if south, err := turn("south", 50); err != nil {
		t.Errorf("south's half while north holds its own: %v", err)
	} else {
		south()
	}
	a()
	b()
	if in.budget.inUse() != 0 {
		t.Errorf("%d bytes still charged after every scan ended", in.budget.inUse())
	}
	// A turn its campus gives and the gateway refuses gives back what
	// the campus gave.
	southBig, err := turn("south", 70)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := turn("north", 40); err == nil {
		t.Fatal("north's 40 fitted beside south's 70 in a budget of 100")
	}
	if n, s := in.campusBudgets["north"].inUse(), len(in.campusSlots["north"]); n != 0 || s != 0 {
		t.Errorf("after the gateway refused north's turn, north still holds %d bytes and %d slots of its own", n, s)
	}
	southBig()
}

// A spool directory of the intake's own is cleared at start of the files
// an earlier process left there (ciphertext whose key died with it, which
// no quota counts), and of nothing else; one that cannot be used stops
// the intake at start instead of failing every upload.
func TestTheSpoolDirectoryIsClearedOfLeftoversAtStart(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"octflow-upload-123", "octflow-clean-456", "keep.txt"} {
		if err := os.WriteFile(dir+"/"+name, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	newIntake(t, Config{MaxScanBytes: 1024, SpoolDir: dir, SpoolMaxBytes: SpoolBytesFor(1024)})
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, e := range entries {
		left = append(left, e.Name())
	}
	if strings.Join(left, " ") != "keep.txt" {
		t.Errorf("the spool directory holds %v after start, want only keep.txt", left)
	}
	if _, err := New(Config{MaxScanBytes: 1024, SpoolDir: dir + "/missing", SpoolMaxBytes: SpoolBytesFor(1024)}); err == nil ||
		!strings.Contains(err.Error(), "spool directory") {
		t.Errorf("a missing spool directory: %v, want an error naming it", err)
	}
}
