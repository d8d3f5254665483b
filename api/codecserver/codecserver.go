// Package codecserver is the gateway's codec endpoint for the Temporal
// Web UI and CLI: /codec/encode and /codec/decode seal and open payloads
// (package codec) only for a caller of their scope, and /codec/login
// signs a browser in with a session cookie.
package codecserver

import (
	"errors"
	"html"
	"io"
	"math"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"go.uber.org/zap"
	"google.golang.org/protobuf/encoding/protojson"

	"octflow/api/auditing"
	"octflow/api/auth"
	"octflow/api/problems"
	"octflow/codec"
	"octflow/exam"
)

// Config is what the endpoint needs of the gateway.
type Config struct {
	// Codec is the payload codec served. It must be a *codec.Codec,
	// whose payloads name their scope; with another codec the endpoint
	// is not served.
	Codec converter.PayloadCodec
	// Origins are the Web UI origins that may call the endpoint from a
	// browser.
	Origins []string
	// Tokens authenticate bearer tokens and sign-ins.
	Tokens *auth.Tokens
	Logger *zap.Logger
}

// The codec endpoint's limits.
const (
	// codecBodyLimit bounds an encode or decode request (413 over it).
	// The Web UI sends one event's payloads at a time.
	codecBodyLimit = 4 << 20
	// loginBodyLimit bounds the sign-in form (413 over it): it holds a
	// token and nothing else.
	loginBodyLimit = 4 << 10
	// codecSessionTTL is how long a browser stays signed in.
	codecSessionTTL = 8 * time.Hour
	// codecSessionsMax bounds the sessions held; past it the one
	// expiring first is dropped. codecSessionsEach bounds one
	// principal's; past it their own expiring first is dropped.
	codecSessionsMax  = 10_000
	codecSessionsEach = 8
	// A client (an IPv4 address, an IPv6 /64) may fail to sign in
	// loginFailureBurst times at once, then once every loginFailureEvery
	// (429 with Retry-After in between). loginClientsMax bounds the
	// clients tracked; past it the client closest to a full allowance is
	// forgotten.
	loginFailureBurst = 10
	loginFailureEvery = 6 * time.Second
	loginClientsMax   = 10_000
)

// codecCookie carries a browser's codec session to the codec endpoint:
// the Temporal Web UI calls the endpoint itself, with the browser's
// cookies but no header of ours. It holds an opaque session ID (see
// codecSessions), never a token.
const codecCookie = "octflow_codec_session"

// campusHeader names the campus whose scope /codec/encode seals in
// (default: the system's).
const campusHeader = "X-Octflow-Campus"

// codecEndpoint serves the payload codec and its browser sign-in.
type codecEndpoint struct {
	cfg    Config
	sealer *codec.Codec
	// sameOrigin refuses a browser's cross-origin POST unless it comes
	// from one of Origins (CSRF).
	sameOrigin *http.CrossOriginProtection
	sessions   *codecSessions
	failures   *auth.Failures
	now        func() time.Time
}

// Register serves the payload codec on e at /codec/encode and /codec/decode
// (the protocol of Temporal's codec server, which the Web UI and the
// CLI's --codec-endpoint speak). The caller shows a bearer token, or the
// session cookie /codec/login sets.
//
// Each sealed payload names its scope, a campus or the system, and its
// seal authenticates the name (see package codec). /codec/decode opens a
// request's payloads only if the caller may read every scope they name:
// an admin any, a clinician their campuses' (403 otherwise, and nothing
// opened). /codec/encode is for admins: it seals in the system scope, or
// in the campus the X-Octflow-Campus header names. Bodies are bounded
// (413), every answer is audited.
//
// A browser on one of Origins may call the endpoint with its
// cookie (CORS with credentials); any other cross-origin POST from a
// browser is refused (403), so no page can use a signed-in browser's
// session or sign it in to another.
//
// Config.Codec must be a *codec.Codec, whose payloads name their scope;
// with another codec the endpoint is not served.
func Register(e *echo.Echo, cfg Config) {
	sealer, ok := cfg.Codec.(*codec.Codec)
	if !ok {
		cfg.Logger.Error("codec endpoint not served: its payload codec is not octflow's, which binds payloads to campuses")
		return
	}
	ce := &codecEndpoint{cfg: cfg, sealer: sealer, sameOrigin: http.NewCrossOriginProtection(),
		sessions: newCodecSessions(codecSessionTTL, codecSessionsMax, codecSessionsEach),
		failures: auth.NewFailures(loginFailureBurst, loginFailureEvery, loginClientsMax), now: time.Now}
	for _, o := range cfg.Origins {
		if err := ce.sameOrigin.AddTrustedOrigin(o); err != nil {
			cfg.Logger.Warn("codec: a Web UI origin that cannot be trusted is left out: " + err.Error())
		}
	}
	g := e.Group("/codec", ce.cors)
	g.OPTIONS("/*", func(c echo.Context) error { return c.NoContent(http.StatusNoContent) })
	g.POST("/encode", ce.encode, ce.checkOrigin("codec-encode"), ce.auth("codec-encode", auth.RoleAdmin))
	g.POST("/decode", ce.decode, ce.checkOrigin("codec-decode"), ce.auth("codec-decode", auth.RoleAdmin, auth.RoleClinician))
	g.GET("/login", codecLoginPage)
	g.POST("/login", ce.login, ce.checkOrigin("codec-login"))
	g.POST("/logout", ce.logout, ce.checkOrigin("codec-logout"))
}

