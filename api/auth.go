package api

import (
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/labstack/echo/v4"

	"octflow/api/auditing"
	"octflow/api/auth"
	"octflow/api/problems"
)

// require admits requests whose bearer token has one of roles.
func require(t *auth.Tokens, roles ...auth.Role) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			h := c.Request().Header.Get(echo.HeaderAuthorization)
			token, ok := strings.CutPrefix(h, "Bearer ")
			if !ok || token == "" {
				c.Response().Header().Set("WWW-Authenticate", `Bearer realm="octflow"`)
				return problems.New(http.StatusUnauthorized, "unauthenticated", "missing bearer token")
			}
			p, ok := t.Lookup(strings.TrimSpace(token))
			if !ok {
				c.Response().Header().Set("WWW-Authenticate", `Bearer realm="octflow", error="invalid_token"`)
				return problems.New(http.StatusUnauthorized, "unauthenticated", "unknown token")
			}
			if !slices.Contains(roles, p.Role) {
				auditing.Refused(c, "role "+string(p.Role)+" not permitted", &p)
				return problems.New(http.StatusForbidden, "forbidden", fmt.Sprintf("role %s may not %s %s", p.Role, c.Request().Method, c.Path()))
			}
			auth.Set(c, p)
			return next(c)
		}
	}
}
