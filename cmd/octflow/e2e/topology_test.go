package e2e

// The production topology without Docker: PostgreSQL from the machine's
// packages, the Temporal server built from Temporal's own main and
// configured through its embedded template (the variables its Docker
// image reads), and octflow's roles as separate processes, as
// docker-compose.yml runs them. Only the S3 endpoint stays embedded in
// the test process.

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"go.uber.org/zap"

	"octflow/api"
	"octflow/api/intake"
	"octflow/config"
	"octflow/contract"
	"octflow/exam"
	"octflow/imaging"
	"octflow/internal/devstack"
	"octflow/internal/devsystem"
	"octflow/lifecycle"
)

func TestProductionTopologySurvivesTemporalAndPostgresRestarts(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and starts a Temporal cluster on PostgreSQL")
	}
	pg := startPostgres(t)
	if err := devstack.SetupPostgres(pg.conn, zap.NewNop()); err != nil {
		t.Fatalf("temporal schema: %v", err)
	}
	temporal := startTemporalServer(t, pg)

	addrs, err := devstack.FreeAddrs("127.0.0.1", 3)
	if err != nil {
		t.Fatal(err)
	}
	dataDir := t.TempDir()
	s3, err := devstack.StartS3(context.Background(), dataDir, addrs[0], zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s3.Stop)
	secrets, err := devsystem.EnsureSecrets(dataDir)
	if err != nil {
		t.Fatal(err)
	}
	creds := s3.Credentials()
	stack := config.Stack{TemporalAddr: temporal.addr, Namespace: "octflow",
		S3: config.S3{Endpoint: s3.Endpoint(), AccessKey: creds.AccessKey, SecretKey: creds.SecretKey, Bucket: "octflow"}}
	env := append(devsystem.JoinEnv(stack, secrets),
		"OCTFLOW_RETRY_BASE=1s", "OCTFLOW_RETRY_CAP=2s", "OCTFLOW_HEARTBEAT_TIMEOUT=5s",
		"OCTFLOW_NODE_AFFINITY_WAIT=3s", "OCTFLOW_REPORT_EVERY=1s", "OCTFLOW_DRAIN_TIMEOUT=10s")

	// The namespace job of docker-compose.yml; run twice, as every deploy may.
	for range 2 {
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(append(os.Environ(), env...), "OCTFLOW_TEST_AS_MAIN=setup")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("octflow setup: %v\n%s", err, out)
		}
	}
	startProcess(t, "api", env, "api --api-addr "+addrs[1]+" --metrics-addr "+addrs[2])
	startProcess(t, "worker", env, "worker")
	// The worker-deployment job of docker-compose.yml: the worker polls as
	// its build of the deployment octflow, which becomes current once it
	// polls (the first start; Worker Versioning, decision 28).
	promote := exec.Command(os.Args[0])
	promote.Env = append(append(os.Environ(), env...), "OCTFLOW_TEST_AS_MAIN=deployment promote --if-none")
	if out, err := promote.CombinedOutput(); err != nil || !strings.Contains(string(out), "is current (was none)") {
		t.Fatalf("octflow deployment promote --if-none: %v\n%s", err, out)
	}
	nodes := []*childProcess{
		startProcess(t, "gpu-a", env, "gpuworker --node-id gpu-a"),
		startProcess(t, "gpu-b", env, "gpuworker --node-id gpu-b"),
	}
	device := &api.Client{Base: "http://" + addrs[1], Token: secrets.Device}
	clin := &api.Client{Base: "http://" + addrs[1], Token: secrets.Clinician}
	waitReady(t, device.Base)

	c, err := client.Dial(client.Options{HostPort: temporal.addr, Namespace: stack.Namespace, Logger: quietSDK()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	for i, outage := range []struct {
		name    string
		restart func()
	}{
		{"temporal server killed (-9) and restarted", temporal.killAndRestart},
		{"postgresql restarted", pg.restart},
	} {
		examID := fmt.Sprintf("topology-%d", i+1)
		_, scan := phantomDICOM(t, imaging.PhantomOptions{Seed: uint64(300 + i)}) // full size: its stages last seconds
		if _, code, err := device.Submit(context.Background(), intake.Meta{ExamID: examID}, scan); err != nil || code != http.StatusAccepted {
			t.Fatalf("submit %s: %d %v", examID, code, err)
		}
		st := waitExam(t, clin, examID, 2*time.Minute, func(s *api.ExamStatus) bool {
			return s.State == lifecycle.Executing && shipped().GPU(s.Stage)
		})
		t.Logf("%s: %s during %s on %s", examID, outage.name, st.Stage, st.Node)
		began := time.Now()
		outage.restart()
		t.Logf("%s: back after %s", outage.name, time.Since(began).Round(time.Millisecond))
		final := waitExam(t, clin, examID, 3*time.Minute, func(s *api.ExamStatus) bool { return s.State.Terminal() })
		if final.State != lifecycle.Completed {
			t.Fatalf("%s ended %s after %s: %+v", examID, final.State, outage.name, final.LastFailure)
		}
		wf := contract.ExamWorkflowID(exam.Ref{Campus: secrets.Campus, ID: final.ExamID})
		var stageDone time.Time
		stageEventsOf(t, c, wf, st.Stage, func(ev *historypb.HistoryEvent) bool {
			if ev.GetActivityTaskCompletedEventAttributes() != nil {
				stageDone = ev.GetEventTime().AsTime()
			}
			return true
		})
		if !stageDone.After(began) {
			t.Errorf("%s: %s completed at %s, before the outage at %s: the outage hit no stage", examID, st.Stage, stageDone, began)
		}
		if n := stageRunsOf(t, c, wf, exam.Render); n != 1 {
			t.Errorf("%s: report rendered %d times, want exactly 1", examID, n)
		}
		if final.Report == nil || final.Report.Summary.CentralSubfieldThicknessUm == nil {
			t.Errorf("%s: completed without a measured report: %+v", examID, final.Report)
		}
		if err := clin.Get(context.Background(), "/v1/exams/"+examID+"/report?format=json", &map[string]any{}); err != nil {
			t.Errorf("%s: report: %v", examID, err)
		}
	}
	for _, n := range nodes {
		select {
		case err := <-n.done:
			t.Errorf("%s exited during the outages: %v", n.id, err)
		default:
		}
	}
}

func TestDevOnPostgreSQLKeepsExamsAcrossARestart(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL")
	}
	pg := startPostgres(t)
	h := newHarness(t, 1, func(c *devsystem.Config) { c.Postgres = &pg.conn })
	_, scan := phantomDICOM(t, small(310))
	if _, code, err := h.device.Submit(context.Background(), intake.Meta{ExamID: "dev-pg-1"}, scan); err != nil || code != http.StatusAccepted {
		t.Fatalf("submit: %d %v", code, err)
	}
	if final := h.waitTerminal("dev-pg-1"); final.State != lifecycle.Completed {
		t.Fatalf("exam ended %s: %+v", final.State, final.LastFailure)
	}
	h.stop()
	h.start()
	if st := h.waitFor("dev-pg-1", time.Minute, func(*api.ExamStatus) bool { return true }); st.State != lifecycle.Completed {
		t.Errorf("after a restart the exam is %s, want it kept as completed", st.State)
	}
	if fileExists(filepath.Join(h.cfg.DataDir, "temporal.db")) {
		t.Error("the dev stack wrote a SQLite database although told to use PostgreSQL")
	}
	psql := pg.command("psql", "-h", "127.0.0.1", "-p", strconv.Itoa(pg.port), "-U", "temporal", "-d", "temporal",
		"-tAc", "select count(*) from executions")
	psql.Env = append(os.Environ(), "PGPASSWORD="+pg.conn.Password)
	out, err := psql.CombinedOutput()
	if err != nil {
		t.Fatalf("psql: %v\n%s", err, out)
	}
	if count, _ := strconv.Atoi(strings.TrimSpace(string(out))); count == 0 {
		t.Errorf("PostgreSQL holds no workflow execution: %q", out)
	}
}

