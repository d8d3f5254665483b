package config

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// Each command's own settings refuse what cannot work, naming the
// variable; what they take they keep.
func TestTheCommandsOwnSettings(t *testing.T) {
	node := GPUNode{ID: "gpu@host", Source: "auto", GPUs: 1, Model: "simulated GPU", MemoryGiB: 24, Queue: "oct-gpu",
		ReportEvery: 10 * time.Second, CacheMiB: 1024, Slowdown: 1}
	cases := []struct {
		name string
		bind func(*Set)
		vars map[string]string
		want string // "" accepted
	}{
		{"api without its tokens", func(s *Set) { BindAPI(s) }, nil, "OCTFLOW_TOKENS_FILE"},
		{"api with its tokens", func(s *Set) { BindAPI(s) }, map[string]string{"OCTFLOW_TOKENS_FILE": "/etc/octflow/tokens.json"}, ""},
		{"a node's negative cache", func(s *Set) { BindGPUNode(s, node) }, map[string]string{"OCTFLOW_NODE_CACHE_MIB": "-1"}, "OCTFLOW_NODE_CACHE_MIB"},
		{"a node without slots", func(s *Set) { BindGPUNode(s, node) }, map[string]string{"OCTFLOW_GPUS": "0"}, "OCTFLOW_GPUS"},
		{"a node faster than the others", func(s *Set) { BindGPUNode(s, node) }, map[string]string{"OCTFLOW_SIM_SLOWDOWN": "0.5"}, "OCTFLOW_SIM_SLOWDOWN"},
		{"a failure rate over 1", func(s *Set) { BindGPUNode(s, node) }, map[string]string{"OCTFLOW_SIM_FAILURE_RATE": "1.5"}, "OCTFLOW_SIM_FAILURE_RATE"},
		{"a node that never reports", func(s *Set) { BindGPUNode(s, node) }, map[string]string{"OCTFLOW_REPORT_EVERY": "0s"}, "OCTFLOW_REPORT_EVERY"},
		{"a node as set", func(s *Set) { BindGPUNode(s, node) }, map[string]string{"OCTFLOW_GPUS": "4", "OCTFLOW_NODE_CACHE_MIB": "0"}, ""},
		{"a retention Temporal refuses", func(s *Set) { BindSetup(s) }, map[string]string{"OCTFLOW_RETENTION": "2h"}, "OCTFLOW_RETENTION"},
		{"setup as set", func(s *Set) { BindSetup(s) }, map[string]string{"OCTFLOW_RETENTION": "24h"}, ""},
		{"dev with fewer than no nodes", func(s *Set) { BindDev(s) }, map[string]string{"OCTFLOW_GPU_NODES": "-1"}, "OCTFLOW_GPU_NODES"},
		{"dev's PACS named twice", func(s *Set) { BindDev(s) },
			map[string]string{"OCTFLOW_PACS_URL": "http://127.0.0.1:8042/dicom-web", "OCTFLOW_PACS_FILE": "/etc/pacs.json"}, "name the PACS one way"},
		{"dev's PACS not a URL", func(s *Set) { BindDev(s) }, map[string]string{"OCTFLOW_PACS_URL": "orthanc:8042"}, "OCTFLOW_PACS_URL"},
		{"dev as set", func(s *Set) { BindDev(s) }, map[string]string{"OCTFLOW_PACS_URL": "http://127.0.0.1:8042/dicom-web"}, ""},
		{"an installation named with a space around", func(s *Set) { BindInstallation(s) },
			map[string]string{"OCTFLOW_INSTALLATION": "eye-clinic.example.org "}, "OCTFLOW_INSTALLATION"},
		{"an installation named", func(s *Set) { BindInstallation(s) }, map[string]string{"OCTFLOW_INSTALLATION": "eye-clinic.example.org"}, ""},
		{"no installation named", func(s *Set) { BindInstallation(s) }, nil, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := New("test", env(c.vars))
			c.bind(s)
			err := s.Parse(nil)
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Fatalf("error %v, want one naming %q", err, c.want)
			}
		})
	}
}

// The certificate files are a comma-separated list, spaces and empty
// entries aside; none by default.
func TestTheCertificateFilesAreAList(t *testing.T) {
	for _, c := range []struct {
		vars map[string]string
		args []string
		want []string
	}{
		{nil, nil, nil},
		{map[string]string{"OCTFLOW_CERTIFICATE_FILES": "/run/secrets/s3.pem"}, nil, []string{"/run/secrets/s3.pem"}},
		{map[string]string{"OCTFLOW_CERTIFICATE_FILES": " /run/secrets/s3.pem, ,/run/secrets/audit.pem,"}, nil, []string{"/run/secrets/s3.pem", "/run/secrets/audit.pem"}},
		{map[string]string{"OCTFLOW_CERTIFICATE_FILES": "/a.pem"}, []string{"--certificate-files", "/b.pem"}, []string{"/b.pem"}},
	} {
		s := New("api", env(c.vars))
		got := BindCertificateFiles(s)
		if err := s.Parse(c.args); err != nil || !slices.Equal(*got, c.want) {
			t.Errorf("%v %v: %q (%v), want %q", c.vars, c.args, *got, err, c.want)
		}
	}
}

// The installation's name is read from the environment or the flag, the
// flag winning, as is.
func TestTheInstallationIsNamedByItsVariableOrFlag(t *testing.T) {
	for _, c := range []struct {
		vars map[string]string
		args []string
		want string
	}{
		{nil, nil, ""},
		{map[string]string{"OCTFLOW_INSTALLATION": "eye-clinic.example.org"}, nil, "eye-clinic.example.org"},
		{map[string]string{"OCTFLOW_INSTALLATION": "eye-clinic.example.org"}, []string{"--installation", "Augenklinik Süd"}, "Augenklinik Süd"},
	} {
		s := New("worker", env(c.vars))
		got := BindInstallation(s)
		if err := s.Parse(c.args); err != nil || *got != c.want {
			t.Errorf("%v %v: %q (%v), want %q", c.vars, c.args, *got, err, c.want)
		}
	}
}

// The worker's and the node's metrics listener: off is nowhere, and the
// default is none.
func TestAProcessMetricsListenerOffIsNowhere(t *testing.T) {
	for raw, want := range map[string]string{"": "", "off": "", ":9464": ":9464"} {
		s := New("worker", env(map[string]string{"OCTFLOW_METRICS_ADDR": raw}))
		p := BindProcess(s)
		if err := s.Parse(nil); err != nil || p.MetricsAddr != want || p.Drain != 90*time.Second {
			t.Errorf("OCTFLOW_METRICS_ADDR=%q: %+v (%v), want %q and the 90 s drain", raw, p, err, want)
		}
	}
}
