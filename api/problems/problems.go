// Package problems is how the gateway answers what it refuses or fails:
// RFC 9457 problem details (application/problem+json), each with a
// stable type a client can switch on. The gateway and its parts (the
// intake, the codec endpoint, the audit of access decisions) build them
// here, and Handler writes every error a route returns as one.
package problems

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"go.uber.org/zap"

	"octflow/audit"
)

// Problem is an RFC 9457 problem detail. Type is a stable URN a client can
// switch on; Title is its human summary; Detail is about this occurrence.
type Problem struct {
	Type     string `json:"type"`
	Title    string `json:"title"`
	Status   int    `json:"status"`
	Detail   string `json:"detail,omitempty"`
	Instance string `json:"instance,omitempty"`
	// ExamID is set when the problem is about an exam.
	ExamID string `json:"examId,omitempty"`
	// cause is the error the problem reports, if any.
	cause error
}

func (p *Problem) Error() string { return p.Title + ": " + p.Detail }

// Unwrap is the error the problem reports, so that a caller can tell
// causes apart (e.g. octdicom.ErrNotOCT).
func (p *Problem) Unwrap() error { return p.cause }

// maxDetail bounds a problem's detail. A detail names the fault, not the
// bytes sent; the bound is the backstop for a cause's text that quotes
// more of a request than it should.
const maxDetail = 400

// New builds a Problem of a kind, e.g. New(http.StatusConflict, "exam-conflict", "…").
func New(status int, kind, detail string) *Problem {
	return &Problem{Type: "urn:octflow:problem:" + kind, Title: titles[kind], Status: status, Detail: audit.Bound(detail, maxDetail)}
}

// Caused is the Problem of a kind that err reports: its detail is err's
// text, and it unwraps to err.
func Caused(status int, kind string, err error) *Problem {
	p := New(status, kind, err.Error())
	p.cause = err
	return p
}

var titles = map[string]string{
	"malformed-request":  "The request is malformed",
	"unauthenticated":    "A valid bearer token is required",
	"forbidden":          "This token may not do that",
	"not-found":          "No such resource",
	"exam-conflict":      "The exam ID is already taken by a different scan",
	"too-large":          "The upload is too large",
	"unsupported-media":  "Unsupported media type",
	"not-acceptable":     "No media type the Accept header allows",
	"invalid-volume":     "The scan is not a valid OCT volume",
	"invalid-meta":       "The exam metadata is invalid",
	"invalid-callback":   "The callback URL is not allowed",
	"review-refused":     "The exam cannot take this review decision now",
	"not-dead":           "Only a DEAD exam can be run again",
	"unavailable":        "A backing service is unavailable; retry later",
	"internal":           "Internal error",
	"method-not-allowed": "Method not allowed",
	"rate-limited":       "Too many requests",
	"too-slow":           "The upload arrives too slowly",
	"ambiguous-exam":     "The exam ID is used in several of your campuses",
	"not-ready":          "Not ready",
}

// Handler renders every error as problem+json. Internal errors are
// logged with the request ID, never with request bodies (they may hold PHI).
func Handler(logger *zap.Logger) echo.HTTPErrorHandler {
	return func(err error, c echo.Context) {
		if c.Response().Committed {
			return
		}
		var p *Problem
		var he *echo.HTTPError
		switch {
		case errors.As(err, &p):
		case errors.As(err, &he):
			p = fromEchoError(he)
		default:
			logger.Error("request failed", zap.String("method", c.Request().Method),
				zap.String("route", c.Path()), zap.Error(err))
			p = New(http.StatusInternalServerError, "internal", "")
		}
		p.Instance = Instance(c)
		c.Response().Header().Set(echo.HeaderContentType, "application/problem+json")
		_ = c.JSON(p.Status, p)
	}
}

// Instance is the request a problem is about: the route it
// matched (e.g. /v1/exams/:examId), or none. Never the path as sent: it
// would repeat an exam ID that may be an identifier, or whatever bytes a
// client put there.
func Instance(c echo.Context) string {
	if p := c.Path(); p != "" && !strings.Contains(p, "*") {
		return p
	}
	return ""
}

func fromEchoError(he *echo.HTTPError) *Problem {
	detail, _ := he.Message.(string)
	switch he.Code {
	case http.StatusNotFound:
		return New(he.Code, "not-found", detail)
	case http.StatusMethodNotAllowed:
		return New(he.Code, "method-not-allowed", detail)
	case http.StatusRequestEntityTooLarge:
		return New(he.Code, "too-large", detail)
	case http.StatusUnauthorized:
		return New(he.Code, "unauthenticated", detail)
	case http.StatusUnsupportedMediaType:
		return New(he.Code, "unsupported-media", detail)
	}
	if he.Code >= 500 {
		return New(he.Code, "internal", "")
	}
	return New(he.Code, "malformed-request", detail)
}

// JSON is the 400 for a JSON body (what names it) that did not decode:
// where and what went wrong, never the bytes sent (a field name or value
// would be the client's text in the answer and the audit trail).
func JSON(what string, err error) *Problem {
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	detail := what + " is not valid JSON"
	switch {
	case errors.As(err, &syntax):
		detail = fmt.Sprintf("%s is not valid JSON (at byte %d)", what, syntax.Offset)
	case errors.As(err, &typ):
		// Field is a path of the request type's own fields.
		detail = fmt.Sprintf("%s: field %s must be a JSON %s", what, typ.Field, typ.Type.Kind())
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		detail = what + " has a field this API does not take"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		detail = what + " is empty or cut short"
	}
	return New(http.StatusBadRequest, "malformed-request", detail)
}

// StatusOf is the status of a Problem (500 for another error).
func StatusOf(err error) int {
	var p *Problem
	if errors.As(err, &p) {
		return p.Status
	}
	return http.StatusInternalServerError
}

// RetryAfter is d as a Retry-After header: whole seconds, at least 1.
func RetryAfter(d time.Duration) string {
	return strconv.Itoa(max(1, int(d.Round(time.Second).Seconds())))
}
