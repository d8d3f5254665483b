package devsystem

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestEnsureSecretsMakesTheDevTokensOnceAndRefusesAnIncompleteFile(t *testing.T) {
	dir := t.TempDir()
	first, err := EnsureSecrets(dir)
	if err != nil {
		t.Fatal(err)
	}
	if first.Admin == "" || first.WebhookSecret == "" || first.Router == "" || len(first.Devices) != 2 || len(first.Clinicians) != 2 {
		t.Fatalf("fresh tokens incomplete: %+v", first)
	}
	again, err := EnsureSecrets(dir)
	if err != nil || again.Admin != first.Admin || again.Devices[1] != first.Devices[1] {
		t.Fatalf("second call: %v, tokens changed: %+v", err, again)
	}
	// An extra campus is added once, beside the tokens already made.
	more, err := EnsureSecrets(dir, "south-campus")
	if err != nil || len(more.Devices) != 3 || more.Devices[2].Campus != "south-campus" || len(more.Clinicians) != 3 ||
		more.Clinicians[2].Campus != "south-campus" || more.Devices[1] != first.Devices[1] {
		t.Fatalf("with an extra campus: %v, %+v", err, more)
	}
	if again, err := EnsureSecrets(dir, "south-campus"); err != nil || len(again.Devices) != 3 || again.Devices[2] != more.Devices[2] {
		t.Fatalf("the extra campus again: %v, %+v", err, again.Devices)
	}
	if _, err := EnsureSecrets(dir, "South Campus"); err == nil {
		t.Error("an extra campus that is not a campus name was taken")
	}

	for _, c := range []struct{ name, file string }{
		{"no router token", `{"device":"d","clinician":"c","admin":"a","webhookSecret":"w","devices":[{"token":"d"}],"clinicians":[{"token":"c"}]}`},
		{"no devices", `{"device":"d","clinician":"c","admin":"a","webhookSecret":"w","router":"r"}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			old := t.TempDir()
			if err := os.WriteFile(filepath.Join(old, "dev-tokens.json"), []byte(c.file), 0o600); err != nil {
				t.Fatal(err)
			}
			if _, err := EnsureSecrets(old); err == nil || !strings.Contains(err.Error(), "remove "+old) {
				t.Errorf("err = %v, want one that says to remove the data directory", err)
			}
		})
	}
}
