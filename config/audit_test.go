package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"octflow/audit"
)

func TestTheGatewaysAuditAndValidationSettings(t *testing.T) {
	cases := []struct {
		name    string
		vars    map[string]string
		wantErr string // "" for none
		check   func(t *testing.T, g *Gateway)
	}{
		{"a collector needs a journal that survives restarts",
			map[string]string{"OCTFLOW_AUDIT_COLLECTOR": "audit.example:6514"}, "OCTFLOW_AUDIT_SPOOL", nil},
		{"a collector and a log file are one too many",
			map[string]string{"OCTFLOW_AUDIT_COLLECTOR": "audit.example:6514", "OCTFLOW_AUDIT_SPOOL": "/var/spool/octflow",
				"OCTFLOW_AUDIT_LOG": "/tmp/audit.log"}, "set one", nil},
		{"the collector's settings reach the trail",
			map[string]string{"OCTFLOW_AUDIT_COLLECTOR": "audit.example:6514", "OCTFLOW_AUDIT_SPOOL": "/var/spool/octflow",
				"OCTFLOW_AUDIT_SPOOL_MIB": "16", "OCTFLOW_AUDIT_CA": "/etc/octflow/audit-ca.pem", "OCTFLOW_AUDIT_SITE": "North Eye Hospital"}, "",
			func(t *testing.T, g *Gateway) {
				want := audit.Config{Collector: "audit.example:6514", SpoolDir: "/var/spool/octflow", SpoolBytes: 16 << 20,
					CAFile: "/etc/octflow/audit-ca.pem", AppName: "octflow", Site: "North Eye Hospital"}
				if g.Audit != want {
					t.Errorf("audit config %+v, want %+v", g.Audit, want)
				}
			}},
		{"the validation budget is in MiB",
			map[string]string{"OCTFLOW_VALIDATION_MIB": "1536"}, "",
			func(t *testing.T, g *Gateway) {
				if g.Uploads.ValidationBytes != 1536<<20 {
					t.Errorf("validation budget %d bytes", g.Uploads.ValidationBytes)
				}
			}},
		{"a zero validation budget is refused", map[string]string{"OCTFLOW_VALIDATION_MIB": "0"}, "OCTFLOW_VALIDATION_MIB", nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := New("api", env(c.vars))
			g := BindGateway(s)
			err := s.Parse(nil)
			switch {
			case c.wantErr == "" && err != nil:
				t.Fatal(err)
			case c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)):
				t.Fatalf("error %v, want one naming %s", err, c.wantErr)
			}
			if c.check != nil {
				c.check(t, g)
			}
		})
	}
}

func TestWithoutACollectorTheAuditTrailIsJSONLinesInItsFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	s := New("api", env(map[string]string{"OCTFLOW_AUDIT_LOG": path}))
	g := BindGateway(s)
	if err := s.Parse(nil); err != nil {
		t.Fatal(err)
	}
	trail, closer, err := g.AuditTrail(audit.Source{ID: "api@test"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := trail.Record(audit.Event{ID: audit.PatientRecord, Action: audit.Read, User: audit.User{ID: "dr-lee"}}); err != nil {
		t.Fatal(err)
	}
	if err := closer.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil || !strings.Contains(string(b), "dr-lee") || !strings.HasPrefix(string(b), "{") {
		t.Errorf("audit log %q %v", b, err)
	}
}
