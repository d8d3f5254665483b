package cli

import "testing"

func TestAnEmbeddedEngineCollectsLessOftenUnlessTheOperatorSaysOtherwise(t *testing.T) {
	for _, c := range []struct {
		name        string
		env         map[string]string
		wantPercent int
		wantLimit   int64
	}{
		{"nothing set", nil, embeddedGCPercent, embeddedMemoryLimit},
		{"GOGC set", map[string]string{"GOGC": "100"}, 0, embeddedMemoryLimit},
		{"GOGC off", map[string]string{"GOGC": "off"}, 0, embeddedMemoryLimit},
		{"GOMEMLIMIT set", map[string]string{"GOMEMLIMIT": "8GiB"}, embeddedGCPercent, 0},
		{"both set", map[string]string{"GOGC": "50", "GOMEMLIMIT": "1GiB"}, 0, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			percent, limit := embeddedGC(func(k string) string { return c.env[k] })
			if percent != c.wantPercent || limit != c.wantLimit {
				t.Errorf("embeddedGC = %d, %d; want %d, %d", percent, limit, c.wantPercent, c.wantLimit)
			}
		})
	}
}