// cors lets the Web UI's origins call the codec from a browser, with the
// cookie.
func (ce *codecEndpoint) cors(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		origin := c.Request().Header.Get("Origin")
		if origin != "" && slices.Contains(ce.cfg.Origins, origin) {
			h := c.Response().Header()
			h.Set("Access-Control-Allow-Origin", origin)
			h.Set("Access-Control-Allow-Credentials", "true")
			h.Set("Access-Control-Allow-Methods", "POST, OPTIONS")
			h.Set("Access-Control-Allow-Headers", "Content-Type, X-Namespace, Authorization")
			h.Add("Vary", "Origin")
		}
		return next(c)
	}
}

// auditCodec notes a use of the codec, or its refusal, for the request's
// audit entry (auditing.Note): action, with "-system" when a payload of
// the system scope is among those named, and each campus named. status
// is what the request is answered; the status written prevails.
func auditCodec(c echo.Context, action string, scopes []codec.Scope, status int) {
	if slices.Contains(scopes, codec.System) {
		action += "-system"
	}
	auditing.Note(c, action, exam.Ref{})
	for _, sc := range scopes {
		if !sc.IsSystem() {
			auditing.Note(c, action, exam.Ref{Campus: sc.Campus})
		}
	}
}

// checkOrigin refuses a browser's cross-origin request from an origin
// that is not one of Origins (requests from other clients, which
// send neither Sec-Fetch-Site nor Origin, pass).
func (ce *codecEndpoint) checkOrigin(action string) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			if err := ce.sameOrigin.Check(c.Request()); err != nil {
				auditCodec(c, action, nil, http.StatusForbidden)
				return problems.New(http.StatusForbidden, "forbidden",
					"a cross-origin request from a page that is not one of the Web UI's origins (OCTFLOW_CODEC_ORIGINS)")
			}
			return next(c)
		}
	}
}

// auth admits one of roles, by bearer token or session cookie.
func (ce *codecEndpoint) auth(action string, roles ...auth.Role) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			var p auth.Principal
			var found bool
			if token, ok := strings.CutPrefix(c.Request().Header.Get(echo.HeaderAuthorization), "Bearer "); ok {
				p, found = ce.cfg.Tokens.Lookup(strings.TrimSpace(token))
			} else if ck, err := c.Cookie(codecCookie); err == nil {
				p, found = ce.sessions.lookup(ck.Value, ce.now())
			}
			if !found {
				auditCodec(c, action, nil, http.StatusUnauthorized)
				c.Response().Header().Set("WWW-Authenticate", `Bearer realm="octflow"`)
				return problems.New(http.StatusUnauthorized, "unauthenticated",
					"the codec needs an admin's or a clinician's token (bearer, or sign in at /codec/login)")
			}
			auth.Set(c, p)
			if !slices.Contains(roles, p.Role) {
				auditCodec(c, action, nil, http.StatusForbidden)
				return problems.New(http.StatusForbidden, "forbidden", "role "+string(p.Role)+" may not use "+c.Path())
			}
			return next(c)
		}
	}
}

// mayRead reports whether who may read payloads of scope s: an admin
// every scope, a clinician their campuses' (never the system's).
func mayRead(who auth.Principal, s codec.Scope) bool {
	if who.Role == auth.RoleAdmin {
		return true
	}
	return who.Role == auth.RoleClinician && !s.IsSystem() && who.CanSee(s.Campus)
}

