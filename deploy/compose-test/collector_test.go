package composetest

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/zap"

	"octflow/audit"
)

// TestTheStacksCollectorTakesOnlyTheApisAuditCertificate runs inside make
// compose-test (run.sh sets OCTFLOW_COMPOSE_AUDIT, the collector's
// address on the stack's network, and OCTFLOW_COMPOSE_SECRETS): the
// stack's own rsyslog collector answers for an entry sent with the api's
// audit certificate and never for one sent with a GPU node's certificate
// of the same CA. run.sh then looks for both entries in the collector's
// file. Elsewhere it skips: there is no stack.
func TestTheStacksCollectorTakesOnlyTheApisAuditCertificate(t *testing.T) {
	addr, secrets, node := os.Getenv("OCTFLOW_COMPOSE_AUDIT"), os.Getenv("OCTFLOW_COMPOSE_SECRETS"), os.Getenv("OCTFLOW_COMPOSE_NODE")
	if addr == "" || secrets == "" || node == "" {
		t.Skip("no compose stack (run by make compose-test)")
	}
	send := func(cert, key, marker string) *audit.Trail {
		t.Helper()
		tr, err := audit.Open(audit.Config{Collector: addr, Protocol: audit.ProtocolRELP, ServerName: "audit",
			CAFile: filepath.Join(secrets, "ca.pem"), CertFile: filepath.Join(secrets, cert), KeyFile: filepath.Join(secrets, key),
			SpoolDir: t.TempDir(), MinBackoff: 100 * time.Millisecond, MaxBackoff: time.Second},
			audit.Source{ID: "compose-test", Site: "compose-test"}, zap.NewNop())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tr.Close() })
		if err := tr.Record(audit.Event{ID: audit.PatientRecord, Action: audit.Read, Outcome: audit.Success,
			User: audit.User{ID: marker, Role: "probe"}}); err != nil {
			t.Fatal(err)
		}
		return tr
	}
	forger := send(filepath.Join("nodes", node, "node.pem"), filepath.Join("nodes", node, "node-key.pem"), "forged-by-"+node)
	api := send("audit-client.pem", "audit-client-key.pem", "sent-with-the-api-certificate")
	for deadline := time.Now().Add(30 * time.Second); api.Pending() > 0; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the collector did not answer for the entry sent with the api's audit certificate within 30 s")
		}
	}
	time.Sleep(3 * time.Second) // the forger keeps trying meanwhile
	if forger.Pending() == 0 {
		t.Error("the collector answered for an entry sent with a GPU node's certificate")
	}
}
