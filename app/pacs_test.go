package app

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"octflow/internal/testpki"
)

// TestThePACSFileNamesEachCampussPACS: each campus's entry is checked
// before anything is read (https unless waived, one way to sign in, no
// credentials in the URL, no unknown field), then its CA and credential
// files are read; every fault names its campus and what to fix.
func TestThePACSFileNamesEachCampussPACS(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	ca := write("ca.pem", string(testpki.NewCA(t, "site CA").PEM))
	user, pass, token := write("user", "octflow\n"), write("pass", "s3cret\n"), write("token", "tok-123")
	empty, notPEM := write("empty", "\n"), write("not.pem", "no certificate here")
	for _, c := range []struct {
		name, file string
		want       string // an error containing this; "" for none
	}{
		{"https, CA and basic", `{"north": {"url": "https://pacs.north.example/dicom-web", "caFile": "` + ca + `", "usernameFile": "` + user + `", "passwordFile": "` + pass + `"}}`, ""},
		{"https, token, system CAs", `{"north": {"url": "https://pacs.north.example/dicom-web", "tokenFile": "` + token + `"}}`, ""},
		{"http waived", `{"north": {"url": "http://127.0.0.1:8042/dicom-web", "allowPlainHTTP": true}}`, ""},
		{"http not waived", `{"north": {"url": "http://pacs.north.example/dicom-web"}}`, "plain http"},
		{"not a URL", `{"north": {"url": "pacs.north.example"}}`, "DICOMweb base URL"},
		{"credentials in the URL", `{"north": {"url": "https://u:p@pacs.north.example/dicom-web"}}`, "not in the URL"},
		{"credentials in a URL of another scheme", `{"north": {"url": "ftp://u:hunter2@pacs.north.example/"}}`, "not in the URL"},
		{"a query", `{"north": {"url": "https://pacs.north.example/dicom-web?token=t0k"}}`, "no query or fragment"},
		{"http with credentials to another host", `{"north": {"url": "http://pacs.north.example/dicom-web", "allowPlainHTTP": true, "tokenFile": "` + token + `"}}`, "to another host"},
		{"http with credentials on loopback", `{"north": {"url": "http://127.0.0.1:8042/dicom-web", "allowPlainHTTP": true, "tokenFile": "` + token + `"}}`, ""},
		{"CA for http", `{"north": {"url": "http://127.0.0.1/dicom-web", "allowPlainHTTP": true, "caFile": "` + ca + `"}}`, "caFile is set for a plain http URL"},
		{"token and basic", `{"north": {"url": "https://p.example", "tokenFile": "` + token + `", "usernameFile": "` + user + `", "passwordFile": "` + pass + `"}}`, "sign in one way"},
		{"username alone", `{"north": {"url": "https://p.example", "usernameFile": "` + user + `"}}`, "go together"},
		{"unknown field", `{"north": {"url": "https://p.example", "password": "s3cret"}}`, "unknown field"},
		{"bad campus", `{"North Campus": {"url": "https://p.example"}}`, "North Campus"},
		{"missing file", `{"north": {"url": "https://p.example", "tokenFile": "` + filepath.Join(dir, "nope") + `"}}`, "tokenFile"},
		{"empty file", `{"north": {"url": "https://p.example", "tokenFile": "` + empty + `"}}`, "is empty"},
		{"CA without certificate", `{"north": {"url": "https://p.example", "caFile": "` + notPEM + `"}}`, "holds no PEM certificate"},
	} {
		t.Run(c.name, func(t *testing.T) {
			entries, err := ReadPACSFile(write("pacs.json", c.file))
			if err == nil {
				targets, terr := PACSTargets(entries)
				err = terr
				if err == nil && c.want == "" {
					tg := targets["north"]
					if tg.URL == "" || strings.Contains(c.file, "usernameFile") && (tg.Username != "octflow" || tg.Password != "s3cret") ||
						strings.Contains(c.file, "tokenFile") && tg.Token != "tok-123" || strings.Contains(c.file, "caFile") && tg.RootCAs == nil {
						t.Errorf("target %+v does not hold what the file names", tg)
					}
				}
			}
			switch {
			case c.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Errorf("error %v, want one saying %q", err, c.want)
			case c.want != "" && !strings.Contains(err.Error(), `campus "north"`) && !strings.Contains(err.Error(), `campus "North Campus"`):
				t.Errorf("error %v does not name the campus", err)
			}
			// No refusal repeats a secret the file or its URL holds.
			if err != nil && (strings.Contains(err.Error(), "hunter2") || strings.Contains(err.Error(), "t0k") || strings.Contains(err.Error(), "s3cret")) {
				t.Errorf("the refusal quotes a secret: %v", err)
			}
		})
	}
}
