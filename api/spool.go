package api

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
	"time"
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
	if el := time.Since(p.start); el > p.pace.Grace && float64(p.n) < float64(p.pace.MinRate)*el.Seconds() {
		return n, fmt.Errorf("%w: %d bytes in %s, under %d bytes a second", errUploadTooSlow, p.n, el.Round(time.Second), p.pace.MinRate)
	}
	return n, err
}

func (p *pacedReader) Close() error {
	_ = p.rc.SetReadDeadline(time.Time{})
	return p.r.Close()
}
