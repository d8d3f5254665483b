package api

import (
	"errors"
	"net/http"
	"strings"

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

// problem builds a Problem of a kind, e.g. problem(http.StatusConflict, "exam-conflict", "…").
func problem(status int, kind, detail string) *Problem {
	return &Problem{Type: "urn:octflow:problem:" + kind, Title: titles[kind], Status: status, Detail: audit.Bound(detail, maxDetail)}
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

// errorHandler renders every error as problem+json. Internal errors are
// logged with the request ID, never with request bodies (they may hold PHI).
func errorHandler(logger *zap.Logger) echo.HTTPErrorHandler {
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
			p = problem(http.StatusInternalServerError, "internal", "")
		}
		p.Instance = problemInstance(c)
		c.Response().Header().Set(echo.HeaderContentType, "application/problem+json")
		_ = c.JSON(p.Status, p)
	}
}

// problemInstance is the request a problem is about: the route it
// matched (e.g. /v1/exams/:examId), or none. Never the path as sent: it
// would repeat an exam ID that may be an identifier, or whatever bytes a
// client put there.
func problemInstance(c echo.Context) string {
	if p := c.Path(); p != "" && !strings.Contains(p, "*") {
		return p
	}
	return ""
}

func fromEchoError(he *echo.HTTPError) *Problem {
	detail, _ := he.Message.(string)
	switch he.Code {
	case http.StatusNotFound:
		return problem(he.Code, "not-found", detail)
	case http.StatusMethodNotAllowed:
		return problem(he.Code, "method-not-allowed", detail)
	case http.StatusRequestEntityTooLarge:
		return problem(he.Code, "too-large", detail)
	case http.StatusUnauthorized:
		return problem(he.Code, "unauthenticated", detail)
	case http.StatusUnsupportedMediaType:
		return problem(he.Code, "unsupported-media", detail)
	}
	if he.Code >= 500 {
		return problem(he.Code, "internal", "")
	}
	return problem(he.Code, "malformed-request", detail)
}
