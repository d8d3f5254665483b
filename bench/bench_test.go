package bench

import "testing"

func TestParseMixWantsThreePercentagesOf100(t *testing.T) {
	cases := []struct {
		in   string
		want map[string]int
	}{
		{"10/60/30", map[string]int{"urgent": 10, "normal": 60, "low": 30}},
		{"0/100/0", map[string]int{"urgent": 0, "normal": 100, "low": 0}},
		{"10/60/20", nil},
		{"50/60/-10", nil},
		{"urgent", nil},
	}
	for _, c := range cases {
		got, err := ParseMix(c.in)
		if (err != nil) != (c.want == nil) {
			t.Errorf("ParseMix(%q) error %v", c.in, err)
			continue
		}
		for k, v := range c.want {
			if got[k] != v {
				t.Errorf("ParseMix(%q)[%s] = %d, want %d", c.in, k, got[k], v)
			}
		}
	}
}
