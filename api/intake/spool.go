package intake

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
	"go.uber.org/zap"

	"octflow/api/auth"
	"octflow/api/problems"
)

// spool holds an upload on disk while it is checked. The upload as sent
// names the patient, so it is never written in clear: the file is
// encrypted (AES-256-CTR) with a key that lives only in this request's
// memory, and a process that dies before removing it leaves only
// ciphertext nobody can read.
type spool struct {
	f     *os.File
	block cipher.Block
	n     int64 // bytes written
}

func newSpool(dir string) (*spool, error) {
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, err
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	f, err := os.CreateTemp(dir, "octflow-upload-*")
	if err != nil {
		return nil, err
	}
	return &spool{f: f, block: block}, nil
}

// Write appends encrypted bytes.
func (s *spool) Write(p []byte) (int, error) {
	buf := make([]byte, len(p))
	s.xor(buf, p, s.n)
	n, err := s.f.WriteAt(buf, s.n)
	s.n += int64(n)
	return n, err
}

// reader reads the spooled upload back in clear, seeking as the DICOM
// reader needs.
func (s *spool) reader() (io.ReadSeeker, error) {
	return io.NewSectionReader(spoolDecrypter{s}, 0, s.n), nil
}

// spoolPatterns are the names of the spool's files (newSpool, and the
// de-identified copy of validate).
var spoolPatterns = []string{"octflow-upload-*", "octflow-clean-*"}

// clearSpool removes from dir, the intake's own spool directory, the
// files an earlier process left there when it died mid-upload: their
// keys died with it, and no quota counts them. It fails when dir cannot
// be listed or written, which every upload would then fail on.
func clearSpool(dir string, log *zap.Logger) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("spool directory: %w", err)
	}
	removed := 0
	for _, e := range entries {
		for _, p := range spoolPatterns {
			if ok, _ := filepath.Match(p, e.Name()); ok && e.Type().IsRegular() {
				if err := os.Remove(filepath.Join(dir, e.Name())); err != nil {
					return fmt.Errorf("spool directory: %w", err)
				}
				removed++
			}
		}
	}
	probe, err := os.CreateTemp(dir, "octflow-upload-*")
	if err != nil {
		return fmt.Errorf("spool directory: %w", err)
	}
	probe.Close()
	os.Remove(probe.Name())
	if removed > 0 {
		log.Info("removed the spool files an earlier process left", zap.String("dir", dir), zap.Int("files", removed))
	}
	return nil
}

func (s *spool) remove() {
	s.f.Close()
	os.Remove(s.f.Name())
}

// xor applies the key stream at offset off of the upload to src.
func (s *spool) xor(dst, src []byte, off int64) {
	var iv [aes.BlockSize]byte
	binary.BigEndian.PutUint64(iv[8:], uint64(off/aes.BlockSize))
	stream := cipher.NewCTR(s.block, iv[:])
	if skip := int(off % aes.BlockSize); skip > 0 {
		var pad [aes.BlockSize]byte
		stream.XORKeyStream(pad[:skip], pad[:skip])
	}
	stream.XORKeyStream(dst, src)
}

type spoolDecrypter struct{ s *spool }

func (d spoolDecrypter) ReadAt(p []byte, off int64) (int, error) {
	n, err := d.s.f.ReadAt(p, off)
	d.s.xor(p[:n], p[:n], off)
	return n, err
}

// UploadPace says how slowly an upload may arrive: an idle connection
// or a trickle would otherwise hold a connection for ever.
type UploadPace struct {
	// Idle is the longest gap between two reads of the body (default 30 s).
	Idle time.Duration
	// MinRate is the least average rate, in bytes a second, once Grace
	// has passed (default 16 KiB/s after 10 s).
	MinRate int64
	Grace   time.Duration
	// Longest is the most an upload may take in all (default 30 min: a
	// largest scan at 300 KB/s), however it is paced: no client holds a
	// connection and its share of the spool for hours.
	Longest time.Duration
}

var errUploadTooSlow = errors.New("the upload arrives too slowly")

// pacedReader reads a request body within its pace: each read must come
// within Idle (a read deadline on the connection), and after Grace the
// average rate must be at least MinRate.
type pacedReader struct {
	r     io.ReadCloser
	rc    *http.ResponseController
	pace  UploadPace
	start time.Time
	n     int64
}

func newPacedReader(r io.ReadCloser, rc *http.ResponseController, pace UploadPace) *pacedReader {
	return &pacedReader{r: r, rc: rc, pace: pace, start: time.Now()}
}

func (p *pacedReader) Read(b []byte) (int, error) {
	// Not every connection takes a deadline (tests' recorders); the
	// rate check below still holds them to the pace.
	_ = p.rc.SetReadDeadline(time.Now().Add(p.pace.Idle))
	n, err := p.r.Read(b)
	p.n += int64(n)
	var timeout interface{ Timeout() bool }
	if errors.As(err, &timeout) && timeout.Timeout() {
		return n, fmt.Errorf("%w: nothing for %s", errUploadTooSlow, p.pace.Idle)
	}
	el := time.Since(p.start)
	if p.pace.Longest > 0 && el > p.pace.Longest {
		return n, fmt.Errorf("%w: not done after %s", errUploadTooSlow, p.pace.Longest)
	}
	if el > p.pace.Grace && float64(p.n) < float64(p.pace.MinRate)*el.Seconds() {
		return n, fmt.Errorf("%w: %d bytes in %s, under %d bytes a second", errUploadTooSlow, p.n, el.Round(time.Second), p.pace.MinRate)
	}
	return n, err
}

