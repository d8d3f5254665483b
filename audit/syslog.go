package audit

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"
)

// Syslog header values IHE ATNA asks for (ITI TF-2 3.20.6.3): facility 10
// (security/authorization); severity 5 (notice), 4 (warning) for a
// failure; MSGID "IHE+RFC-3881".
const (
	facilityAuth = 10
	msgID        = "IHE+RFC-3881"
)

// header is what every syslog message of a process shares.
type header struct {
	host, app, procID string
}

func newHeader(src Source, app string) header {
	h := header{host: printable(src.Host, 255), app: printable(app, 48), procID: "-"}
	if src.PID > 0 {
		h.procID = strconv.Itoa(src.PID)
	}
	return h
}

// message is an RFC 5424 syslog message carrying xml, with the journal's
// sequence number as [meta sequenceId] (RFC 5424 7.3.1), so a collector
// can tell a resent message from a new one.
func (h header) message(seq uint64, at time.Time, failed bool, xml []byte) []byte {
	severity := 5
	if failed {
		severity = 4
	}
	// sequenceId runs 1..2147483647 and then wraps (RFC 5424 7.3.1).
	sid := (seq-1)%2147483647 + 1
	b := fmt.Appendf(nil, "<%d>1 %s %s %s %s %s [meta sequenceId=\"%d\"] ", facilityAuth*8+severity,
		at.UTC().Format("2006-01-02T15:04:05.000000Z07:00"), h.host, h.app, h.procID, msgID, sid)
	return append(b, xml...)
}

// frame is RFC 5425 octet-counting framing: "LEN SP MSG". The journal
// holds frames exactly as they go on the wire.
func frame(msg []byte) []byte {
	b := strconv.AppendInt(nil, int64(len(msg)), 10)
	b = append(b, ' ')
	return append(b, msg...)
}

// errTorn is a frame cut off by the end of its file: a write a crash
// interrupted.
var errTorn = errors.New("audit: torn frame")

// errGarbled is bytes where a frame should start that are not one.
var errGarbled = errors.New("audit: not a frame")

// maxDigits bounds a frame's LEN; a longer one is garbage, not a frame.
const maxDigits = 10

// readHeader reads one frame's "LEN SP" and returns the header's size
// and LEN. io.EOF means a clean end; errTorn a header cut short;
// errGarbled anything else.
func readHeader(r *bufio.Reader) (hdr int, n int64, err error) {
	for {
		c, err := r.ReadByte()
		if err == io.EOF {
			if hdr == 0 {
				return 0, 0, io.EOF
			}
			return hdr, 0, errTorn
		} else if err != nil {
			return hdr, 0, err
		}
		hdr++
		switch {
		case c == ' ' && hdr > 1 && n > 0:
			return hdr, n, nil
		case c >= '0' && c <= '9' && hdr <= maxDigits && !(hdr == 1 && c == '0'):
			n = 10*n + int64(c-'0')
		default:
			return hdr, 0, errGarbled
		}
	}
}

// readFrame reads one "LEN SP MSG" frame of at most MaxMessage bytes; it
// returns the frame's size on disk and the message. io.EOF means a clean
// end; errTorn a frame cut short; errGarbled a frame that is not one or
// is over the bound.
func readFrame(r *bufio.Reader) (int, []byte, error) {
	hdr, n, err := readHeader(r)
	if err != nil {
		return 0, nil, err
	}
	if n > MaxMessage {
		return 0, nil, fmt.Errorf("%w: a message of %d bytes", errGarbled, n)
	}
	msg := make([]byte, n)
	if _, err := io.ReadFull(r, msg); err != nil {
		return 0, nil, errTorn
	}
	return hdr + int(n), msg, nil
}

// printable keeps an RFC 5424 header field to printable US-ASCII without
// spaces, at most max characters; "-" (nil) if nothing is left.
func printable(s string, max int) string {
	out := []byte{}
	for i := 0; i < len(s) && len(out) < max; i++ {
		if c := s[i]; c > 32 && c < 127 {
			out = append(out, c)
		}
	}
	if len(out) == 0 {
		return "-"
	}
	return string(out)
}
