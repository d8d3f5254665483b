package api

import (
	"html"
	"net/http"
	"slices"
	"strings"

	"github.com/labstack/echo/v4"
	"go.temporal.io/sdk/converter"
)

// codecCookie carries an operator's token to the codec endpoint from a
// browser: the Temporal Web UI calls the endpoint itself, with the
// browser's cookies but no header of ours.
const codecCookie = "octflow_codec"

// codecRoutes serve the payload codec at /codec/encode and /codec/decode
// (the protocol of Temporal's codec server, which the Web UI and the
// CLI's --codec-endpoint speak), for admins and clinicians only: a
// bearer token, or the cookie /codec/login sets. A browser on one of
// CodecOrigins may call it (CORS with credentials).
func (s *Server) codecRoutes(e *echo.Echo) {
	handler := echo.WrapHandler(http.StripPrefix("/codec", converter.NewPayloadCodecHTTPHandler(s.cfg.PayloadCodec)))
	g := e.Group("/codec", s.codecCORS)
	g.OPTIONS("/*", func(c echo.Context) error { return c.NoContent(http.StatusNoContent) })
	g.POST("/encode", handler, s.codecAuth)
	g.POST("/decode", handler, s.codecAuth)
	g.GET("/login", codecLoginPage)
	g.POST("/login", s.codecLogin)
}

// codecCORS lets the Web UI's origins call the codec from a browser,
// with the cookie.
func (s *Server) codecCORS(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		origin := c.Request().Header.Get("Origin")
		if origin != "" && slices.Contains(s.cfg.CodecOrigins, origin) {
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

// codecAuth admits an admin or a clinician, by bearer token or cookie.
func (s *Server) codecAuth(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		token, ok := strings.CutPrefix(c.Request().Header.Get(echo.HeaderAuthorization), "Bearer ")
		if !ok {
			if ck, err := c.Cookie(codecCookie); err == nil {
				token = ck.Value
			}
		}
		p, found := s.cfg.Tokens.lookup(strings.TrimSpace(token))
		switch {
		case token == "" || !found:
			return problem(http.StatusUnauthorized, "unauthenticated", "the codec needs an admin's or a clinician's token (bearer, or sign in at /codec/login)")
		case p.Role != RoleAdmin && p.Role != RoleClinician:
			return problem(http.StatusForbidden, "forbidden", "only admins and clinicians may decode payloads")
		}
		c.Set(principalKey, p)
		return next(c)
	}
}

// codecLoginPage is a form to sign a browser in to the codec.
func codecLoginPage(c echo.Context) error {
	return c.HTML(http.StatusOK, `<!doctype html><title>octflow codec</title>
<p>Sign this browser in to octflow's payload codec, so the Temporal Web UI can show the payloads it has sealed.
<form method="post"><label>Admin or clinician token <input name="token" type="password" autocomplete="off"></label>
<button>Sign in</button></form>`)
}

// codecLogin sets the codec cookie for a valid admin or clinician token.
func (s *Server) codecLogin(c echo.Context) error {
	token := strings.TrimSpace(c.FormValue("token"))
	p, ok := s.cfg.Tokens.lookup(token)
	if !ok || (p.Role != RoleAdmin && p.Role != RoleClinician) {
		return problem(http.StatusUnauthorized, "unauthenticated", "not an admin's or a clinician's token")
	}
	c.SetCookie(&http.Cookie{Name: codecCookie, Value: token, Path: "/codec", HttpOnly: true,
		Secure: c.Scheme() == "https", SameSite: http.SameSiteLaxMode, MaxAge: 8 * 3600})
	return c.HTML(http.StatusOK, "<!doctype html><p>Signed in as "+html.EscapeString(p.Name)+
		" for 8 hours. The Temporal Web UI can now show octflow's payloads.")
}
