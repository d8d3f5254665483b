// Package listen opens octflow's listeners: plain TCP, or TLS only when
// a certificate is configured (config: the gateway's OCTFLOW_TLS_CERT_FILE,
// a metrics listener's OCTFLOW_METRICS_CERT_FILE). The gateway (app) and
// every metrics listener (app; the stack's Temporal server,
// cmd/octflow-temporal) listen through it.
package listen

import (
	"crypto/tls"
	"log"
	"net"
	"net/http"
	"time"
)

// Listen listens on addr (TCP), serving TLS with cfg when it is set:
// then a client that does not speak TLS gets no answer but an error.
func Listen(addr string, cfg *tls.Config) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	if cfg != nil {
		ln = tls.NewListener(ln, cfg)
	}
	return ln, nil
}

// Metrics serves h, a Prometheus /metrics, on addr (over TLS only when
// cfg is set) until the server it returns is closed, and says where it
// listens. Headers must come at once, a scrape is read within 30 s and
// answered within a minute. The server's own complaints (a failed
// handshake, a client speaking HTTP to HTTPS) go to errLog (nil: the
// log package's standard logger).
func Metrics(addr string, cfg *tls.Config, h http.Handler, errLog *log.Logger) (*http.Server, string, error) {
	ln, err := Listen(addr, cfg)
	if err != nil {
		return nil, "", err
	}
	srv := &http.Server{Handler: h, ErrorLog: errLog, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
		WriteTimeout: time.Minute, IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 16 << 10}
	go srv.Serve(ln)
	return srv, ln.Addr().String(), nil
}
