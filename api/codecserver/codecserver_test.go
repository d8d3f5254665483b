package codecserver

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v4"
	commonpb "go.temporal.io/api/common/v1"
	"go.uber.org/zap"
	"google.golang.org/protobuf/encoding/protojson"

	"octflow/api/auditing"
	"octflow/api/auth"
	"octflow/api/problems"
	"octflow/codec"
)

const webUI = "https://temporal-ui.hospital.example"

// codecHarness is a gateway serving the codec, with its audit trail.
type codecHarness struct {
	t      *testing.T
	e      *echo.Echo
	sealer *codec.Codec
	trail  *codecTrail
}

func newCodecHarness(t *testing.T) *codecHarness {
	t.Helper()
	tokens, err := auth.NewTokens([]auth.TokenEntry{
		{SHA256: auth.HashToken("admin"), Principal: auth.Principal{Name: "a", Role: auth.RoleAdmin}},
		{SHA256: auth.HashToken("clin-north"), Principal: auth.Principal{Name: "cn", Role: auth.RoleClinician, Campus: "north"}},
		{SHA256: auth.HashToken("clin-both"), Principal: auth.Principal{Name: "cb", Role: auth.RoleClinician, Campus: "north", Campuses: []string{"south"}}},
		{SHA256: auth.HashToken("dev-north"), Principal: auth.Principal{Name: "d", Role: auth.RoleDevice, DeviceID: "oct-1", Campus: "north"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	keys, err := codec.NewKeys("k")
	if err != nil {
		t.Fatal(err)
	}
	sealer, err := codec.New(keys)
	if err != nil {
		t.Fatal(err)
	}
	// The endpoint as the gateway serves it: every error a problem, every
	// decision audited.
	trail := &codecTrail{}
	e := echo.New()
	e.HTTPErrorHandler = problems.Handler(zap.NewNop())
	e.Use(auditing.New(auditing.Config{Trail: trail, Tokens: tokens, Logger: zap.NewNop()}).Middleware)
	Register(e, Config{Codec: sealer, Origins: []string{webUI}, Tokens: tokens, Logger: zap.NewNop()})
	return &codecHarness{t: t, e: e, sealer: sealer, trail: trail}
}

// seal is a payload holding data, sealed in scope s.
func (h *codecHarness) seal(s codec.Scope, data string) *commonpb.Payload {
	h.t.Helper()
	ps, err := h.sealer.InScope(s).Encode([]*commonpb.Payload{{Metadata: map[string][]byte{"encoding": []byte("json/plain")}, Data: []byte(data)}})
	if err != nil {
		h.t.Fatal(err)
	}
	return ps[0]
}

func payloadsJSON(t *testing.T, ps ...*commonpb.Payload) []byte {
	t.Helper()
	b, err := protojson.Marshal(&commonpb.Payloads{Payloads: ps})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// do serves one request; edit may change it first.
func (h *codecHarness) do(method, path string, body io.Reader, edit func(*http.Request)) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, path, body)
	if edit != nil {
		edit(req)
	}
	rec := httptest.NewRecorder()
	h.e.ServeHTTP(rec, req)
	return rec
}

// codecCall posts payloads to /codec/<op> with a bearer token ("" none).
func (h *codecHarness) codecCall(op, token string, body []byte, edit func(*http.Request)) *httptest.ResponseRecorder {
	return h.do(http.MethodPost, "/codec/"+op, bytes.NewReader(body), func(r *http.Request) {
		r.Header.Set("Content-Type", "application/json")
		if token != "" {
			r.Header.Set("Authorization", "Bearer "+token)
		}
		if edit != nil {
			edit(r)
		}
	})
}

// login posts the sign-in form from addr.
func (h *codecHarness) login(token, addr string, edit func(*http.Request)) *httptest.ResponseRecorder {
	form := url.Values{"token": {token}}.Encode()
	return h.do(http.MethodPost, "/codec/login", strings.NewReader(form), func(r *http.Request) {
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		r.RemoteAddr = addr
		if edit != nil {
			edit(r)
		}
	})
}

// wantProblem checks an RFC 9457 answer of status and kind.
func wantProblem(t *testing.T, rec *httptest.ResponseRecorder, status int, kind string) {
	t.Helper()
	var p problems.Problem
	if rec.Code != status || rec.Header().Get("Content-Type") != "application/problem+json" ||
		json.Unmarshal(rec.Body.Bytes(), &p) != nil || p.Type != "urn:octflow:problem:"+kind || p.Status != status {
		t.Errorf("got %d %s %s, want a %d %s problem", rec.Code, rec.Header().Get("Content-Type"), rec.Body, status, kind)
	}
}

func opened(t *testing.T, rec *httptest.ResponseRecorder) []string {
	t.Helper()
	var ps commonpb.Payloads
	if err := protojson.Unmarshal(rec.Body.Bytes(), &ps); err != nil {
		t.Fatalf("answer %s: %v", rec.Body, err)
	}
	var out []string
	for _, p := range ps.GetPayloads() {
		out = append(out, string(p.GetData()))
	}
	return out
}

func TestCodecDecodesOnlyTheScopesTheCallerMayRead(t *testing.T) {
	h := newCodecHarness(t)
	north := h.seal(codec.CampusScope("north"), "north's review note")
	south := h.seal(codec.CampusScope("south"), "south's callback URL")
	system := h.seal(codec.System, "the fleet's nodes")
	plain := &commonpb.Payload{Metadata: map[string][]byte{"encoding": []byte("json/plain")}, Data: []byte(`"in clear"`)}
	for _, tc := range []struct {
		name     string
		token    string
		payloads []*commonpb.Payload
		status   int
		kind     string
	}{
		{"a clinician, their campus", "clin-north", []*commonpb.Payload{north, plain}, 200, ""},
		{"a clinician, another campus", "clin-north", []*commonpb.Payload{south}, 403, "forbidden"},
		{"a clinician, theirs and another's at once", "clin-north", []*commonpb.Payload{north, south}, 403, "forbidden"},
		{"a clinician, the system's", "clin-north", []*commonpb.Payload{system}, 403, "forbidden"},
		{"a clinician of two campuses, the second", "clin-both", []*commonpb.Payload{south, north}, 200, ""},
		{"an admin, every scope", "admin", []*commonpb.Payload{north, south, system}, 200, ""},
		{"a device", "dev-north", []*commonpb.Payload{north}, 403, "forbidden"},
		{"an unknown token", "nope", []*commonpb.Payload{north}, 401, "unauthenticated"},
		{"no token", "", []*commonpb.Payload{north}, 401, "unauthenticated"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := h.codecCall("decode", tc.token, payloadsJSON(t, tc.payloads...), nil)
			if tc.status != 200 {
				wantProblem(t, rec, tc.status, tc.kind)
				for _, secret := range []string{"north's", "south's", "fleet's"} {
					if strings.Contains(rec.Body.String(), secret) {
						t.Errorf("a refused answer holds %q", secret)
					}
				}
				return
			}
			if rec.Code != 200 {
				t.Fatalf("%d %s", rec.Code, rec.Body)
			}
			got := opened(t, rec)
			for i, p := range tc.payloads {
				want := map[*commonpb.Payload]string{north: "north's review note", south: "south's callback URL",
					system: "the fleet's nodes", plain: `"in clear"`}[p]
				if got[i] != want {
					t.Errorf("payload %d: %q, want %q", i, got[i], want)
				}
			}
		})
	}
}

// A payload of one campus relabelled as another's opens for nobody.
func TestCodecOpensNoPayloadRelabelledWithTheCallersCampus(t *testing.T) {
	h := newCodecHarness(t)
	stolen := h.seal(codec.CampusScope("south"), "south's review note")
	stolen.Metadata[codec.ScopeMeta] = []byte(codec.CampusScope("north").String())
	rec := h.codecCall("decode", "clin-north", payloadsJSON(t, stolen), nil)
	wantProblem(t, rec, http.StatusBadRequest, "malformed-request")
	if strings.Contains(rec.Body.String(), "south's") {
		t.Error("the relabelled payload opened")
	}
}

func TestCodecEncodesForAdminsOnlyInTheScopeTheyName(t *testing.T) {
	h := newCodecHarness(t)
	body := payloadsJSON(t, &commonpb.Payload{Metadata: map[string][]byte{"encoding": []byte("json/plain")}, Data: []byte(`"minted"`)})
	wantProblem(t, h.codecCall("encode", "clin-north", body, nil), http.StatusForbidden, "forbidden")
	wantProblem(t, h.codecCall("encode", "dev-north", body, nil), http.StatusForbidden, "forbidden")
	wantProblem(t, h.codecCall("encode", "", body, nil), http.StatusUnauthorized, "unauthenticated")
	wantProblem(t, h.codecCall("encode", "admin", body, func(r *http.Request) { r.Header.Set(campusHeader, "North!") }),
		http.StatusBadRequest, "malformed-request")
	for _, tc := range []struct {
		campus string
		want   codec.Scope
	}{{"", codec.System}, {"north", codec.CampusScope("north")}} {
		rec := h.codecCall("encode", "admin", body, func(r *http.Request) {
			if tc.campus != "" {
				r.Header.Set(campusHeader, tc.campus)
			}
		})
		var ps commonpb.Payloads
		if rec.Code != 200 || protojson.Unmarshal(rec.Body.Bytes(), &ps) != nil || len(ps.Payloads) != 1 {
			t.Fatalf("encode for an admin: %d %s", rec.Code, rec.Body)
		}
		if s, sealed, err := codec.ScopeOf(ps.Payloads[0]); !sealed || err != nil || s != tc.want {
			t.Errorf("sealed in %v (%v %v), want %v", s, sealed, err, tc.want)
		}
		if out, err := h.sealer.Decode(ps.Payloads); err != nil || string(out[0].GetData()) != `"minted"` {
			t.Errorf("what the admin sealed does not open: %v", err)
		}
	}
}

// unsized is a body whose length the server is not told.
type unsized struct{ io.Reader }

func TestCodecBodiesAreBounded(t *testing.T) {
	h := newCodecHarness(t)
	big := payloadsJSON(t, &commonpb.Payload{Data: bytes.Repeat([]byte("x"), codecBodyLimit)})
	// Told the length, and not told it (read until it is over the limit).
	wantProblem(t, h.codecCall("decode", "admin", big, nil), http.StatusRequestEntityTooLarge, "too-large")
	rec := h.do(http.MethodPost, "/codec/decode", unsized{bytes.NewReader(big)}, func(r *http.Request) {
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("Authorization", "Bearer admin")
	})
	wantProblem(t, rec, http.StatusRequestEntityTooLarge, "too-large")
	wantProblem(t, h.codecCall("encode", "admin", big, nil), http.StatusRequestEntityTooLarge, "too-large")
	// Just under the limit is served.
	fits := payloadsJSON(t, &commonpb.Payload{Data: bytes.Repeat([]byte("x"), codecBodyLimit/2)})
	if rec := h.codecCall("decode", "admin", fits, nil); rec.Code != 200 {
		t.Errorf("a body under the limit: %d", rec.Code)
	}
	wantProblem(t, h.codecCall("decode", "admin", fits, func(r *http.Request) { r.Header.Set("Content-Type", "text/plain") }),
		http.StatusUnsupportedMediaType, "unsupported-media")
	// The sign-in form holds a token, nothing more.
	form := "token=" + strings.Repeat("x", loginBodyLimit)
	rec = h.do(http.MethodPost, "/codec/login", unsized{strings.NewReader(form)}, func(r *http.Request) {
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	})
	wantProblem(t, rec, http.StatusRequestEntityTooLarge, "too-large")
}

// A multipart sign-in is refused before its body is read: nothing
// reaches memory or the temp dir (the upload spool), even with a valid
// token in it.
func TestCodecLoginTakesOnlyAURLEncodedForm(t *testing.T) {
	h := newCodecHarness(t)
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	mw.WriteField("token", "clin-north")
	fw, _ := mw.CreateFormFile("filler", "filler.bin")
	fw.Write(bytes.Repeat([]byte{0}, 12<<20)) // over any multipart memory limit
	mw.Close()
	read := &countingReader{r: &body}
	rec := h.do(http.MethodPost, "/codec/login", read, func(r *http.Request) {
		r.Header.Set("Content-Type", mw.FormDataContentType())
	})
	wantProblem(t, rec, http.StatusUnsupportedMediaType, "unsupported-media")
	if read.n > 0 {
		t.Errorf("%d bytes of a refused form were read", read.n)
	}
	if entries, _ := os.ReadDir(tmp); len(entries) > 0 {
		t.Errorf("the temp dir holds %d files after a refused form", len(entries))
	}
	if len(rec.Result().Cookies()) > 0 {
		t.Error("a multipart form signed in")
	}
}

type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

func TestCodecSessionCookieIsAnOpaqueSessionNotTheToken(t *testing.T) {
	h := newCodecHarness(t)
	north := payloadsJSON(t, h.seal(codec.CampusScope("north"), "north's note"))
	rec := h.login("clin-north", "192.0.2.1:1000", nil)
	if rec.Code != 200 {
		t.Fatalf("sign-in: %d %s", rec.Code, rec.Body)
	}
	cookies := rec.Result().Cookies()
	if len(cookies) != 1 {
		t.Fatalf("cookies %v", cookies)
	}
	ck := cookies[0]
	if strings.Contains(ck.Value, "clin-north") || ck.Value == auth.HashToken("clin-north") || len(ck.Value) < 43 {
		t.Errorf("the cookie %q is the token or a function of it, or short", ck.Value)
	}
	if !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode || ck.Path != "/codec" || ck.Secure ||
		ck.MaxAge != int(codecSessionTTL/time.Second) {
		t.Errorf("cookie attributes %+v", ck)
	}
	// Served over HTTPS to a UI on another origin, the cookie must cross
	// sites (a tunnel's http://localhost page is another site), which
	// browsers allow only to a Secure SameSite=None cookie.
	rec = h.login("clin-north", "192.0.2.1:1000", func(r *http.Request) { r.TLS = &tls.ConnectionState{} })
	if cs := rec.Result().Cookies(); rec.Code != 200 || len(cs) != 1 || cs[0].SameSite != http.SameSiteNoneMode || !cs[0].Secure || !cs[0].HttpOnly {
		t.Errorf("sign-in over HTTPS: %d, cookies %+v", rec.Code, cs)
	}
	withCookie := func(v string) func(*http.Request) {
		return func(r *http.Request) { r.AddCookie(&http.Cookie{Name: codecCookie, Value: v}) }
	}
	if rec := h.codecCall("decode", "", north, withCookie(ck.Value)); rec.Code != 200 {
		t.Errorf("decode with the session: %d %s", rec.Code, rec.Body)
	}
	// The token itself is no session.
	wantProblem(t, h.codecCall("decode", "", north, withCookie("clin-north")), http.StatusUnauthorized, "unauthenticated")
	// Each sign-in is a session of its own.
	if again := h.login("clin-north", "192.0.2.1:1000", nil).Result().Cookies(); len(again) != 1 || again[0].Value == ck.Value {
		t.Errorf("a second sign-in reused the session: %v", again)
	}
	// Signed out, the session opens nothing.
	out := h.do(http.MethodPost, "/codec/logout", nil, withCookie(ck.Value))
	if out.Code != http.StatusNoContent || len(out.Result().Cookies()) != 1 || out.Result().Cookies()[0].MaxAge >= 0 {
		t.Errorf("sign-out: %d %v", out.Code, out.Result().Cookies())
	}
	wantProblem(t, h.codecCall("decode", "", north, withCookie(ck.Value)), http.StatusUnauthorized, "unauthenticated")
	// Over TLS the cookie is Secure.
	tlsRec := h.login("clin-north", "192.0.2.1:1000", func(r *http.Request) { r.TLS = &tls.ConnectionState{} })
	if c := tlsRec.Result().Cookies(); len(c) != 1 || !c[0].Secure {
		t.Errorf("over TLS: %v", c)
	}
}

func TestCodecSessionsEndAndAreBounded(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 8, 0, 0, 0, time.UTC)
	s := newCodecSessions(time.Hour, 2, 8)
	who := auth.Principal{Name: "cn", Role: auth.RoleClinician, Campus: "north"}
	a, _ := s.start(who, t0)
	if p, ok := s.lookup(a, t0.Add(59*time.Minute)); !ok || p.Name != "cn" {
		t.Errorf("within the hour: %v %v", p, ok)
	}
	if _, ok := s.lookup(a, t0.Add(time.Hour)); ok {
		t.Error("a session outlived its hour")
	}
	// Full: the session that ends first goes.
	b, _ := s.start(who, t0)
	c, _ := s.start(who, t0.Add(time.Minute))
	d, _ := s.start(who, t0.Add(2*time.Minute))
	if len(s.byHash) != 2 {
		t.Errorf("%d sessions held, want at most 2", len(s.byHash))
	}
	now := t0.Add(3 * time.Minute)
	if _, ok := s.lookup(b, now); ok {
		t.Error("the oldest session was kept past the bound")
	}
	for _, id := range []string{c, d} {
		if _, ok := s.lookup(id, now); !ok {
			t.Error("a newer session was dropped")
		}
	}
}

func TestCodecRefusesCrossOriginBrowserRequests(t *testing.T) {
	h := newCodecHarness(t)
	from := func(origin, site string) func(*http.Request) {
		return func(r *http.Request) {
			r.Header.Set("Origin", origin)
			r.Header.Set("Sec-Fetch-Site", site)
		}
	}
	// Another site may neither sign a browser in (login CSRF) nor use
	// its session.
	wantProblem(t, h.login("clin-north", "192.0.2.1:1000", from("https://evil.example", "cross-site")), http.StatusForbidden, "forbidden")
	ck := h.login("clin-north", "192.0.2.1:1000", nil).Result().Cookies()[0]
	north := payloadsJSON(t, h.seal(codec.CampusScope("north"), "north's note"))
	withSession := func(edit func(*http.Request)) func(*http.Request) {
		return func(r *http.Request) {
			r.AddCookie(ck)
			edit(r)
		}
	}
	wantProblem(t, h.codecCall("decode", "", north, withSession(from("https://evil.example", "same-site"))), http.StatusForbidden, "forbidden")
	wantProblem(t, h.do(http.MethodPost, "/codec/logout", nil, withSession(from("https://evil.example", "cross-site"))), http.StatusForbidden, "forbidden")
	// The Web UI's origin may, and so may the gateway's own form.
	rec := h.codecCall("decode", "", north, withSession(from(webUI, "same-site")))
	if rec.Code != 200 || rec.Header().Get("Access-Control-Allow-Origin") != webUI || rec.Header().Get("Access-Control-Allow-Credentials") != "true" {
		t.Errorf("the Web UI's decode: %d %v", rec.Code, rec.Header())
	}
	if rec := h.login("clin-north", "192.0.2.1:1000", from("http://example.com", "same-origin")); rec.Code != 200 {
		t.Errorf("the gateway's own form: %d %s", rec.Code, rec.Body)
	}
	// The Web UI's preflight.
	pre := h.do(http.MethodOptions, "/codec/decode", nil, func(r *http.Request) {
		r.Header.Set("Origin", webUI)
		r.Header.Set("Access-Control-Request-Method", "POST")
	})
	if pre.Code != http.StatusNoContent || pre.Header().Get("Access-Control-Allow-Origin") != webUI {
		t.Errorf("preflight: %d %v", pre.Code, pre.Header())
	}
}

func TestCodecLoginFailuresAreRateLimitedPerClient(t *testing.T) {
	h := newCodecHarness(t)
	const attacker = "198.51.100.7:4000"
	for i := range loginFailureBurst - 1 {
		wantProblem(t, h.login("guess-"+strconv.Itoa(i), attacker, nil), http.StatusUnauthorized, "unauthenticated")
	}
	// A form refused unread counts as a failure too.
	wantProblem(t, h.login("clin-north", attacker, func(r *http.Request) { r.Header.Set("Content-Type", "multipart/form-data; boundary=x") }),
		http.StatusUnsupportedMediaType, "unsupported-media")
	// Over the allowance even a valid token waits, and the form is not read.
	rec := h.login("clin-north", attacker, nil)
	wantProblem(t, rec, http.StatusTooManyRequests, "rate-limited")
	if ra, err := strconv.Atoi(rec.Header().Get("Retry-After")); err != nil || ra < 1 || ra > int(loginFailureEvery/time.Second) {
		t.Errorf("Retry-After %q", rec.Header().Get("Retry-After"))
	}
	// Another client is not held up.
	if rec := h.login("clin-north", "192.0.2.50:4000", nil); rec.Code != 200 {
		t.Errorf("another client: %d %s", rec.Code, rec.Body)
	}
}

func TestOnePrincipalCannotSignOthersOut(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 8, 0, 0, 0, time.UTC)
	s := newCodecSessions(time.Hour, 10, 3)
	other := auth.Principal{Name: "dr-kim", Role: auth.RoleClinician, Campus: "north"}
	kept, _ := s.start(other, t0)
	flood := auth.Principal{Name: "dr-lee", Role: auth.RoleClinician, Campus: "north"}
	var last []string
	for i := range 50 {
		id, _ := s.start(flood, t0.Add(time.Duration(i)*time.Second))
		last = append(last, id)
	}
	now := t0.Add(time.Minute)
	if _, ok := s.lookup(kept, now); !ok {
		t.Fatal("another clinician's session was dropped by one clinician's sign-ins")
	}
	if n := len(s.byHash); n != 4 {
		t.Errorf("%d sessions held, want the other's and the flood's last 3", n)
	}
	for _, id := range last[len(last)-3:] {
		if _, ok := s.lookup(id, now); !ok {
			t.Error("one of the flooding principal's newest sessions was dropped instead of its oldest")
		}
	}
}
