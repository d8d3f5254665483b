package cli

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"

	"octflow/api/auth"
)

// runAdmin runs the operator's commands on the stack's files:
//
//	octflow admin token mint --file tokens.json --name NAME --role ROLE [--campus C ...] [--device-id ID] [--urgent]
//	octflow admin token revoke --file tokens.json --name NAME
//	octflow admin token list --file tokens.json
func runAdmin(_ context.Context, args []string) error {
	if len(args) < 2 || args[0] != "token" {
		fmt.Fprint(os.Stderr, adminUsage)
		return flag.ErrHelp
	}
	tf := TokenFile{Rand: rand.Reader}
	switch args[1] {
	case "mint":
		return runTokenMint(tf, args[2:], os.Stdout, os.Stderr)
	case "revoke":
		return runTokenRevoke(tf, args[2:], os.Stderr)
	case "list":
		return runTokenList(tf, args[2:], os.Stdout)
	}
	fmt.Fprint(os.Stderr, adminUsage)
	return flag.ErrHelp
}

const adminUsage = `usage: octflow admin token <mint|revoke|list> --file tokens.json [flags]

  mint    make a token for a caller: prints its secret once, keeps only its hash
  revoke  remove a caller's tokens, by name
  list    the callers: names, roles, devices and campuses, never a secret

The api reads tokens.json when it starts: restart it after a change
(docker compose restart api). Run 'octflow admin token <command> -h' for
its flags.
`

// afterChange is what an operator does once tokens.json has changed.
const afterChange = "the api reads the file when it starts: docker compose restart api"

// campusList is a repeatable --campus flag, each value one campus or a
// comma-separated list.
type campusList []string

func (c *campusList) String() string { return strings.Join(*c, ",") }

func (c *campusList) Set(v string) error {
	for s := range strings.SplitSeq(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			*c = append(*c, s)
		}
	}
	return nil
}

func runTokenMint(tf TokenFile, args []string, stdout, stderr io.Writer) error {
	flags := flag.NewFlagSet("admin token mint", flag.ContinueOnError)
	file := flags.String("file", "", "the tokens file (deploy/secrets/tokens.json); made 0600 if missing")
	name := flags.String("name", "", "the caller's name, as the audit trail shows it (unique in the file)")
	role := flags.String("role", "", "device, router, clinician or admin")
	device := flags.String("device-id", "", "a device's or router's device ID")
	urgent := flags.Bool("urgent", false, "a device or router that may send urgent exams")
	var campuses campusList
	flags.Var(&campuses, "campus", "a campus (repeat, or comma-separated): a device's or router's one; a clinician's home campus first, then the others they read")
	if err := flags.Parse(args); err != nil {
		return err
	}
	if *file == "" || flags.NArg() > 0 {
		return errors.New("admin token mint: --file is required, and takes no arguments")
	}
	p := auth.Principal{Name: *name, Role: auth.Role(*role), DeviceID: *device, Urgent: *urgent}
	if len(campuses) > 0 {
		p.Campus, p.Campuses = campuses[0], slices.Clone(campuses[1:])
	}
	secret, err := tf.Mint(*file, p)
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, secret)
	fmt.Fprintf(stderr, "minted a token for %q (%s; shown once, only its hash is in %s); %s\n", p.Name, p.Role, *file, afterChange)
	return nil
}

func runTokenRevoke(tf TokenFile, args []string, stderr io.Writer) error {
	flags := flag.NewFlagSet("admin token revoke", flag.ContinueOnError)
	file := flags.String("file", "", "the tokens file (deploy/secrets/tokens.json)")
	name := flags.String("name", "", "the caller whose tokens are revoked")
	if err := flags.Parse(args); err != nil {
		return err
	}
	if *file == "" || *name == "" || flags.NArg() > 0 {
		return errors.New("admin token revoke: --file and --name are required, and it takes no arguments")
	}
	n, err := tf.Revoke(*file, *name)
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "revoked %d token(s) of %q in %s; %s\n", n, *name, *file, afterChange)
	return nil
}

