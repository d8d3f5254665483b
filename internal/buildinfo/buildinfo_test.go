package buildinfo

import (
	"runtime/debug"
	"testing"
)

func TestBuildIDTellsCommitsAndDirtyTreesApart(t *testing.T) {
	for _, tc := range []struct {
		info Info
		want string
	}{
		{Info{Version: "1.0.0", Commit: "3f2a9c1d0b7e55aa01"}, "1.0.0+3f2a9c1d0b7e"},
		{Info{Version: "1.0.0", Commit: "3f2a9c1d0b7e55aa01-dirty"}, "1.0.0+3f2a9c1d0b7e.dirty"},
		{Info{Version: "1.0.0", Commit: "abc"}, "1.0.0+abc"},
		{Info{Version: "dev"}, "dev"},
	} {
		if got := tc.info.BuildID(); got != tc.want {
			t.Errorf("%+v: build ID %q, want %q", tc.info, got, tc.want)
		}
	}
}

func TestTheCommitComesFromTheToolchainsRecordWhenNothingStampedIt(t *testing.T) {
	for _, tc := range []struct {
		settings []debug.BuildSetting
		want     string
	}{
		{[]debug.BuildSetting{{Key: "vcs.revision", Value: "ab12"}, {Key: "vcs.modified", Value: "false"}}, "ab12"},
		{[]debug.BuildSetting{{Key: "vcs.revision", Value: "ab12"}, {Key: "vcs.modified", Value: "true"}}, "ab12-dirty"},
		{[]debug.BuildSetting{{Key: "vcs.modified", Value: "true"}}, ""},
	} {
		if got := vcsCommit(tc.settings); got != tc.want {
			t.Errorf("%v: commit %q, want %q", tc.settings, got, tc.want)
		}
	}
}
