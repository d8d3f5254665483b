package api

import (
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
	"golang.org/x/time/rate"
)

// RateLimit bounds how fast one device may submit. The counters live in
// this api process: with several api replicas behind a balancer a device
// gets the limit once per replica.
type RateLimit struct {
	// PerMinute is the sustained rate (default 60 submissions a minute).
	PerMinute float64
	// Burst is how many may come at once (default 20).
	Burst int
}

// deviceLimit answers 429 with Retry-After to a device over its rate.
func deviceLimit(l RateLimit) echo.MiddlewareFunc {
	if l.PerMinute <= 0 {
		l.PerMinute = 60
	}
	if l.Burst <= 0 {
		l.Burst = 20
	}
	perSecond := l.PerMinute / 60
	retryAfter := strconv.Itoa(int(math.Ceil(1 / perSecond)))
	return middleware.RateLimiterWithConfig(middleware.RateLimiterConfig{
		Store: middleware.NewRateLimiterMemoryStoreWithConfig(middleware.RateLimiterMemoryStoreConfig{
			Rate: rate.Limit(perSecond), Burst: l.Burst, ExpiresIn: 10 * time.Minute,
		}),
		IdentifierExtractor: func(c echo.Context) (string, error) {
			// Device IDs are unique within a campus only.
			who := principal(c)
			return "device:" + who.Campus + "/" + who.DeviceID, nil
		},
		DenyHandler: func(c echo.Context, _ string, _ error) error {
			c.Response().Header().Set("Retry-After", retryAfter)
			return problem(http.StatusTooManyRequests, "rate-limited",
				"this device submits faster than "+strconv.FormatFloat(l.PerMinute, 'f', -1, 64)+" exams a minute")
		},
	})
}
