package api

import (
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/labstack/echo/v4"

	"octflow/api/auditing"
	"octflow/api/auth"
)

// Who may call the gateway is package auth's; these are its names as the
// gateway's callers and its configuration (Config.Tokens) use them.
type (
	// Role is what a token may do (auth.Role).
	Role = auth.Role
	// Principal is who a request comes from (auth.Principal).
	Principal = auth.Principal
	// TokenEntry is one configured token (auth.TokenEntry).
	TokenEntry = auth.TokenEntry
	// Tokens authenticates bearer tokens (auth.Tokens).
	Tokens = auth.Tokens
)

// The roles (see auth.Role).
const (
	RoleDevice    = auth.RoleDevice
	RoleClinician = auth.RoleClinician
	RoleAdmin     = auth.RoleAdmin
	RoleRouter    = auth.RoleRouter
)

// NewTokens checks and indexes token entries (auth.NewTokens).
func NewTokens(entries []TokenEntry) (*Tokens, error) { return auth.NewTokens(entries) }

// LoadTokens reads a JSON array of TokenEntry from path (auth.LoadTokens).
func LoadTokens(path string) (*Tokens, error) { return auth.LoadTokens(path) }

// HashToken is the SHA-256 hex of a token, as kept in configuration
// (auth.HashToken).
func HashToken(token string) string { return auth.HashToken(token) }

// require admits requests whose bearer token has one of roles.
func require(t *Tokens, roles ...Role) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			h := c.Request().Header.Get(echo.HeaderAuthorization)
			token, ok := strings.CutPrefix(h, "Bearer ")
			if !ok || token == "" {
				c.Response().Header().Set("WWW-Authenticate", `Bearer realm="octflow"`)
				return problem(http.StatusUnauthorized, "unauthenticated", "missing bearer token")
			}
			p, ok := t.Lookup(strings.TrimSpace(token))
			if !ok {
				c.Response().Header().Set("WWW-Authenticate", `Bearer realm="octflow", error="invalid_token"`)
				return problem(http.StatusUnauthorized, "unauthenticated", "unknown token")
			}
			if !slices.Contains(roles, p.Role) {
				auditing.Refused(c, "role "+string(p.Role)+" not permitted", &p)
				return problem(http.StatusForbidden, "forbidden", fmt.Sprintf("role %s may not %s %s", p.Role, c.Request().Method, c.Path()))
			}
			auth.Set(c, p)
			return next(c)
		}
	}
}

// principal is the principal a route admitted the request as (auth.Of).
func principal(c echo.Context) Principal { return auth.Of(c) }
