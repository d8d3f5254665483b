package audit

import (
	"bufio"
	"errors"
	"io"
	"strings"
	"testing"
)

func TestRELPFramesAreReadAsTheProtocolWritesThem(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     relpFrame
		err      error
	}{
		{"an answer", "2 rsp 6 200 OK\n", relpFrame{2, "rsp", []byte("200 OK")}, nil},
		{"no data", "7 rsp 0\n", relpFrame{7, "rsp", []byte{}}, nil},
		{"the server closing", "0 serverclose 0\n", relpFrame{0, "serverclose", []byte{}}, nil},
		{"an open's answer", "1 rsp 43 200 OK\nrelp_version=0\ncommands=syslog,other\n", relpFrame{1, "rsp", []byte("200 OK\nrelp_version=0\ncommands=syslog,other")}, nil},
		{"data with its own newlines and spaces", "3 rsp 11 500 a b\nc d\n", relpFrame{3, "rsp", []byte("500 a b\nc d")}, nil},
		{"no trailer", "2 rsp 6 200 OKX", relpFrame{}, errRELP},
		{"cut short", "2 rsp 6 200", relpFrame{}, io.ErrUnexpectedEOF},
		{"zero length with data", "2 rsp 0 x\n", relpFrame{}, errRELP},
		{"a length without data", "2 rsp 6\n", relpFrame{}, errRELP},
		{"a length over the bound", "2 rsp 99999999 x", relpFrame{}, errRELP},
		{"a transaction that is no number", "x rsp 0\n", relpFrame{}, errRELP},
		{"a command with a control byte", "2 r\x00p 0\n", relpFrame{}, errRELP},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := readRELP(bufio.NewReader(strings.NewReader(tc.in)))
			if tc.err != nil {
				if !errors.Is(err, tc.err) {
					t.Fatalf("read %q: %v, want %v", tc.in, err, tc.err)
				}
				return
			}
			if err != nil || f.txnr != tc.want.txnr || f.command != tc.want.command || string(f.data) != string(tc.want.data) {
				t.Fatalf("read %q: %+v %v, want %+v", tc.in, f, err, tc.want)
			}
		})
	}
}

func TestRELPFramesAreWrittenAsTheProtocolReadsThem(t *testing.T) {
	for _, tc := range []struct {
		txnr    int
		command string
		data    string
	}{{1, "open", relpOffers}, {2, "syslog", "<85>1 msg with\nnewline"}, {999_999_999, "close", ""}} {
		b := appendRELP(nil, tc.txnr, tc.command, []byte(tc.data))
		f, err := readRELP(bufio.NewReader(strings.NewReader(string(b))))
		if err != nil || f.txnr != tc.txnr || f.command != tc.command || string(f.data) != tc.data {
			t.Errorf("%q read back as %+v %v", b, f, err)
		}
	}
	if nextTxnr(999_999_999) != 1 || nextTxnr(1) != 2 {
		t.Error("transaction numbers do not wrap at 999999999 to 1")
	}
	if code, text := relpStatus([]byte("500 not now\nmore")); code != 500 || text != "not now" {
		t.Errorf("status %d %q", code, text)
	}
	if !relpOffersSyslog([]byte("200 OK\nrelp_version=0\ncommands=syslog")) || relpOffersSyslog([]byte("200 OK\ncommands=other")) {
		t.Error("the syslog offer is misread")
	}
}
