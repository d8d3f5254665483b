package audit

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// RELP, the Reliable Event Logging Protocol (rsyslog's imrelp, librelp's
// doc/relp.html): every message is a transaction the collector answers,
// so a message counts as delivered when the collector says it took it,
// not when TCP carried its bytes. A frame is
//
//	TXNR SP COMMAND SP DATALEN [SP DATA] LF
//
// TXNR runs 1..999999999 and wraps; a client opens a session with
// "open" (offering relp_version, relp_software and commands), sends
// "syslog" frames, and ends with "close". The server answers each with
// "rsp", whose data starts with a three-digit status ("200 OK"), and may
// end a session itself with "serverclose".

const (
	relpMaxTxnr = 999_999_999
	// relpMaxData bounds a frame the collector sends us (rsp data are a
	// status and a few offers).
	relpMaxData = 64 << 10
	// relpOffers is what octflow offers when it opens a session.
	relpOffers = "relp_version=0\nrelp_software=octflow\ncommands=syslog"
)

// relpFrame is one frame as read.
type relpFrame struct {
	txnr    int
	command string
	data    []byte
}

// errRELP is a frame that does not follow the protocol.
var errRELP = errors.New("audit: RELP protocol error")

// appendRELP appends the frame for txnr, command and data to b.
func appendRELP(b []byte, txnr int, command string, data []byte) []byte {
	b = strconv.AppendInt(b, int64(txnr), 10)
	b = append(b, ' ')
	b = append(b, command...)
	b = append(b, ' ')
	b = strconv.AppendInt(b, int64(len(data)), 10)
	if len(data) > 0 {
		b = append(b, ' ')
		b = append(b, data...)
	}
	return append(b, '\n')
}

// readRELP reads one frame.
func readRELP(r *bufio.Reader) (relpFrame, error) {
	var f relpFrame
	txnr, err := readToken(r, ' ', 9)
	if err != nil {
		return f, err
	}
	if f.txnr, err = strconv.Atoi(txnr); err != nil || f.txnr < 0 {
		return f, fmt.Errorf("%w: transaction number %q", errRELP, txnr)
	}
	if f.command, err = readToken(r, ' ', 32); err != nil {
		return f, err
	}
	// DATALEN is followed by SP and data, or, when 0, by the trailer.
	var n int
	for digits := 0; ; digits++ {
		c, err := r.ReadByte()
		if err != nil {
			return f, relpEOF(err)
		}
		if c >= '0' && c <= '9' && digits < 9 {
			n = 10*n + int(c-'0')
			continue
		}
		if digits == 0 || (c != ' ' && c != '\n') || (c == '\n') != (n == 0) {
			return f, fmt.Errorf("%w: data length", errRELP)
		}
		if c == '\n' {
			return f, nil
		}
		break
	}
	if n > relpMaxData {
		return f, fmt.Errorf("%w: %d bytes of data", errRELP, n)
	}
	f.data = make([]byte, n)
	if _, err := io.ReadFull(r, f.data); err != nil {
		return f, relpEOF(err)
	}
	if c, err := r.ReadByte(); err != nil {
		return f, relpEOF(err)
	} else if c != '\n' {
		return f, fmt.Errorf("%w: no trailer", errRELP)
	}
	return f, nil
}

// readToken reads up to sep (not kept), at most max bytes.
func readToken(r *bufio.Reader, sep byte, max int) (string, error) {
	var b []byte
	for {
		c, err := r.ReadByte()
		if err != nil {
			return "", relpEOF(err)
		}
		if c == sep {
			if len(b) == 0 {
				return "", fmt.Errorf("%w: empty field", errRELP)
			}
			return string(b), nil
		}
		if len(b) == max || c <= ' ' || c >= 127 {
			return "", fmt.Errorf("%w: field", errRELP)
		}
		b = append(b, c)
	}
}

func relpEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// relpStatus is the status code an rsp frame's data starts with, and its
// text.
func relpStatus(data []byte) (int, string) {
	line, _, _ := bytes.Cut(data, []byte("\n"))
	code, text, _ := strings.Cut(string(line), " ")
	n, err := strconv.Atoi(code)
	if err != nil || len(code) != 3 {
		return 0, string(line)
	}
	return n, text
}

// relpOffersSyslog says whether an open's rsp offers the syslog command.
func relpOffersSyslog(data []byte) bool {
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "commands="); ok {
			for _, c := range strings.Split(v, ",") {
				if strings.TrimSpace(c) == "syslog" {
					return true
				}
			}
		}
	}
	return false
}

// nextTxnr is the transaction number after t.
func nextTxnr(t int) int {
	if t >= relpMaxTxnr {
		return 1
	}
	return t + 1
}