// decode opens the payloads of a request, all or none: if one names a
// scope the caller may not read, nothing is opened (403).
func (ce *codecEndpoint) decode(c echo.Context) error {
	const action = "codec-decode"
	payloads, err := readPayloads(c)
	if err != nil {
		auditCodec(c, action, nil, problems.StatusOf(err))
		return err
	}
	var scopes []codec.Scope
	for _, p := range payloads {
		sc, sealed, err := codec.ScopeOf(p)
		if err != nil {
			auditCodec(c, action, nil, http.StatusBadRequest)
			return problems.New(http.StatusBadRequest, "malformed-request", "a payload names a scope octflow does not write")
		}
		if sealed && !slices.Contains(scopes, sc) {
			scopes = append(scopes, sc)
		}
	}
	who := auth.Of(c)
	for _, sc := range scopes {
		if !mayRead(who, sc) {
			auditCodec(c, action, scopes, http.StatusForbidden)
			return problems.New(http.StatusForbidden, "forbidden",
				"payloads of "+describeScope(sc)+" are not this "+string(who.Role)+"'s to read; nothing was opened")
		}
	}
	out, err := ce.sealer.Decode(payloads)
	if err != nil {
		auditCodec(c, action, scopes, http.StatusBadRequest)
		return problems.New(http.StatusBadRequest, "malformed-request",
			"a payload does not open: altered, relabelled, or sealed with a key this gateway does not hold")
	}
	auditCodec(c, action, scopes, http.StatusOK)
	return writePayloads(c, out)
}

// encode seals the payloads of a request (admins only), in the system
// scope or the campus X-Octflow-Campus names.
func (ce *codecEndpoint) encode(c echo.Context) error {
	const action = "codec-encode"
	scope := codec.System
	if campus := c.Request().Header.Get(campusHeader); campus != "" {
		if exam.ValidateCampus(campus) != nil {
			auditCodec(c, action, nil, http.StatusBadRequest)
			return problems.New(http.StatusBadRequest, "malformed-request", campusHeader+" names no campus")
		}
		scope = codec.CampusScope(campus)
	}
	scopes := []codec.Scope{scope}
	payloads, err := readPayloads(c)
	if err != nil {
		auditCodec(c, action, scopes, problems.StatusOf(err))
		return err
	}
	out, err := ce.sealer.InScope(scope).Encode(payloads)
	if err != nil {
		return err
	}
	auditCodec(c, action, scopes, http.StatusOK)
	return writePayloads(c, out)
}

func describeScope(s codec.Scope) string {
	if s.IsSystem() {
		return "the system (no campus)"
	}
	return "campus " + s.Campus
}

// readPayloads reads a codec request's JSON, at most codecBodyLimit.
func readPayloads(c echo.Context) ([]*commonpb.Payload, error) {
	b, err := readBody(c, "application/json", codecBodyLimit)
	if err != nil {
		return nil, err
	}
	var ps commonpb.Payloads
	if err := protojson.Unmarshal(b, &ps); err != nil {
		return nil, problems.New(http.StatusBadRequest, "malformed-request", "want {\"payloads\": [...]} as Temporal's codec protocol sends")
	}
	return ps.GetPayloads(), nil
}

func writePayloads(c echo.Context, ps []*commonpb.Payload) error {
	b, err := protojson.Marshal(&commonpb.Payloads{Payloads: ps})
	if err != nil {
		return err
	}
	return c.Blob(http.StatusOK, echo.MIMEApplicationJSON, b)
}

// readBody reads a request body of media type mediaType (415 otherwise)
// and at most limit bytes (413 over it), stopping as soon as it is over.
func readBody(c echo.Context, mediaType string, limit int64) ([]byte, error) {
	r := c.Request()
	if mt, _, err := mime.ParseMediaType(r.Header.Get(echo.HeaderContentType)); err != nil || mt != mediaType {
		return nil, problems.New(http.StatusUnsupportedMediaType, "unsupported-media", "send "+mediaType)
	}
	tooLarge := problems.New(http.StatusRequestEntityTooLarge, "too-large",
		"this request's body holds at most "+strconv.FormatInt(limit, 10)+" bytes")
	if r.ContentLength > limit {
		return nil, tooLarge
	}
	b, err := io.ReadAll(http.MaxBytesReader(c.Response(), r.Body, limit))
	var over *http.MaxBytesError
	switch {
	case errors.As(err, &over):
		return nil, tooLarge
	case err != nil:
		return nil, problems.New(http.StatusBadRequest, "malformed-request", "the body could not be read")
	}
	return b, nil
}

