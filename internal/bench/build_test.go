package bench

import "testing"

func TestAResultNamesItsCommitBySevenDigitsOrAsUnknown(t *testing.T) {
	cases := []struct {
		revision, want string
	}{
		{"e66319f0123456789abcdef0123456789abcdef0", "e66319f"},
		{"abc", "abc"},
		{"", "unknown"},
	}
	for _, c := range cases {
		if got := (Build{Revision: c.revision}).ShortRevision(); got != c.want {
			t.Errorf("ShortRevision of %q = %q, want %q", c.revision, got, c.want)
		}
	}
	if b := readBuild(); b.GoVersion == "" || b.CPUs < 1 {
		t.Errorf("readBuild() = %+v: no Go version or CPUs", b)
	}
}
