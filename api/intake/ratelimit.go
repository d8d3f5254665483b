package intake

import (
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"octflow/api/auth"
	"octflow/api/problems"
)

// RateLimit bounds how fast one device may submit exams, by either
// route: a multipart upload is one exam, a STOW-RS request one per
// instance it carries. The counters live in this api process: with
// several api replicas behind a balancer a device gets the limit once
// per replica.
type RateLimit struct {
	// PerMinute is the sustained rate (default 60 exams a minute).
	PerMinute float64
	// Burst is how many may come at once (default 20).
	Burst int
}

// deviceRates is one token bucket per device, shared by every route that
// submits. A request is admitted when its device has a token; a STOW-RS
// request then pays for the rest of its instances, which may take the
// bucket below zero: the device's next requests wait for it to refill.
// (golang.org/x/time/rate refuses a charge larger than the burst, and a
// 64-instance request from a device with a burst of 20 must be served
// once and then paid for, not refused for ever.)
type deviceRates struct {
	limit     RateLimit
	perSecond float64

	mu      sync.Mutex
	buckets map[string]*bucket
	calls   int
}

type bucket struct {
	tokens float64
	at     time.Time
}

func newDeviceRates(l RateLimit) *deviceRates {
	if l.PerMinute <= 0 {
		l.PerMinute = 60
	}
	if l.Burst <= 0 {
		l.Burst = 20
	}
	return &deviceRates{limit: l, perSecond: l.PerMinute / 60, buckets: map[string]*bucket{}}
}

// bucketLocked is key's bucket, refilled to now.
func (d *deviceRates) bucketLocked(key string, now time.Time) *bucket {
	d.calls++
	if d.calls%1024 == 0 {
		d.sweepLocked(now)
	}
	b := d.buckets[key]
	if b == nil {
		b = &bucket{tokens: float64(d.limit.Burst), at: now}
		d.buckets[key] = b
	}
	b.tokens = min(float64(d.limit.Burst), b.tokens+now.Sub(b.at).Seconds()*d.perSecond)
	b.at = now
	return b
}

// sweepLocked drops the buckets that have refilled: a new one is the same.
func (d *deviceRates) sweepLocked(now time.Time) {
	for k, b := range d.buckets {
		if b.tokens+now.Sub(b.at).Seconds()*d.perSecond >= float64(d.limit.Burst) {
			delete(d.buckets, k)
		}
	}
}

// take admits one exam from key, or says how long until it may.
func (d *deviceRates) take(key string, now time.Time) (ok bool, wait time.Duration) {
	d.mu.Lock()
	defer d.mu.Unlock()
	b := d.bucketLocked(key, now)
	if b.tokens < 1 {
		return false, time.Duration((1 - b.tokens) / d.perSecond * float64(time.Second))
	}
	b.tokens--
	return true, 0
}

// charge makes key pay for n more exams, admitted already.
func (d *deviceRates) charge(key string, n int, now time.Time) {
	if n <= 0 {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.bucketLocked(key, now).tokens -= float64(n)
}

// deviceKey names a device's bucket: device IDs are unique within a
// campus only.
func deviceKey(who auth.Principal) string { return who.Campus + "/" + who.DeviceID }

// DeviceRate answers 429 with Retry-After to a device over its rate
// (middleware of every route that submits).
func (in *Intake) DeviceRate(next echo.HandlerFunc) echo.HandlerFunc {
	d := in.rates
	return func(c echo.Context) error {
		ok, wait := d.take(deviceKey(auth.Of(c)), time.Now())
		if !ok {
			c.Response().Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(wait.Seconds()))))
			return problems.New(http.StatusTooManyRequests, "rate-limited",
				"this device submits faster than "+strconv.FormatFloat(d.limit.PerMinute, 'f', -1, 64)+
					" exams a minute (a STOW-RS request counts each instance)")
		}
		return next(c)
	}
}
