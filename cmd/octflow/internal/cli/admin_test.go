package cli

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"

	"octflow/api/auth"
)

// firstAdmin is deploy/init.sh's tokens.json, as it writes it, for the
// token below.
const firstAdminToken = "octflow-admin-0123456789abcdef"

var firstAdmin = fmt.Sprintf("[\n  {\"sha256\": \"%s\", \"role\": \"admin\", \"name\": \"first admin (deploy/init.sh)\"}\n]\n",
	auth.HashToken(firstAdminToken))

// writeTokens writes content (nil: nothing) as a tokens file of mode
// mode in a new directory and returns its path.
func writeTokens(t *testing.T, content *string, mode os.FileMode) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tokens.json")
	if content != nil {
		if err := os.WriteFile(path, []byte(*content), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
	}
	return path
}

// A minted token authenticates through api/auth's own loader as the
// principal it was minted for; the file keeps its hash only, the callers
// it had before, and its mode (0600 when it is new). What api/auth would
// refuse, or a name already there, is refused and the file left as it
// was.
func TestMintedTokensAuthenticateThroughTheGatewaysLoader(t *testing.T) {
	initFile := firstAdmin
	withNote := fmt.Sprintf("[{\"sha256\": %q, \"role\": \"admin\", \"name\": \"ops\", \"note\": \"ticket 17\"}]", auth.HashToken("ops-token"))
	for _, tc := range []struct {
		name    string
		file    *string // nil: no file yet
		mode    os.FileMode
		p       auth.Principal
		wantErr string // "": minted
	}{
		{"a device beside init.sh's admin", &initFile, 0o444,
			auth.Principal{Name: "oct-3", Role: auth.RoleDevice, DeviceID: "oct-3", Campus: "north", Urgent: true}, ""},
		{"a router", &initFile, 0o400,
			auth.Principal{Name: "orthanc-north", Role: auth.RoleRouter, DeviceID: "orthanc-north", Campus: "north"}, ""},
		{"a clinician of two campuses", &initFile, 0o444,
			auth.Principal{Name: "dr-lee", Role: auth.RoleClinician, Campus: "north", Campuses: []string{"demo-campus"}}, ""},
		{"an admin in a new file", nil, 0o600, auth.Principal{Name: "ops", Role: auth.RoleAdmin}, ""},
		{"beside a field api/auth does not read", &withNote, 0o444, auth.Principal{Name: "ops-2", Role: auth.RoleAdmin}, ""},

		{"a name the file has", &initFile, 0o444, auth.Principal{Name: "first admin (deploy/init.sh)", Role: auth.RoleAdmin}, "already has a token named"},
		{"no name", &initFile, 0o444, auth.Principal{Role: auth.RoleAdmin}, "--name is required"},
		{"an unknown role", &initFile, 0o444, auth.Principal{Name: "root", Role: "root"}, `unknown role "root"`},
		{"a device without a device ID", &initFile, 0o444, auth.Principal{Name: "oct-4", Role: auth.RoleDevice, Campus: "north"}, "needs a deviceId and one campus"},
		{"a device of two campuses", &initFile, 0o444,
			auth.Principal{Name: "oct-4", Role: auth.RoleDevice, DeviceID: "oct-4", Campus: "north", Campuses: []string{"south"}}, "needs a deviceId and one campus"},
		{"a clinician of no campus", &initFile, 0o444, auth.Principal{Name: "dr-no", Role: auth.RoleClinician}, "needs a campus"},
		{"a campus that is no campus name", &initFile, 0o444, auth.Principal{Name: "dr-x", Role: auth.RoleClinician, Campus: "North Wing"}, `campus "North Wing"`},
		{"an admin given a campus", &initFile, 0o444, auth.Principal{Name: "ops", Role: auth.RoleAdmin, Campus: "north"}, "sees every campus"},
		{"an urgent clinician", &initFile, 0o444, auth.Principal{Name: "dr-u", Role: auth.RoleClinician, Campus: "north", Urgent: true}, "--urgent is for a device"},
		{"a second uploader of one name", ptr(mustMint(t, auth.Principal{Name: "oct-5", Role: auth.RoleDevice, DeviceID: "a", Campus: "north"})), 0o444,
			auth.Principal{Name: "oct-5", Role: auth.RoleRouter, DeviceID: "b", Campus: "south"}, "already has a token named"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := writeTokens(t, tc.file, tc.mode)
			secret, err := TokenFile{Rand: rand.Reader}.Mint(path, tc.p)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Mint(%+v) = %q, %v; want an error saying %q", tc.p, secret, err, tc.wantErr)
				}
				b, _ := os.ReadFile(path)
				if tc.file != nil && string(b) != *tc.file {
					t.Errorf("a refused mint changed the file:\n%s", b)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tokens, err := auth.LoadTokens(path)
			if err != nil {
				t.Fatalf("the gateway's loader refuses the file: %v", err)
			}
			if got, ok := tokens.Lookup(secret); !ok || !reflect.DeepEqual(got, tc.p) {
				t.Errorf("the minted token authenticates as %+v (%v), want %+v", got, ok, tc.p)
			}
			if !strings.HasPrefix(secret, "octflow-"+string(tc.p.Role)+"-") || len(secret) < len("octflow--")+2*secretBytes {
				t.Errorf("secret %q: want octflow-<role>- and %d random bytes", secret, secretBytes)
			}
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(b), secret) || !strings.Contains(string(b), auth.HashToken(secret)) {
				t.Errorf("the file holds the secret, or not its hash:\n%s", b)
			}
			if tc.file == &initFile {
				if _, ok := tokens.Lookup(firstAdminToken); !ok {
					t.Error("init.sh's admin token no longer authenticates")
				}
			}
			if tc.file == &withNote && !strings.Contains(string(b), `"note":"ticket 17"`) {
				t.Errorf("a field api/auth does not read was dropped:\n%s", b)
			}
			if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != tc.mode {
				t.Errorf("mode %v (%v), want %v", fi.Mode().Perm(), err, tc.mode)
			}
			if left, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".tokens.json.*")); len(left) > 0 {
				t.Errorf("temporary files left: %v", left)
			}
		})
	}
}

