package composetest

import (
	"crypto/sha256"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// shellList is the words of the assignment NAME="…" in a script.
func shellList(t *testing.T, script, name string) []string {
	t.Helper()
	m := regexp.MustCompile(`(?m)^` + name + `="([^"]*)"$`).FindStringSubmatch(readFile(t, script))
	if m == nil {
		t.Fatalf("%s sets no %s=\"…\"", script, name)
	}
	return strings.Fields(m[1])
}

// Every volume of the shipped stack is either backed up by
// deploy/backup.sh or named there as left out, never both; restore.sh
// restores exactly the volumes backup.sh backs up, each from its part.
// A volume added to docker-compose.yml fails this until the backup says
// what becomes of it.
func TestEveryVolumeIsBackedUpOrSaidNotToBe(t *testing.T) {
	backup := filepath.Join(repoRoot, "deploy", "backup.sh")
	restore := filepath.Join(repoRoot, "deploy", "restore.sh")
	kept, left := shellList(t, backup, "BACKED_UP"), shellList(t, backup, "NOT_BACKED_UP")
	var all []string
	for name := range shipped(t).Volumes {
		all = append(all, name)
	}
	for _, v := range all {
		if slices.Contains(kept, v) == slices.Contains(left, v) {
			t.Errorf("volume %s: backed up %v, said not to be %v; want exactly one", v, slices.Contains(kept, v), slices.Contains(left, v))
		}
	}
	for _, v := range append(slices.Clone(kept), left...) {
		if !slices.Contains(all, v) {
			t.Errorf("backup.sh names a volume %s that docker-compose.yml does not have", v)
		}
	}
	restored := shellList(t, restore, "VOLUMES")
	slices.Sort(restored)
	want := slices.Sorted(slices.Values(kept))
	if !slices.Equal(restored, want) {
		t.Errorf("restore.sh restores %v, backup.sh backs up %v", restored, want)
	}
	parts := shellList(t, restore, "PARTS")
	for _, v := range kept {
		if !slices.Contains(parts, v+".tar.gz") {
			t.Errorf("restore.sh checks no part %s.tar.gz for the volume %s", v, v)
		}
	}
	for _, p := range parts {
		if !strings.Contains(readFile(t, backup), p) {
			t.Errorf("restore.sh wants a part %s that backup.sh does not write", p)
		}
	}
}

// restore.sh checks an archive before it changes anything: one whose part
// does not match SHA256SUMS, or that lacks a part, is refused, and no
// secret is put back. The same archive undamaged passes the check and its
// secrets are put back (then the stand-in Compose fails, so it goes no
// further).
func TestRestoreRefusesADamagedArchiveAndChangesNothing(t *testing.T) {
	for _, tool := range []string{"tar", "gzip", "sha256sum", "diff"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed", tool)
		}
	}
	// archive writes an archive of the parts (name → content) with
	// SHA256SUMS of sums (default: the parts' own), returning its path.
	scratch := t.TempDir()
	site := filepath.Join(scratch, "site")
	if err := os.MkdirAll(filepath.Join(site, "deploy", "secrets"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(site, "deploy", "secrets", "codec-keys.json"), []byte(`{"active": "k1"}`+"\n"), 0o400); err != nil {
		t.Fatal(err)
	}
	run := func(dir, name string, args ...string) {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s %v: %v: %s", name, args, err, out)
		}
	}
	n := 0
	archive := func(damage, drop string) string {
		n++
		dir := filepath.Join(scratch, fmt.Sprintf("a%d", n))
		b := filepath.Join(dir, "octflow-backup-20250101T000000Z")
		if err := os.MkdirAll(b, 0o700); err != nil {
			t.Fatal(err)
		}
		run(site, "tar", "-czf", filepath.Join(b, "site.tar.gz"), "deploy/secrets")
		parts := []string{"MANIFEST", "site.tar.gz"}
		for _, v := range []string{"postgresql", "s3", "audit-spool", "audit-log", "audit-queue"} {
			parts = append(parts, v+".tar.gz")
			if err := os.WriteFile(filepath.Join(b, v+".tar.gz"), []byte(v), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(b, "MANIFEST"), []byte("octflow backup\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		var sums strings.Builder
		for _, p := range parts {
			fmt.Fprintf(&sums, "%x  ./%s\n", sha256.Sum256([]byte(readFile(t, filepath.Join(b, p)))), p)
		}
		if err := os.WriteFile(filepath.Join(b, "SHA256SUMS"), []byte(sums.String()), 0o600); err != nil {
			t.Fatal(err)
		}
		if damage != "" {
			if err := os.WriteFile(filepath.Join(b, damage), []byte("damaged"), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		if drop != "" {
			os.Remove(filepath.Join(b, drop))
		}
		run(dir, "tar", "-cf", "backup.tar", filepath.Base(b))
		return filepath.Join(dir, "backup.tar")
	}
	// A stack directory with restore.sh and no secrets; Compose is a
	// stand-in that fails.
	restore := func(a string) (string, bool) {
		t.Helper()
		root := t.TempDir()
		if err := os.MkdirAll(filepath.Join(root, "deploy"), 0o755); err != nil {
			t.Fatal(err)
		}
		run(root, "cp", filepath.Join(mustAbs(t, repoRoot), "deploy", "restore.sh"), filepath.Join(root, "deploy"))
		cmd := exec.Command(filepath.Join(root, "deploy", "restore.sh"), a)
		cmd.Env = append(os.Environ(), "OCTFLOW_COMPOSE=false")
		out, err := cmd.CombinedOutput()
		if err == nil {
			t.Fatalf("restore.sh %s succeeded with a stand-in Compose that fails: %s", a, out)
		}
		_, statErr := os.Stat(filepath.Join(root, "deploy", "secrets", "codec-keys.json"))
		return string(out), statErr == nil
	}
	for _, c := range []struct{ damage, drop, want string }{
		{damage: "s3.tar.gz", want: "damaged"},
		{damage: "site.tar.gz", want: "damaged"},
		{drop: "audit-log.tar.gz", want: "lacks audit-log.tar.gz"},
	} {
		out, put := restore(archive(c.damage, c.drop))
		if !strings.Contains(out, c.want) {
			t.Errorf("damaged %q, dropped %q: restore.sh said %q, want %q", c.damage, c.drop, out, c.want)
		}
		if put {
			t.Errorf("damaged %q, dropped %q: restore.sh put the secrets back before refusing", c.damage, c.drop)
		}
	}
	out, put := restore(archive("", ""))
	if !put || !strings.Contains(out, "every part as SHA256SUMS says") || !strings.Contains(out, "docker compose config") {
		t.Errorf("the undamaged archive: secrets put back %v, restore.sh said %q; want them back, then a stop at the stand-in Compose", put, out)
	}
}

func mustAbs(t *testing.T, p string) string {
	t.Helper()
	a, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return a
}
