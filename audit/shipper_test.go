package audit

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"octflow/audit/audittest"
)

// dyingCollector takes one frame on its first connection and then closes
// it without reading the rest, as a collector that stops with messages
// still in its socket's buffer; on later connections it reads all.
func dyingCollector(t *testing.T, p audittest.PKI) (addr string, got func() []string) {
	t.Helper()
	cert, err := tls.LoadX509KeyPair(p.Path("server.pem"), p.Path("server.key"))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pem, _ := os.ReadFile(p.Path("ca.pem"))
	pool.AppendCertsFromPEM(pem)
	l, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}, ClientCAs: pool,
		ClientAuth: tls.RequireAndVerifyClientCert})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	var mu sync.Mutex
	var msgs []string
	go func() {
		for first := true; ; first = false {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			go func(first bool) {
				defer conn.Close()
				r := bufio.NewReader(conn)
				for {
					_, msg, err := readFrame(r)
					if err != nil {
						return
					}
					mu.Lock()
					msgs = append(msgs, string(msg))
					mu.Unlock()
					if first {
						time.Sleep(100 * time.Millisecond) // the rest arrives, unread
						return
					}
				}
			}(first)
		}
	}()
	return l.Addr().String(), func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), msgs...)
	}
}

func TestMessagesACollectorDiedWithAreSentAgain(t *testing.T) {
	p := audittest.NewPKI(t)
	addr, got := dyingCollector(t, p)
	tr := openTrail(t, p, addr, t.TempDir(), nil)
	for i := 1; i <= 5; i++ {
		if err := tr.Record(reportRead(i)); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for tr.Pending() != 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	seen := map[string]bool{}
	for _, m := range got() {
		for i := 1; i <= 5; i++ {
			if strings.Contains(m, `[meta sequenceId="`+strconv.Itoa(i)+`"]`) {
				seen[strconv.Itoa(i)] = true
			}
		}
	}
	if len(seen) != 5 || tr.Pending() != 0 {
		t.Fatalf("collector holds %d of 5 messages, %d pending", len(seen), tr.Pending())
	}
}