// mustMint is a tokens file holding one token for p.
func mustMint(t *testing.T, p auth.Principal) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tokens.json")
	if _, err := (TokenFile{Rand: rand.Reader}).Mint(path, p); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func ptr[T any](v T) *T { return &v }

// A revoked token no longer authenticates through api/auth's loader; the
// others still do. A name the file does not have is an error, and
// changes nothing.
func TestRevokedTokensNoLongerAuthenticate(t *testing.T) {
	for _, tc := range []struct {
		name    string
		revoke  string
		gone    []string // the callers whose tokens no longer authenticate
		wantErr string
	}{
		{"a device", "oct-3", []string{"oct-3"}, ""},
		{"init.sh's admin", "first admin (deploy/init.sh)", []string{"first admin (deploy/init.sh)"}, ""},
		{"a clinician of two tokens", "dr-lee", []string{"dr-lee", "dr-lee"}, ""},
		{"a misspelt name", "oct3", nil, "no token named"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := writeTokens(t, &firstAdmin, 0o444)
			tf := TokenFile{Rand: rand.Reader}
			secrets := map[string][]string{"first admin (deploy/init.sh)": {firstAdminToken}}
			for _, p := range []auth.Principal{
				{Name: "oct-3", Role: auth.RoleDevice, DeviceID: "oct-3", Campus: "north"},
				{Name: "dr-lee", Role: auth.RoleClinician, Campus: "north"},
			} {
				s, err := tf.Mint(path, p)
				if err != nil {
					t.Fatal(err)
				}
				secrets[p.Name] = append(secrets[p.Name], s)
			}
			// A second token of one name, as a file edited by hand may
			// hold (api/auth allows it of a clinician): revoking the name
			// revokes both.
			b, _ := os.ReadFile(path)
			second := "octflow-clinician-second"
			edited := strings.Replace(string(b), "\n]", fmt.Sprintf(",\n  {\"sha256\": %q, \"role\": \"clinician\", \"name\": \"dr-lee\", \"campus\": \"south\"}\n]", auth.HashToken(second)), 1)
			if err := os.Chmod(path, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte(edited), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(path, 0o444); err != nil {
				t.Fatal(err)
			}
			secrets["dr-lee"] = append(secrets["dr-lee"], second)

			n, err := tf.Revoke(path, tc.revoke)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Revoke(%q) = %d, %v; want an error saying %q", tc.revoke, n, err, tc.wantErr)
				}
				if after, _ := os.ReadFile(path); string(after) != edited {
					t.Errorf("a refused revocation changed the file:\n%s", after)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if n != len(tc.gone) {
				t.Errorf("revoked %d, want %d", n, len(tc.gone))
			}
			tokens, err := auth.LoadTokens(path)
			if err != nil {
				t.Fatalf("the gateway's loader refuses the file: %v", err)
			}
			for name, ss := range secrets {
				for _, s := range ss {
					if _, ok := tokens.Lookup(s); ok == (name == tc.revoke) {
						t.Errorf("%s's token authenticates: %v, want %v", name, ok, name != tc.revoke)
					}
				}
			}
			if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o444 {
				t.Errorf("mode %v (%v), want the file's 0444", fi.Mode().Perm(), err)
			}
		})
	}
}

