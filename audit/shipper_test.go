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
	// The dying collector speaks syslog over TLS, whose delivery is
	// judged from TCP: the case the settle time is for.
	tr := openTrail(t, p, addr, t.TempDir(), func(c *Config) { c.Protocol = ProtocolSyslogTLS })
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

func TestNothingTheCollectorAnsweredForIsLostWhenItIsKilled(t *testing.T) {
	// RELP: the cursor moves past a message only when the collector has
	// answered for it, and the collector answers only once the message
	// is in its synced disk queue. Killed (SIGKILL) in the middle of a
	// stream and started again, it still delivers every message it
	// answered for, and the shipper sends it everything it did not.
	p := audittest.NewPKI(t)
	c := audittest.StartCollector(t, p, "server")
	tr := openTrail(t, p, c.Addr(), t.TempDir(), nil)
	const n = 400
	recorded := make(chan error, 1)
	go func() {
		for i := 1; i <= n; i++ {
			if err := tr.Record(reportRead(i)); err != nil {
				recorded <- err
				return
			}
			if i%50 == 0 {
				time.Sleep(20 * time.Millisecond)
			}
		}
		recorded <- nil
	}()
	// Kill it once the collector has answered for some and not all.
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, shipped := tr.j.durable()
		if shipped.Seq > 20 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the collector answered for %d messages in 30 s", shipped.Seq-1)
		}
		time.Sleep(time.Millisecond)
	}
	c.Kill()
	_, answered := tr.j.durable()
	if err := <-recorded; err != nil {
		t.Fatal(err)
	}
	c.Start()
	seen := map[int]bool{}
	for deadline := time.Now().Add(90 * time.Second); len(seen) < n && time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		for _, l := range c.Lines() {
			seen[l.Seq] = true
		}
	}
	for seq := 1; seq <= n; seq++ {
		if !seen[seq] {
			what := "sent again after the restart"
			if uint64(seq) < answered.Seq {
				what = "answered for before the kill"
			}
			t.Errorf("message %d (%s) is not in the collector's log", seq, what)
		}
	}
	_, shipped := tr.j.durable()
	t.Logf("killed after the collector answered for %d of %d messages; it has answered for %d since", answered.Seq-1, n, shipped.Seq-1)
}

func TestARELPCollectorTakesOnlyTheGatewaysOwnCertificate(t *testing.T) {
	// Any service's certificate from the stack's CA (a GPU node's) must
	// not be able to write audit entries: the collector names its peer.
	p := audittest.NewPKI(t)
	c := audittest.StartCollector(t, p, "server")
	forger := openTrail(t, p, c.Addr(), t.TempDir(), func(cfg *Config) {
		cfg.CertFile, cfg.KeyFile = p.Path("other-service.pem"), p.Path("other-service.key")
	})
	if err := forger.Record(reportRead(666)); err != nil {
		t.Fatal(err)
	}
	gateway := openTrail(t, p, c.Addr(), t.TempDir(), nil)
	if err := gateway.Record(reportRead(1)); err != nil {
		t.Fatal(err)
	}
	c.WaitFor(1)
	time.Sleep(time.Second) // the forger keeps trying meanwhile
	for _, l := range c.Lines() {
		if strings.Contains(l.Msg, "north/exam-666") {
			t.Fatal("the collector took an entry from another service's certificate")
		}
	}
	if forger.Pending() != 1 {
		t.Errorf("the forger's entry counts as delivered: %d pending", forger.Pending())
	}
}

func TestASyslogTLSCollectorStillTakesTheTrail(t *testing.T) {
	p := audittest.NewPKI(t)
	c := audittest.StartSyslogTLSCollector(t, p, "server")
	tr := openTrail(t, p, c.Addr(), t.TempDir(), func(cfg *Config) { cfg.Protocol = ProtocolSyslogTLS })
	for i := 1; i <= 3; i++ {
		if err := tr.Record(reportRead(i)); err != nil {
			t.Fatal(err)
		}
	}
	if ls := c.WaitFor(3); len(ls) < 3 {
		t.Fatalf("collector holds %d messages", len(ls))
	}
}