// codecLoginPage is a form to sign a browser in to the codec.
func codecLoginPage(c echo.Context) error {
	h := c.Response().Header()
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Security-Policy", "default-src 'none'; form-action 'self'; frame-ancestors 'none'")
	h.Set("X-Frame-Options", "DENY")
	return c.HTML(http.StatusOK, `<!doctype html><title>octflow codec</title>
<p>Sign this browser in to octflow's payload codec, so the Temporal Web UI can show the payloads it has sealed.
<form method="post"><label>Admin or clinician token <input name="token" type="password" autocomplete="off"></label>
<button>Sign in</button></form>`)
}

// login signs a browser in: for an admin's or a clinician's token in an
// application/x-www-form-urlencoded form (415 otherwise, never parsed
// as multipart) of at most loginBodyLimit (413), it starts a session
// and sets its cookie. A client that keeps failing is answered 429 with
// Retry-After before its form is read.
func (ce *codecEndpoint) login(c echo.Context) error {
	const action = "codec-login"
	now := ce.now()
	client := auth.ClientOf(c.Request())
	wait, settle := ce.failures.Attempt(client, now)
	if wait > 0 {
		c.Response().Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(wait.Seconds()))))
		auditCodec(c, action, nil, http.StatusTooManyRequests)
		return problems.New(http.StatusTooManyRequests, "rate-limited", "too many failed sign-ins from this address")
	}
	who, err := ce.signIn(c)
	settle(err == nil, ce.now())
	if err != nil {
		auditCodec(c, action, nil, problems.StatusOf(err))
		return err
	}
	id, err := ce.sessions.start(who, now)
	if err != nil {
		return err
	}
	auth.Set(c, who)
	c.SetCookie(ce.sessionCookie(c, id, int(codecSessionTTL/time.Second)))
	c.Response().Header().Set("Cache-Control", "no-store")
	auditCodec(c, action, nil, http.StatusOK)
	return c.HTML(http.StatusOK, "<!doctype html><p>Signed in as "+html.EscapeString(who.Name)+
		" for "+codecSessionTTL.String()+". The Temporal Web UI can now show octflow's payloads.")
}

// signIn reads the sign-in form and checks its token.
func (ce *codecEndpoint) signIn(c echo.Context) (auth.Principal, error) {
	b, err := readBody(c, echo.MIMEApplicationForm, loginBodyLimit)
	if err != nil {
		return auth.Principal{}, err
	}
	form, err := url.ParseQuery(string(b))
	if err != nil {
		return auth.Principal{}, problems.New(http.StatusBadRequest, "malformed-request", "the form does not parse")
	}
	token := strings.TrimSpace(form.Get("token"))
	p, ok := ce.cfg.Tokens.Lookup(token)
	if token == "" || !ok || (p.Role != auth.RoleAdmin && p.Role != auth.RoleClinician) {
		return auth.Principal{}, problems.New(http.StatusUnauthorized, "unauthenticated", "not an admin's or a clinician's token")
	}
	return p, nil
}

// sessionCookie is the browser's session cookie (maxAge < 0 clears it).
// It is SameSite=Strict, except where the gateway serves HTTPS to a Web
// UI on another origin (Origins): that page may be another site (a
// plain-HTTP tunnel to the UI is), and the browser would not send a
// strict cookie with its decode calls, so the cookie is SameSite=None
// (which browsers take only with Secure). Cross-site forgery is refused
// by the origin check (checkOrigin) either way.
func (ce *codecEndpoint) sessionCookie(c echo.Context, value string, maxAge int) *http.Cookie {
	https := c.Scheme() == "https"
	site := http.SameSiteStrictMode
	if https && len(ce.cfg.Origins) > 0 {
		site = http.SameSiteNoneMode
	}
	return &http.Cookie{Name: codecCookie, Value: value, Path: "/codec", HttpOnly: true, Secure: https, SameSite: site, MaxAge: maxAge}
}

// logout ends the browser's session and clears its cookie.
func (ce *codecEndpoint) logout(c echo.Context) error {
	if ck, err := c.Cookie(codecCookie); err == nil {
		if p, ok := ce.sessions.lookup(ck.Value, ce.now()); ok {
			auth.Set(c, p)
		}
		ce.sessions.end(ck.Value)
	}
	c.SetCookie(ce.sessionCookie(c, "", -1))
	auditCodec(c, "codec-logout", nil, http.StatusNoContent)
	return c.NoContent(http.StatusNoContent)
}
