// Package auth is who asks the gateway: the Principal a bearer token
// names (a role, a device, its campuses; only tokens' SHA-256 are
// configured), the Principal a request holds once a route admitted it,
// and how often a client that shows no valid credential may try
// (Failures).
package auth

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"

	"github.com/labstack/echo/v4"

	"octflow/exam"
)

// Role is what a token may do.
type Role string

// The roles.
const (
	RoleDevice    Role = "device"
	RoleClinician Role = "clinician"
	RoleAdmin     Role = "admin"
	// RoleRouter is a DICOM router's (e.g. Orthanc's): it stores
	// instances by STOW-RS for any device of its one campus.
	RoleRouter Role = "router"
)

// Principal is who a request comes from. A campus is a tenant: a device
// belongs to one campus, a clinician works for one or more, an admin
// sees all.
type Principal struct {
	Name     string `json:"name"`
	Role     Role   `json:"role"`
	DeviceID string `json:"deviceId,omitempty"` // devices and routers only
	// Campus is a device's campus, or a clinician's home campus (the
	// default of their requests).
	Campus string `json:"campus,omitempty"`
	// Campuses are the further campuses a clinician may read and review.
	Campuses []string `json:"campuses,omitempty"`
	// Urgent says a device or router may send urgent exams; another's
	// urgent is taken as normal (see intake.AllowedPriority).
	Urgent bool `json:"urgent,omitempty"`
}

// CanSee reports whether the principal may see campus's exams.
func (p Principal) CanSee(campus string) bool {
	switch p.Role {
	case RoleAdmin:
		return true
	case RoleDevice, RoleRouter:
		return campus == p.Campus
	}
	return campus == p.Campus || slices.Contains(p.Campuses, campus)
}

// Scope lists the campuses a device or clinician may see (nil for an
// admin: every campus).
func (p Principal) Scope() []string {
	if p.Role == RoleAdmin {
		return nil
	}
	out := slices.Clone(p.Campuses)
	if p.Campus != "" && !slices.Contains(out, p.Campus) {
		out = append([]string{p.Campus}, out...)
	}
	return out
}

// TokenEntry is one configured token: only its SHA-256 is kept.
type TokenEntry struct {
	SHA256 string `json:"sha256"`
	Principal
}

// Tokens authenticates bearer tokens against their hashes.
type Tokens struct {
	byHash map[[32]byte]Principal
}

// NewTokens checks and indexes token entries.
func NewTokens(entries []TokenEntry) (*Tokens, error) {
	t := &Tokens{byHash: map[[32]byte]Principal{}}
	uploaders := map[string]bool{}
	for i, e := range entries {
		raw, err := hex.DecodeString(e.SHA256)
		if err != nil || len(raw) != 32 {
			return nil, fmt.Errorf("token %d: sha256 must be 64 hex digits", i)
		}
		switch e.Role {
		case RoleDevice, RoleRouter:
			if e.DeviceID == "" || e.Campus == "" || len(e.Campuses) > 0 {
				return nil, fmt.Errorf("token %d: a %s token needs a deviceId and one campus", i, e.Role)
			}
		case RoleClinician:
			if e.Campus == "" && len(e.Campuses) == 0 {
				return nil, fmt.Errorf("token %d: a clinician token needs a campus or campuses", i)
			}
		case RoleAdmin:
		default:
			return nil, fmt.Errorf("token %d: unknown role %q", i, e.Role)
		}
		if e.Name == "" {
			return nil, fmt.Errorf("token %d: a name is needed (the audit trail names each caller)", i)
		}
		if (e.Role == RoleDevice || e.Role == RoleRouter) && uploaders[e.Name] {
			return nil, fmt.Errorf("token %d: another device or router is named %q: names tell whose exams are whose", i, e.Name)
		}
		if e.Role == RoleDevice || e.Role == RoleRouter {
			uploaders[e.Name] = true
		}
		for _, c := range append([]string{e.Campus}, e.Campuses...) {
			if c == "" {
				continue
			}
			if err := exam.ValidateCampus(c); err != nil {
				return nil, fmt.Errorf("token %d: %w", i, err)
			}
		}
		t.byHash[[32]byte(raw)] = e.Principal
	}
	return t, nil
}

// UploadCampuses are the campuses whose devices or routers may upload,
// sorted: the intake keeps each of them its share.
func (t *Tokens) UploadCampuses() []string {
	var out []string
	if t == nil {
		return nil
	}
	for _, p := range t.byHash {
		if (p.Role == RoleDevice || p.Role == RoleRouter) && !slices.Contains(out, p.Campus) {
			out = append(out, p.Campus)
		}
	}
	slices.Sort(out)
	return out
}

// LoadTokens reads a JSON array of TokenEntry from path.
func LoadTokens(path string) (*Tokens, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read tokens: %w", err)
	}
	var entries []TokenEntry
	if err := json.Unmarshal(b, &entries); err != nil {
		return nil, fmt.Errorf("parse tokens %s: %w", path, err)
	}
	return NewTokens(entries)
}

// HashToken is the SHA-256 hex of a token, as kept in configuration.
func HashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// Lookup is the principal of a token.
func (t *Tokens) Lookup(token string) (Principal, bool) {
	// Looking up by hash means timing can reveal at most something about
	// a hash, never about a stored token.
	p, ok := t.byHash[sha256.Sum256([]byte(token))]
	return p, ok
}

// Bearer is the principal of the request's bearer token, if it names one
// (before any route has admitted the request).
func (t *Tokens) Bearer(r *http.Request) (Principal, bool) {
	token, ok := strings.CutPrefix(r.Header.Get(echo.HeaderAuthorization), "Bearer ")
	if t == nil || !ok || strings.TrimSpace(token) == "" {
		return Principal{}, false
	}
	return t.Lookup(strings.TrimSpace(token))
}

const principalKey = "octflow.principal"

// Of is the principal a route admitted the request as (the zero
// Principal before, or when none was).
func Of(c echo.Context) Principal {
	p, _ := c.Get(principalKey).(Principal)
	return p
}

// Set makes p the request's principal.
func Set(c echo.Context, p Principal) { c.Set(principalKey, p) }