func (p *pacedReader) Close() error {
	_ = p.rc.SetReadDeadline(time.Time{})
	return p.r.Close()
}

// DefaultSpoolMaxBytes is the spool's default cap (Config.SpoolMaxBytes).
const DefaultSpoolMaxBytes = 4 << 30

// spoolCharge is what an upload is charged per byte of its body: the
// spool holds its scan encrypted and then its de-identified copy, each
// about the size of the scan, at the same time.
const spoolCharge = 2

// spoolRetryAfter is what an upload refused for a full spool is told to
// wait: uploads in flight end within minutes.
const spoolRetryAfter = 30 * time.Second

var errSpoolFull = errors.New("the upload spool is full")

// spoolQuota bounds the bytes all uploads in flight together may put in
// the spool directory, and what each campus may hold of them: its share,
// max/campuses, or one largest upload where that is more. A campus's
// burst, or its trickling uploads, fill its own share and never take the
// room another campus is owed. (Bytes spooled cannot be taken back, so
// a share lent to a busy campus could not be returned when its owner
// comes: shares are not lent.)
type spoolQuota struct {
	max   int64
	share int64 // what one campus may hold

	mu     sync.Mutex
	used   int64
	byUser map[string]int64 // bytes held per campus
}

// newSpoolQuota shares total between campuses; upload is what the
// largest upload holds.
func newSpoolQuota(total int64, campuses int, upload int64) *spoolQuota {
	share := total
	if campuses > 1 {
		share = min(total, max(total/int64(campuses), upload))
	}
	return &spoolQuota{max: total, share: share, byUser: map[string]int64{}}
}

// take charges n bytes to campus, or reports that they do not fit.
func (q *spoolQuota) take(campus string, n int64) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if n > q.max-q.used || n > q.share-q.byUser[campus] {
		return false
	}
	q.used += n
	q.byUser[campus] += n
	return true
}

// give returns n bytes campus took before.
func (q *spoolQuota) give(campus string, n int64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.used -= n
	if q.byUser[campus] -= n; q.byUser[campus] <= 0 {
		delete(q.byUser, campus)
	}
}

// inUse is what the uploads in flight are charged.
func (q *spoolQuota) inUse() int64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.used
}

// SpoolBudget admits an upload (middleware of POST /v1/exams and
// STOW-RS) only while the spool has room for it in its campus's share
// (see spoolQuota), or answers 503 with Retry-After. An upload is
// charged for the bytes it has sent, as they arrive, not for the length
// it declares: a trickle that declares 512 MiB holds what it sent, and
// an upload is refused once its next bytes do not fit. Whatever way the
// request ends, its charge is given back when the handler has returned,
// after its spool files are removed.
//
// An upload's body is paced (see UploadPace) and its answer is small,
// so the server's write timeout, which counts from the request's start,
// does not apply to it.
func (in *Intake) SpoolBudget(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		req := c.Request()
		body := &budgetedBody{r: req.Body, quota: in.spool, campus: auth.Of(c).Campus}
		defer body.release()
		// Nothing is charged before a byte arrives, but an upload is not
		// begun without room for its first bytes.
		if !body.charge(spoolCharge * min(max(req.ContentLength, 1), 64<<10)) {
			return in.spoolFull(c)
		}
		req.Body = body
		_ = http.NewResponseController(c.Response()).SetWriteDeadline(time.Time{})
		err := next(c)
		if err != nil && body.refused {
			return in.spoolFull(c)
		}
		return err
	}
}

// maxMetaBytes is what an upload's body may hold besides its scan (see
// Intake.bound).
const maxMetaBytes = 1 << 20

// SpoolBytesFor is what the spool must hold for one upload of a scan of
// maxScanBytes: the least cap that lets the largest upload in.
func SpoolBytesFor(maxScanBytes int64) int64 { return (maxScanBytes + maxMetaBytes + 1) * spoolCharge }

func (in *Intake) spoolFull(c echo.Context) error {
	c.Response().Header().Set("Retry-After", problems.RetryAfter(spoolRetryAfter))
	return problems.New(http.StatusServiceUnavailable, "unavailable",
		fmt.Sprintf("the uploads in flight fill the gateway's spool (%d bytes); retry shortly", in.spool.max))
}

// budgetedBody charges a request body to the spool quota as it is read.
type budgetedBody struct {
	r       io.ReadCloser
	quota   *spoolQuota
	campus  string
	charged int64 // what this request holds of the quota
	read    int64
	refused bool
}

func (b *budgetedBody) charge(n int64) bool {
	if !b.quota.take(b.campus, n) {
		b.refused = true
		return false
	}
	b.charged += n
	return true
}

// Read reads on while what was read is charged; bytes that do not fit
// are dropped with errSpoolFull, before anyone can write them.
func (b *budgetedBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	b.read += int64(n)
	if need := b.read*spoolCharge - b.charged; need > 0 && !b.charge(need) {
		return 0, errSpoolFull
	}
	return n, err
}

func (b *budgetedBody) Close() error { return b.r.Close() }

// release gives the request's charge back.
func (b *budgetedBody) release() {
	b.quota.give(b.campus, b.charged)
	b.charged = 0
}