func runTokenList(tf TokenFile, args []string, stdout io.Writer) error {
	flags := flag.NewFlagSet("admin token list", flag.ContinueOnError)
	file := flags.String("file", "", "the tokens file (deploy/secrets/tokens.json)")
	if err := flags.Parse(args); err != nil {
		return err
	}
	if *file == "" || flags.NArg() > 0 {
		return errors.New("admin token list: --file is required, and takes no arguments")
	}
	callers, err := tf.List(*file)
	if err != nil {
		return err
	}
	w := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "NAME\tROLE\tDEVICE\tCAMPUSES\tURGENT")
	for _, p := range callers {
		scope := strings.Join(p.Scope(), ",")
		if p.Role == auth.RoleAdmin {
			scope = "(all)"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%t\n", p.Name, p.Role, cmp.Or(p.DeviceID, "-"), cmp.Or(scope, "-"), p.Urgent)
	}
	return w.Flush()
}

// TokenFile edits a tokens file as api/auth reads it (auth.LoadTokens):
// a JSON array of auth.TokenEntry, only each token's SHA-256 kept. Every
// change is checked whole by auth.NewTokens before it is written, and
// written atomically (a new file renamed over the old one) with the old
// file's mode and owner, or 0600 for a new file. Entries it does not
// change are kept as they are, fields api/auth does not read included.
type TokenFile struct {
	// Rand is where secrets come from (crypto/rand.Reader).
	Rand io.Reader
}

// secretBytes is how much randomness a minted token holds, as many as
// deploy/init.sh's first admin token.
const secretBytes = 24

// Mint adds a token for p to the file at path (made if missing) and
// returns its secret, which is kept nowhere: the file holds its hash.
// It refuses a name the file already has, an unknown role, and what
// auth.NewTokens refuses (a device or router without a device ID and one
// campus, a clinician without a campus, a campus that is no campus
// name); a campus for an admin, who sees every campus; and urgent for a
// caller that sends no exams.
func (tf TokenFile) Mint(path string, p auth.Principal) (string, error) {
	if p.Name == "" {
		return "", errors.New("mint: --name is required (the audit trail names each caller)")
	}
	switch p.Role {
	case auth.RoleDevice, auth.RoleRouter:
	case auth.RoleClinician, auth.RoleAdmin:
		if p.Urgent {
			return "", fmt.Errorf("mint: --urgent is for a device or router; a %s sends no exams", p.Role)
		}
		if p.DeviceID != "" {
			return "", fmt.Errorf("mint: --device-id is for a device or router, not a %s", p.Role)
		}
		if p.Role == auth.RoleAdmin && (p.Campus != "" || len(p.Campuses) > 0) {
			return "", errors.New("mint: an admin sees every campus: give no --campus")
		}
	default:
		return "", fmt.Errorf("mint: unknown role %q: want device, router, clinician or admin", p.Role)
	}
	raw, entries, err := readTokenFile(path, true)
	if err != nil {
		return "", err
	}
	for _, e := range entries {
		if e.Name == p.Name {
			return "", fmt.Errorf("mint: %s already has a token named %q: revoke it first, or choose another name", path, p.Name)
		}
	}
	b := make([]byte, secretBytes)
	if _, err := io.ReadFull(tf.Rand, b); err != nil {
		return "", fmt.Errorf("mint: random secret: %w", err)
	}
	secret := "octflow-" + string(p.Role) + "-" + hex.EncodeToString(b)
	entry := auth.TokenEntry{SHA256: auth.HashToken(secret), Principal: p}
	if _, err := auth.NewTokens(append(entries, entry)); err != nil {
		return "", fmt.Errorf("mint: %w", err)
	}
	one, err := json.Marshal(entry)
	if err != nil {
		return "", fmt.Errorf("mint: %w", err)
	}
	if err := writeTokenFile(path, append(raw, one)); err != nil {
		return "", err
	}
	return secret, nil
}

