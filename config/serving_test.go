package config

import (
	"strings"
	"testing"
	"time"
)

// serving are the api's serving defaults (app.ServingDefaults).
func serving() Serving {
	return Serving{HTTP: DefaultHTTPLimits(), Streams: Streams{Total: 256, PerToken: 8}, SpoolMaxBytes: 4 << 30,
		MetricsAddr: "127.0.0.1:9464", StatusMaxAge: 15 * time.Second}
}

func TestServingTakesItsDefaults(t *testing.T) {
	s := New("api", env(nil))
	v := BindServing(s, serving())
	if err := s.Parse(nil); err != nil {
		t.Fatal(err)
	}
	if *v != serving() {
		t.Errorf("serving %+v, want the defaults %+v", *v, serving())
	}
}

func TestServingSettings(t *testing.T) {
	cases := []struct {
		vars  map[string]string
		check func(*Serving) bool
		err   string // what the error must name; "": accepted
	}{
		{map[string]string{"OCTFLOW_METRICS_ADDR": "off"}, func(v *Serving) bool { return v.MetricsAddr == "" }, ""},
		{map[string]string{"OCTFLOW_METRICS_ADDR": "0.0.0.0:9464"}, func(v *Serving) bool { return v.MetricsAddr == "0.0.0.0:9464" }, ""},
		{map[string]string{"OCTFLOW_SPOOL_MAX_MIB": "1027", "OCTFLOW_SSE_STREAMS_PER_TOKEN": "2", "OCTFLOW_HTTP_READ_TIMEOUT": "5m"},
			func(v *Serving) bool {
				return v.SpoolMaxBytes == 1027<<20 && v.Streams.PerToken == 2 && v.HTTP.Read == 5*time.Minute
			}, ""},
		{map[string]string{"OCTFLOW_SPOOL_MAX_MIB": "0"}, nil, "OCTFLOW_SPOOL_MAX_MIB"},
		{map[string]string{"OCTFLOW_SPOOL_DIR": "/var/spool/octflow-uploads"}, func(v *Serving) bool { return v.SpoolDir == "/var/spool/octflow-uploads" }, ""},
		{map[string]string{"OCTFLOW_SPOOL_MAX_MIB": "64"}, func(v *Serving) bool { return v.SpoolMaxBytes == 64<<20 }, ""},
		{map[string]string{"OCTFLOW_HTTP_READ_TIMEOUT": "0s"}, nil, "OCTFLOW_HTTP_READ_TIMEOUT"},
		{map[string]string{"OCTFLOW_HTTP_WRITE_TIMEOUT": "0s"}, nil, "OCTFLOW_HTTP_WRITE_TIMEOUT"},
		{map[string]string{"OCTFLOW_SSE_STREAMS": "0"}, nil, "OCTFLOW_SSE_STREAMS"},
		{map[string]string{"OCTFLOW_HTTP_MAX_HEADER_BYTES": "100"}, nil, "OCTFLOW_HTTP_MAX_HEADER_BYTES"},
		{map[string]string{"OCTFLOW_METRICS_MAX_AGE": "0s"}, nil, "OCTFLOW_METRICS_MAX_AGE"},
	}
	for _, c := range cases {
		t.Run(strings.Join(keys(c.vars), ","), func(t *testing.T) {
			s := New("api", env(c.vars))
			v := BindServing(s, serving())
			err := s.Parse(nil)
			switch {
			case c.err == "" && err != nil:
				t.Fatal(err)
			case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
				t.Fatalf("error %v, want one naming %s", err, c.err)
			case c.check != nil && !c.check(v):
				t.Errorf("got %+v", v)
			}
		})
	}
}

func keys(m map[string]string) []string {
	var out []string
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	return out
}
