package app

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"octflow/config"
)

func TestGatewayServerTakesTheDefaultLimits(t *testing.T) {
	s := gatewayServer(http.NotFoundHandler(), config.HTTPLimits{}, nil)
	def := config.DefaultHTTPLimits()
	if s.ReadHeaderTimeout != def.ReadHeader || s.ReadTimeout != def.Read || s.WriteTimeout != def.Write ||
		s.IdleTimeout != def.Idle || s.MaxHeaderBytes != def.MaxHeaderBytes {
		t.Errorf("server limits %v %v %v %v %v, want %+v", s.ReadHeaderTimeout, s.ReadTimeout, s.WriteTimeout, s.IdleTimeout, s.MaxHeaderBytes, def)
	}
}

// A client that trickles its request is cut off: its headers within
// the header timeout, its body within the read timeout.
func TestGatewayServerCutsTrickledRequests(t *testing.T) {
	bodyErr := make(chan error, 1)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, err := io.ReadAll(r.Body)
		bodyErr <- err
	})
	cases := []struct {
		name   string
		limits config.HTTPLimits
		head   string // sent at once
		drip   string // then a byte every 20 ms, for up to 3 s
		body   bool   // the drip is the body: the handler must see it fail
	}{
		{"headers", config.HTTPLimits{ReadHeader: 100 * time.Millisecond, Read: 10 * time.Second},
			"GET / HTTP/1.1\r\nHost: x\r\n", strings.Repeat("X-Pad: y\r\n", 20), false},
		{"body", config.HTTPLimits{ReadHeader: 10 * time.Second, Read: 200 * time.Millisecond},
			"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 150\r\n\r\n", strings.Repeat("z", 150), true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			srv := gatewayServer(h, c.limits, nil)
			go srv.Serve(ln)
			defer srv.Close()
			conn, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if _, err := io.WriteString(conn, c.head); err != nil {
				t.Fatal(err)
			}
			cut := make(chan error, 1)
			go func() { // the server's answer or close ends the trickle
				_, err := bufio.NewReader(conn).ReadByte()
				cut <- err
			}()
			var cutErr error
			cutOff := false
		drip:
			for i := 0; i < len(c.drip); i++ {
				select {
				case cutErr = <-cut:
					cutOff = true
					break drip
				case <-time.After(20 * time.Millisecond):
				}
				if _, err := conn.Write([]byte{c.drip[i]}); err != nil {
					break
				}
			}
			if c.body {
				select {
				case err := <-bodyErr:
					if err == nil {
						t.Error("the handler read the whole trickled body")
					}
				default:
					t.Error("the handler was still reading when the trickle ended")
				}
				return
			}
			if !cutOff {
				t.Fatal("the trickled headers were not cut off")
			}
			if cutErr != nil && !errors.Is(cutErr, io.EOF) && !strings.Contains(cutErr.Error(), "reset") {
				t.Errorf("read: %v", cutErr)
			}
		})
	}
}
