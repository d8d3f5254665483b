package config

import (
	"strings"
	"testing"
	"time"

	"octflow/audit"
)

// uploads are the api's upload defaults (app.UploadDefaults).
func uploads() Uploads {
	return Uploads{MaxScanBytes: 512 << 20, Validating: 4, ValidationBytes: 4 << 30, PerDevice: 2, Idle: 30 * time.Second, MinRate: 16 << 10}
}

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
				want := Audit{Config: audit.Config{Collector: "audit.example:6514", Protocol: "relp", SpoolDir: "/var/spool/octflow", SpoolBytes: 16 << 20,
					CAFile: "/etc/octflow/audit-ca.pem", AppName: "octflow", Site: "North Eye Hospital"}}
				if g.Audit != want {
					t.Errorf("audit config %+v, want %+v", g.Audit, want)
				}
			}},
		{"the collector answers by RELP unless told otherwise",
			map[string]string{"OCTFLOW_AUDIT_COLLECTOR": "audit.example:6514", "OCTFLOW_AUDIT_SPOOL": "/var/spool/octflow",
				"OCTFLOW_AUDIT_PROTOCOL": "syslog-tls"}, "",
			func(t *testing.T, g *Gateway) {
				if g.Audit.Protocol != "syslog-tls" {
					t.Errorf("protocol %q", g.Audit.Protocol)
				}
			}},
		{"an unknown audit protocol is refused",
			map[string]string{"OCTFLOW_AUDIT_PROTOCOL": "udp"}, "OCTFLOW_AUDIT_PROTOCOL", nil},
		{"the validation budget is in MiB",
			map[string]string{"OCTFLOW_VALIDATION_MIB": "1536"}, "",
			func(t *testing.T, g *Gateway) {
				if g.Uploads.ValidationBytes != 1536<<20 || g.Uploads.MaxScanBytes != 512<<20 {
					t.Errorf("validation budget %d bytes", g.Uploads.ValidationBytes)
				}
			}},
		{"a zero validation budget is refused", map[string]string{"OCTFLOW_VALIDATION_MIB": "0"}, "OCTFLOW_VALIDATION_MIB", nil},
		{"the codec origins are a comma-separated list",
			map[string]string{"OCTFLOW_CODEC_ORIGINS": " https://ui.example , ,http://127.0.0.1:8233"}, "",
			func(t *testing.T, g *Gateway) {
				if strings.Join(g.CodecOrigins, " ") != "https://ui.example http://127.0.0.1:8233" {
					t.Errorf("codec origins %q", g.CodecOrigins)
				}
			}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := New("api", env(c.vars))
			g := BindGateway(s, uploads())
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
