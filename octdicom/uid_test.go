package octdicom

import (
	"strings"
	"testing"
)

func TestDerivedUIDIsStableValidAndDistinct(t *testing.T) {
	a := DerivedUID("result", "north", "ex-1", "run-1", "pdf-instance")
	if again := DerivedUID("result", "north", "ex-1", "run-1", "pdf-instance"); again != a {
		t.Errorf("the same parts gave %s and %s", a, again)
	}
	if !strings.HasPrefix(a, "2.25.") || !ValidUID(a) {
		t.Errorf("%s is not a valid 2.25 UID", a)
	}
	seen := map[string][]string{}
	for _, parts := range [][]string{
		{"result", "north", "ex-1", "run-1", "pdf-instance"},
		{"result", "north", "ex-1", "run-1", "pdf-series"},
		{"result", "north", "ex-1", "run-2", "pdf-instance"},
		{"result", "south", "ex-1", "run-1", "pdf-instance"},
		{"ab", "c"},
		{"a", "bc"},
	} {
		u := DerivedUID(parts...)
		if !ValidUID(u) {
			t.Errorf("%v: %s is not a valid UID", parts, u)
		}
		if prev, dup := seen[u]; dup {
			t.Errorf("%v and %v gave the same UID %s", prev, parts, u)
		}
		seen[u] = parts
	}
}

func TestValidUID(t *testing.T) {
	for _, c := range []struct {
		uid  string
		want bool
	}{
		{"1.2.840.10008.5.1.4.1.1.104.1", true},
		{"2.25.0", true},
		{"", false},
		{"1.02.3", false},
		{"1..2", false},
		{"1.2.a", false},
		{"1." + strings.Repeat("9", 63), false},
	} {
		if got := ValidUID(c.uid); got != c.want {
			t.Errorf("ValidUID(%q) = %v, want %v", c.uid, got, c.want)
		}
	}
}
