package auth

import "testing"

func TestNewTokensRejectsIncompleteEntries(t *testing.T) {
	for _, e := range []TokenEntry{
		{SHA256: "abc", Principal: Principal{Name: "x", Role: RoleAdmin}},
		{SHA256: HashToken("t"), Principal: Principal{Name: "x", Role: "root"}},
		{SHA256: HashToken("t"), Principal: Principal{Name: "x", Role: RoleDevice, DeviceID: "d"}},
		{SHA256: HashToken("t"), Principal: Principal{Name: "x", Role: RoleDevice, DeviceID: "d", Campus: "north", Campuses: []string{"south"}}},
		{SHA256: HashToken("t"), Principal: Principal{Name: "x", Role: RoleClinician}},
		{SHA256: HashToken("t"), Principal: Principal{Name: "x", Role: RoleClinician, Campuses: []string{"North Campus"}}},
		// No name: the trail could not tell the caller from no one.
		{SHA256: HashToken("t"), Principal: Principal{Role: RoleDevice, DeviceID: "d", Campus: "north"}},
	} {
		if _, err := NewTokens([]TokenEntry{e}); err == nil {
			t.Errorf("NewTokens accepted %+v", e)
		}
	}
	// Two devices of one name: a device reads the exams sent under its name.
	if _, err := NewTokens([]TokenEntry{
		{SHA256: HashToken("a"), Principal: Principal{Name: "oct", Role: RoleDevice, DeviceID: "a", Campus: "north"}},
		{SHA256: HashToken("b"), Principal: Principal{Name: "oct", Role: RoleRouter, DeviceID: "b", Campus: "south"}},
	}); err == nil {
		t.Error("NewTokens accepted two uploaders of one name")
	}
}
