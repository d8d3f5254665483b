// Package audittest runs a real audit record repository for tests:
// Debian's rsyslogd taking RELP over TLS (imrelp) or syslog over TLS (RFC
// 5425), with certificates the test makes.
package audittest

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"octflow/internal/testpki"
)

// PKI is a CA and the certificates a test needs, as PEM files in a
// directory of the test's own.
type PKI struct {
	dir string
}

// Path is the file of a certificate (name.pem) or key (name.key).
func (p PKI) Path(name string) string { return filepath.Join(p.dir, name) }

// NewPKI makes two CAs, "ca" and "wrong-ca"; a collector certificate for
// 127.0.0.1 and clients "client" and "other-service" (from ca) and
// "stranger" (from wrong-ca).
func NewPKI(t *testing.T) PKI {
	t.Helper()
	p := PKI{dir: t.TempDir()}
	ca, wrong := testpki.NewCA(t, "octflow test ca"), testpki.NewCA(t, "octflow test wrong-ca")
	p.write(t, "ca.pem", ca.PEM)
	p.write(t, "wrong-ca.pem", wrong.PEM)
	p.leaf(t, "server", ca, true)
	p.leaf(t, "client", ca, false)
	// Another service's certificate from the same CA (a GPU node's): a
	// RELP collector takes only "client".
	p.leaf(t, "other-service", ca, false)
	p.leaf(t, "stranger", wrong, false)
	// A collector certificate the right name, from the wrong CA.
	p.leaf(t, "impostor", wrong, true)
	return p
}

// leaf writes name.pem and name.key, a certificate named name that ca
// signs, for clients and servers; a server's for 127.0.0.1 and
// localhost.
func (p PKI) leaf(t *testing.T, name string, ca *testpki.CA, server bool) {
	t.Helper()
	o := testpki.LeafOptions{CommonName: name, ClientAuth: true, ServerAuth: true}
	if server {
		o.IPs, o.DNSNames = []string{"127.0.0.1"}, []string{"localhost"}
	}
	l := ca.Leaf(t, o)
	p.write(t, name+".pem", l.CertPEM)
	p.write(t, name+".key", l.KeyPEM)
}

