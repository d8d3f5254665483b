package cli

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
	"testing"

	"octflow/codec"
)

func TestNodeKeysAreTheNamedCampusesAndNothingElse(t *testing.T) {
	payloadKeys, err := codec.NewKeys("k")
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(payloadKeys)
	scoped, _ := json.Marshal(codec.Keys{Active: "k", Scoped: map[string]map[string]string{"system": payloadKeys.Keys}})
	for _, tc := range []struct {
		name, campuses string
		in             []byte
		want           []string // scopes; nil: refused
	}{
		{"one campus", "north", raw, []string{"campus/north", "system"}},
		{"two campuses", "north, south", raw, []string{"campus/north", "campus/south", "system"}},
		{"no campus", " , ", raw, nil},
		{"a campus that is no name", "North Wing", raw, nil},
		{"from a node's own keys", "north", scoped, nil},
		{"not keys", "north", []byte("{"), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := NodeKeys("-", tc.campuses, bytes.NewReader(tc.in))
			if tc.want == nil {
				if err == nil {
					t.Errorf("wrote %s, want a refusal", out)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			k, err := codec.ParseKeys(out)
			if err != nil {
				t.Fatal(err)
			}
			if got := slices.Sorted(maps.Keys(k.Scoped)); len(k.Keys) != 0 || !slices.Equal(got, tc.want) {
				t.Errorf("scopes %v and payload keys %v, want %v and none", got, k.Keys, tc.want)
			}
		})
	}
}