// The commands as an operator types them: mint prints the secret alone
// on the standard output, list shows names, roles, devices and campuses
// and no secret or hash, revoke takes the caller away; a broken file is
// refused, never rewritten.
func TestTheTokenCommands(t *testing.T) {
	path := writeTokens(t, &firstAdmin, 0o444)
	tf := TokenFile{Rand: rand.Reader}
	var out, msg bytes.Buffer
	if err := runTokenMint(tf, []string{"--file", path, "--name", "dr-lee", "--role", "clinician", "--campus", "north", "--campus", "demo-campus,south"}, &out, &msg); err != nil {
		t.Fatal(err)
	}
	secret := strings.TrimSuffix(out.String(), "\n")
	if strings.ContainsAny(secret, "\n ") || !strings.Contains(msg.String(), "docker compose restart api") {
		t.Errorf("mint printed %q and said %q: want the secret alone, and the restart on the standard error", out.String(), msg.String())
	}
	tokens, err := auth.LoadTokens(path)
	if err != nil {
		t.Fatal(err)
	}
	want := auth.Principal{Name: "dr-lee", Role: auth.RoleClinician, Campus: "north", Campuses: []string{"demo-campus", "south"}}
	if got, ok := tokens.Lookup(secret); !ok || !reflect.DeepEqual(got, want) {
		t.Errorf("the printed token is %+v (%v), want %+v", got, ok, want)
	}

	out.Reset()
	if err := runTokenList(tf, []string{"--file", path}, &out); err != nil {
		t.Fatal(err)
	}
	list := out.String()
	for _, line := range []string{"first admin (deploy/init.sh)  admin      -       (all)", "dr-lee                        clinician  -       north,demo-campus,south"} {
		if !strings.Contains(list, line) {
			t.Errorf("list lacks %q:\n%s", line, list)
		}
	}
	if strings.Contains(list, secret) || strings.Contains(list, auth.HashToken(secret)) || strings.Contains(list, auth.HashToken(firstAdminToken)) {
		t.Errorf("list shows a secret or a hash:\n%s", list)
	}

	if err := runTokenRevoke(tf, []string{"--file", path, "--name", "dr-lee"}, &msg); err != nil {
		t.Fatal(err)
	}
	if tokens, err = auth.LoadTokens(path); err != nil {
		t.Fatal(err)
	}
	if _, ok := tokens.Lookup(secret); ok {
		t.Error("the revoked token still authenticates")
	}

	for _, args := range [][]string{
		{"--name", "x", "--role", "admin"},            // no file
		{"--file", path, "--name", "x", "--role", ""}, // no role
	} {
		if err := runTokenMint(tf, args, &out, &msg); err == nil {
			t.Errorf("mint %v: no error", args)
		}
	}
	broken := "[{\"sha256\": \"abc\", \"role\": \"admin\", \"name\": \"x\"}]"
	bad := writeTokens(t, &broken, 0o600)
	if _, err := tf.Mint(bad, auth.Principal{Name: "ops", Role: auth.RoleAdmin}); err == nil || !strings.Contains(err.Error(), "as it is") {
		t.Errorf("mint into a file api/auth refuses: %v, want a refusal", err)
	}
	if b, _ := os.ReadFile(bad); string(b) != broken {
		t.Errorf("a broken file was rewritten:\n%s", b)
	}
}

// The file keeps its owner: a secret owned as deploy/make-secrets.sh
// owns them run as root (the api's user, 10001) stays readable by the
// api after root mints into it.
func TestMintKeepsTheFilesOwner(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("only root gives a file to another user")
	}
	path := writeTokens(t, &firstAdmin, 0o400)
	if err := os.Chown(path, 10001, 10001); err != nil {
		t.Fatal(err)
	}
	if _, err := (TokenFile{Rand: rand.Reader}).Mint(path, auth.Principal{Name: "ops", Role: auth.RoleAdmin}); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); st.Uid != 10001 || st.Gid != 10001 || fi.Mode().Perm() != 0o400 {
		t.Errorf("owner %d:%d, mode %v; want 10001:10001 and 0400 as before", st.Uid, st.Gid, fi.Mode().Perm())
	}
}