func (p PKI) write(t *testing.T, name string, b []byte) {
	t.Helper()
	if err := os.WriteFile(p.Path(name), b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// Collector is Debian's rsyslogd as an audit record repository, writing
// each message's parsed fields to a file: by RELP over TLS (imrelp),
// taking only the peer named "client", with a Direct main queue, so that
// it answers for a message only once its action has written and synced
// it, and what it answered for survives its death (a disk queue answered
// once the message was queued and, killed, lost the batch it had handed
// to the action; deploy/audit/rsyslog.conf is the same); or by syslog
// over TLS (imtcp with the gtls driver, RFC 5425), taking any client
// certificate of the test CA.
type Collector struct {
	t    *testing.T
	dir  string
	addr string
	cmd  *exec.Cmd
}

// StartCollector starts rsyslogd serving RELP over TLS with certName's
// certificate; it skips the test when rsyslogd or its RELP and TLS
// modules are not installed, unless CI is set.
func StartCollector(t *testing.T, p PKI, certName string) *Collector {
	t.Helper()
	need(t, "/usr/lib/*/rsyslog/imrelp.so", "rsyslog's RELP input (Debian package rsyslog-relp)")
	return start(t, func(c *Collector, port string) string {
		return fmt.Sprintf(`global(workDirectory=%[1]q maxMessageSize="64k")
main_queue(queue.type="Direct")
module(load="imrelp")
input(type="imrelp" port=%[5]q address="127.0.0.1" maxDataSize="64k"
  tls="on" tls.caCert=%[2]q tls.myCert=%[3]q tls.myPrivKey=%[4]q
  tls.authMode="name" tls.permittedPeer=["client"])
%[6]s`, c.dir, p.Path("ca.pem"), p.Path(certName+".pem"), p.Path(certName+".key"), port, c.output())
	})
}

// StartSyslogTLSCollector starts rsyslogd serving syslog over TLS (RFC
// 5425) with certName's certificate.
func StartSyslogTLSCollector(t *testing.T, p PKI, certName string) *Collector {
	t.Helper()
	return start(t, func(c *Collector, port string) string {
		return fmt.Sprintf(`global(workDirectory=%[1]q maxMessageSize="64k"
  defaultNetstreamDriver="gtls"
  defaultNetstreamDriverCAFile=%[2]q
  defaultNetstreamDriverCertFile=%[3]q
  defaultNetstreamDriverKeyFile=%[4]q)
module(load="imtcp" streamDriver.name="gtls" streamDriver.mode="1" streamDriver.authMode="x509/certvalid")
input(type="imtcp" port=%[5]q address="127.0.0.1")
%[6]s`, c.dir, p.Path("ca.pem"), p.Path(certName+".pem"), p.Path(certName+".key"), port, c.output())
	})
}

// need fails (CI) or skips the test unless a file matching glob exists.
func need(t *testing.T, glob, what string) {
	t.Helper()
	if m, _ := filepath.Glob(glob); len(m) > 0 {
		return
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("%s is missing", what)
	}
	t.Skipf("%s is not installed", what)
}

// start runs rsyslogd with the configuration conf makes for its port.
func start(t *testing.T, conf func(c *Collector, port string) string) *Collector {
	t.Helper()
	bin, err := exec.LookPath("rsyslogd")
	if err != nil {
		if _, serr := os.Stat("/usr/sbin/rsyslogd"); serr == nil {
			bin = "/usr/sbin/rsyslogd"
		} else if os.Getenv("CI") != "" {
			t.Fatal("rsyslogd is missing (Debian packages rsyslog rsyslog-gnutls rsyslog-relp)")
		} else {
			t.Skip("rsyslogd not installed (Debian packages rsyslog rsyslog-gnutls rsyslog-relp)")
		}
	}
	need(t, "/usr/lib/*/rsyslog/lmnsd_gtls.so", "rsyslog's TLS driver (Debian package rsyslog-gnutls)")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	_, port, _ := net.SplitHostPort(addr)
	c := &Collector{t: t, dir: t.TempDir(), addr: addr}
	if err := os.WriteFile(filepath.Join(c.dir, "rsyslog.conf"), []byte(conf(c, port)), 0o600); err != nil {
		t.Fatal(err)
	}
	c.cmd = exec.Command(bin, "-n", "-f", filepath.Join(c.dir, "rsyslog.conf"), "-i", filepath.Join(c.dir, "rsyslog.pid"))
	c.Start()
	t.Cleanup(c.Stop)
	return c
}

// output is the configuration's template and action: what rsyslog
// parsed out of each RFC 5424 message on one line, tab-separated, in a
// file.
func (c *Collector) output() string {
	return fmt.Sprintf(`template(name="fields" type="string" string="%%pri%%\t%%app-name%%\t%%msgid%%\t%%procid%%\t%%structured-data%%\t%%msg%%\n")
action(type="omfile" file=%q template="fields" sync="on")
`, c.received())
}

func (c *Collector) received() string { return filepath.Join(c.dir, "received.log") }

// Start starts rsyslogd again after Stop.
func (c *Collector) Start() {
	c.t.Helper()
	cmd := exec.Command(c.cmd.Path, c.cmd.Args[1:]...)
	out, err := os.Create(filepath.Join(c.dir, "rsyslogd.out"))
	if err != nil {
		c.t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	c.cmd = cmd
	deadline := time.Now().Add(10 * time.Second)
	for {
		conn, err := net.DialTimeout("tcp", c.addr, time.Second)
		if err == nil {
			conn.Close()
			return
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(c.dir, "rsyslogd.out"))
			c.t.Fatalf("rsyslogd does not listen on %s: %v\n%s", c.addr, err, log)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Kill ends rsyslogd at once (SIGKILL), as a crash or a power cut
// would, and waits for it.
func (c *Collector) Kill() {
	if c.cmd.Process == nil || c.cmd.ProcessState != nil {
		return
	}
	_ = c.cmd.Process.Kill()
	_ = c.cmd.Wait()
}

// Stop ends rsyslogd as an operator would (SIGTERM) and waits for it.
func (c *Collector) Stop() {
	if c.cmd.Process == nil || c.cmd.ProcessState != nil {
		return
	}
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	_ = c.cmd.Wait()
}

// Line is one message as rsyslog parsed it: its PRI, APP-NAME, MSGID,
// PROCID, structured data and message, and Seq, the sequence number its
// structured data names (-1: none).
type Line struct {
	Pri, App, MsgID, ProcID, SD, Msg string
	Seq                              int
}

// Lines are the messages received so far.
func (c *Collector) Lines() []Line {
	c.t.Helper()
	f, err := os.Open(c.received())
	if os.IsNotExist(err) {
		return nil
	} else if err != nil {
		c.t.Fatal(err)
	}
	defer f.Close()
	var out []Line
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		f := strings.SplitN(sc.Text(), "\t", 6)
		if len(f) != 6 {
			c.t.Fatalf("collector line %q: not 6 fields", sc.Text())
		}
		l := Line{Pri: f[0], App: f[1], MsgID: f[2], ProcID: f[3], SD: f[4], Msg: strings.TrimSpace(f[5]), Seq: -1}
		if s, ok := strings.CutPrefix(l.SD, `[meta sequenceId="`); ok {
			l.Seq, _ = strconv.Atoi(strings.TrimSuffix(s, `"]`))
		}
		out = append(out, l)
	}
	return out
}

// WaitFor waits until the collector holds every sequence number 1..n.
func (c *Collector) WaitFor(n int) []Line {
	c.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ls := c.Lines()
		seen := map[int]bool{}
		for _, l := range ls {
			seen[l.Seq] = true
		}
		if len(seen) >= n {
			return ls
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("collector has %d distinct messages of %d after 30 s", len(seen), n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Addr is the collector's host:port.
func (c *Collector) Addr() string { return c.addr }