// Revoke removes every token named name from the file at path and says
// how many there were; a name the file does not have is an error, so a
// misspelt revocation is not taken for a done one.
func (tf TokenFile) Revoke(path, name string) (int, error) {
	raw, entries, err := readTokenFile(path, false)
	if err != nil {
		return 0, err
	}
	var keep []json.RawMessage
	for i, e := range entries {
		if e.Name != name {
			keep = append(keep, raw[i])
		}
	}
	n := len(raw) - len(keep)
	if n == 0 {
		return 0, fmt.Errorf("revoke: %s has no token named %q (octflow admin token list)", path, name)
	}
	return n, writeTokenFile(path, keep)
}

// List is the callers of the file at path, in its order; no secret is in
// the file, and a Principal holds no hash.
func (tf TokenFile) List(path string) ([]auth.Principal, error) {
	_, entries, err := readTokenFile(path, false)
	if err != nil {
		return nil, err
	}
	out := make([]auth.Principal, len(entries))
	for i, e := range entries {
		out[i] = e.Principal
	}
	return out, nil
}

// readTokenFile reads the file at path as its raw entries and their
// reading, checked by auth.NewTokens; missing, when allowed, is empty.
func readTokenFile(path string, missingOK bool) ([]json.RawMessage, []auth.TokenEntry, error) {
	b, err := os.ReadFile(path)
	if missingOK && errors.Is(err, fs.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("read tokens: %w", err)
	}
	var raw []json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, nil, fmt.Errorf("parse tokens %s: %w", path, err)
	}
	entries := make([]auth.TokenEntry, len(raw))
	for i, r := range raw {
		if err := json.Unmarshal(r, &entries[i]); err != nil {
			return nil, nil, fmt.Errorf("parse tokens %s: token %d: %w", path, i, err)
		}
	}
	if _, err := auth.NewTokens(entries); err != nil {
		return nil, nil, fmt.Errorf("tokens %s, as it is: %w", path, err)
	}
	return raw, entries, nil
}

// writeTokenFile writes entries to path, one a line, atomically: a new
// file in the same directory, synced, with the old file's mode and owner
// (0600 and this user's for a new one), renamed over the old.
func writeTokenFile(path string, entries []json.RawMessage) (err error) {
	var buf bytes.Buffer
	buf.WriteString("[")
	for i, e := range entries {
		if i > 0 {
			buf.WriteString(",")
		}
		buf.WriteString("\n  ")
		if err := json.Compact(&buf, e); err != nil {
			return fmt.Errorf("write tokens: entry %d: %w", i, err)
		}
	}
	buf.WriteString("\n]\n")

	// A link is followed: the file it names is replaced.
	if target, err := filepath.EvalSymlinks(path); err == nil {
		path = target
	}
	mode, uid, gid := fs.FileMode(0o600), -1, -1
	if fi, err := os.Stat(path); err == nil {
		mode = fi.Mode().Perm()
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			uid, gid = int(st.Uid), int(st.Gid)
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("write tokens: %w", err)
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("write tokens: %w", err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if _, err := f.Write(buf.Bytes()); err != nil {
		return fmt.Errorf("write tokens: %w", err)
	}
	if err := f.Chmod(mode); err != nil {
		return fmt.Errorf("write tokens: %w", err)
	}
	if uid >= 0 {
		fi, err := f.Stat()
		if err != nil {
			return fmt.Errorf("write tokens: %w", err)
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && (int(st.Uid) != uid || int(st.Gid) != gid) {
			// Its owner is who reads it (the api's user, for a secret
			// owned as deploy/make-secrets.sh owns them, run as root).
			if err := f.Chown(uid, gid); err != nil {
				return fmt.Errorf("write tokens: keep %s's owner %d:%d (run as its owner or root): %w", path, uid, gid, err)
			}
		}
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("write tokens: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write tokens: %w", err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("write tokens: %w", err)
	}
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}
