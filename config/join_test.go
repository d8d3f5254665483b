package config

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// What Join.Env writes, the binders read back, field by field: the
// names are the binders' own.
func TestTheBindersReadBackAJoinsEnvironment(t *testing.T) {
	dir := t.TempDir()
	file := func(name, content string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	j := Join{
		Stack: Stack{TemporalAddr: "temporal:7233", Namespace: "octflow", TemporalCompression: "gzip",
			S3: S3{Endpoint: "s3:9000", AccessKey: "access", SecretKey: "secret", Bucket: "exams", UseTLS: true, Region: "eu-1", CAFile: "/etc/s3-ca.pem"}},
		TokensFile: "/etc/octflow/tokens.json", PseudonymKeyFile: file("pseudonym.key", "0123456789abcdef-pseudonym"),
		CodecKeysFile: file("codec.json", `{"payload": true}`), IdentityKeysFile: file("identity.json", `{"identity": true}`),
		WebhookSecret: "hook-secret", CallbackAllow: "127.0.0.0/8,localhost", PublicURL: "https://octflow.example",
	}
	vars := map[string]string{}
	for _, kv := range j.Env() {
		name, value, _ := strings.Cut(kv, "=")
		vars[name] = value
	}
	s := New("join", env(vars))
	stack, tokens, pseudonym := BindStack(s), BindAPI(s), BindPseudonymKey(s)
	payload, identity, hooks := BindCodec(s), BindIdentityKeys(s, true), BindWebhooks(s)
	if err := s.Parse(nil); err != nil {
		t.Fatal(err)
	}
	got := Join{Stack: *stack, TokensFile: tokens.TokensFile, WebhookSecret: hooks.Secrets["*"], CallbackAllow: hooks.Allow,
		PublicURL: hooks.PublicURL}
	want := j
	want.PseudonymKeyFile, want.CodecKeysFile, want.IdentityKeysFile = "", "", ""
	if got != want {
		t.Errorf("read back %+v\nwant %+v", got, want)
	}
	// A file setting is read for what the file holds.
	for name, c := range map[string]struct{ got, want string }{
		"pseudonym key": {string(*pseudonym), "0123456789abcdef-pseudonym"},
		"payload keys":  {string(payload.JSON), `{"payload": true}`},
		"identity keys": {string(identity.JSON), `{"identity": true}`},
	} {
		if c.got != c.want {
			t.Errorf("%s read back %q, want %q", name, c.got, c.want)
		}
	}
}

// An empty field of a Join sets no variable: the setting keeps its
// default.
func TestAJoinSetsOnlyWhatItHolds(t *testing.T) {
	cases := []struct {
		name string
		join Join
		want []string
	}{
		{"nothing", Join{}, nil},
		{"the stack's address", Join{Stack: Stack{TemporalAddr: "temporal:7233"}}, []string{"OCTFLOW_TEMPORAL_ADDR=temporal:7233"}},
		{"S3 without TLS", Join{Stack: Stack{S3: S3{Endpoint: "s3:9000"}}}, []string{"OCTFLOW_S3_ENDPOINT=s3:9000"}},
		{"S3 over TLS", Join{Stack: Stack{S3: S3{UseTLS: true}}}, []string{"OCTFLOW_S3_TLS=true"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := c.join.Env(); !slices.Equal(got, c.want) {
				t.Errorf("env %q, want %q", got, c.want)
			}
		})
	}
}