// waitReady waits for the gateway's readiness (Temporal and S3 reached).
func waitReady(t *testing.T, base string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		resp, err := http.Get(base + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("gateway at %s not ready within a minute", base)
}

// postgres is a PostgreSQL server of the machine's packages, in a data
// directory of the test's own, on a loopback port, with password
// authentication.
type postgres struct {
	t       *testing.T
	bin     string // the directory of initdb and postgres
	dir     string
	port    int
	cred    *syscall.Credential // the unprivileged user it runs as, when the test runs as root
	conn    devstack.Postgres
	process *exec.Cmd
	exited  chan struct{}
}

// postgresBin finds the server's programs: Debian keeps them out of PATH.
func postgresBin() string {
	if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
		if dir := strings.TrimSpace(string(out)); fileExists(filepath.Join(dir, "initdb")) {
			return dir
		}
	}
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	if len(matches) == 0 {
		return ""
	}
	return filepath.Dir(matches[len(matches)-1])
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func startPostgres(t *testing.T) *postgres {
	t.Helper()
	bin := postgresBin()
	if bin == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("PostgreSQL's server is not installed (apt-get install postgresql)")
		}
		t.Skip("PostgreSQL's server is not installed (apt-get install postgresql)")
	}
	// Its own directory under the system's temporary one: initdb refuses
	// to run as root, so the server may run as another user, who must be
	// able to reach the directory.
	dir, err := os.MkdirTemp("", "octflow-pg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	p := &postgres{t: t, bin: bin, dir: dir}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			u, err = user.Lookup("nobody")
		}
		if err != nil {
			t.Fatalf("running as root and no user to run PostgreSQL as: %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		p.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	password := "pw-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	pwFile := filepath.Join(dir, "pw")
	if err := os.WriteFile(pwFile, []byte(password+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if p.cred != nil {
		os.Chown(pwFile, int(p.cred.Uid), int(p.cred.Gid))
	}
	initdb := p.command("initdb", "-D", filepath.Join(dir, "data"), "-U", "temporal", "--pwfile", pwFile,
		"--auth", "scram-sha-256", "-E", "UTF8", "--no-sync")
	if out, err := initdb.CombinedOutput(); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	addr, err := devstack.FreeAddrs("127.0.0.1", 1)
	if err != nil {
		t.Fatal(err)
	}
	_, portText, _ := net.SplitHostPort(addr[0])
	p.port, _ = strconv.Atoi(portText)
	p.conn = devstack.Postgres{Addr: addr[0], User: "temporal", Password: password}
	p.start()
	t.Cleanup(p.stop)
	return p
}

func (p *postgres) command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(filepath.Join(p.bin, name), args...)
	cmd.Dir = p.dir
	if p.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: p.cred}
	}
	return cmd
}

// start runs the server and waits until it accepts connections.
func (p *postgres) start() {
	p.t.Helper()
	log, err := os.OpenFile(filepath.Join(p.dir, "postgres.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o666)
	if err != nil {
		p.t.Fatal(err)
	}
	defer log.Close()
	cmd := p.command("postgres", "-D", filepath.Join(p.dir, "data"), "-p", strconv.Itoa(p.port),
		"-c", "listen_addresses=127.0.0.1", "-c", "unix_socket_directories="+p.dir, "-c", "max_connections=200")
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		p.t.Fatal(err)
	}
	p.process, p.exited = cmd, make(chan struct{})
	go func() { cmd.Wait(); close(p.exited) }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ready := p.command("pg_isready", "-h", "127.0.0.1", "-p", strconv.Itoa(p.port), "-t", "1")
		if ready.Run() == nil {
			return
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(filepath.Join(p.dir, "postgres.log"))
			p.t.Fatalf("postgresql not ready within 30 s:\n%s", b)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// stop asks for a fast shutdown (every session ends, every transaction
// in flight rolls back) and waits for it.
func (p *postgres) stop() {
	if p.process == nil {
		return
	}
	p.process.Process.Signal(syscall.SIGINT)
	select {
	case <-p.exited:
	case <-time.After(30 * time.Second):
		p.process.Process.Kill()
		<-p.exited
	}
	p.process = nil
	if p.t.Failed() {
		b, _ := os.ReadFile(filepath.Join(p.dir, "postgres.log"))
		p.t.Logf("postgresql log:\n%s", tail(b, 8000))
	}
}

// restart is a fast shutdown, a moment down and a start.
func (p *postgres) restart() {
	p.t.Helper()
	p.stop()
	time.Sleep(2 * time.Second)
	p.start()
}

// temporalServer is Temporal's own server main, configured as its Docker
// image is: by the variables of its embedded config template.
type temporalServer struct {
	t    *testing.T
	bin  string
	env  []string
	addr string
	proc *childProcess
	n    int
}

func startTemporalServer(t *testing.T, pg *postgres) *temporalServer {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "temporal-server")
	if err := devstack.BuildTemporalServer(context.Background(), repoRoot, bin); err != nil {
		t.Fatal(err)
	}
	addrs, err := devstack.FreeAddrs("127.0.0.1", 10)
	if err != nil {
		t.Fatal(err)
	}
	port := func(i int) string { _, p, _ := net.SplitHostPort(addrs[i]); return p }
	_, pgPort, _ := net.SplitHostPort(pg.conn.Addr)
	s := &temporalServer{t: t, bin: bin, addr: addrs[0], env: []string{
		"DB=postgres12", "POSTGRES_SEEDS=127.0.0.1", "DB_PORT=" + pgPort,
		"POSTGRES_USER=" + pg.conn.User, "POSTGRES_PWD=" + pg.conn.Password,
		"DBNAME=temporal", "VISIBILITY_DBNAME=temporal_visibility",
		"NUM_HISTORY_SHARDS=4", "LOG_LEVEL=warn", "BIND_ON_IP=127.0.0.1",
		"DYNAMIC_CONFIG_FILE_PATH=" + filepath.Join(repoRoot, "deploy", "temporal", "dynamicconfig.yaml"),
		"FRONTEND_GRPC_PORT=" + port(0), "FRONTEND_HTTP_PORT=" + port(1), "FRONTEND_MEMBERSHIP_PORT=" + port(2),
		"HISTORY_GRPC_PORT=" + port(3), "HISTORY_MEMBERSHIP_PORT=" + port(4),
		"MATCHING_GRPC_PORT=" + port(5), "MATCHING_MEMBERSHIP_PORT=" + port(6),
		"WORKER_GRPC_PORT=" + port(7), "WORKER_MEMBERSHIP_PORT=" + port(8),
	}}
	s.start()
	return s
}

func (s *temporalServer) start() {
	s.t.Helper()
	s.n++
	cmd := exec.Command(s.bin, "--allow-no-auth", "start")
	cmd.Env = append(os.Environ(), s.env...)
	p := startCommand(s.t, fmt.Sprintf("temporal-%d", s.n), cmd)
	s.proc = p
	// Ready when the frontend answers a health check.
	deadline := time.Now().Add(time.Minute)
	for {
		c, err := client.Dial(client.Options{HostPort: s.addr, Namespace: "temporal-system", Logger: quietSDK()})
		if err == nil {
			_, err = c.CheckHealth(context.Background(), &client.CheckHealthRequest{})
			c.Close()
			if err == nil {
				return
			}
		}
		select {
		case err := <-p.done:
			p.done <- err // for the cleanup, which prints the log
			s.t.Fatalf("temporal server exited: %v", err)
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("temporal server not serving within a minute: %v", err)
		}
	}
}

// killAndRestart kills the whole server outright, waits a moment and
// starts it again on the same database and ports.
func (s *temporalServer) killAndRestart() {
	s.t.Helper()
	if err := s.proc.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		s.t.Fatal(err)
	}
	<-s.proc.done
	s.proc.done <- nil // for the cleanup
	time.Sleep(2 * time.Second)
	s.start()
}

// quietSDK is an SDK logger that drops everything: the test's own
// clients retry through outages on purpose.
func quietSDK() sdklog.Logger { return sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler)) }
