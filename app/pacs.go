package app

import (
	"bytes"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"

	"octflow/activities"
	"octflow/exam"
)

// PACSEntry is one campus's PACS in the file OCTFLOW_PACS_FILE names: its
// DICOMweb base URL, the CA its certificate is checked against (a PEM
// file; none: the system's) and how to sign in, each secret read from a
// file of its own so that the settings file holds none: a bearer token,
// or a username and a password, or nothing for a PACS on a trusted
// network. A plain http URL is refused unless AllowPlainHTTP waives it,
// and with credentials unless it is this host's loopback (a PACS on the
// same host, a test).
type PACSEntry struct {
	URL            string `json:"url"`
	CAFile         string `json:"caFile,omitempty"`
	TokenFile      string `json:"tokenFile,omitempty"`
	UsernameFile   string `json:"usernameFile,omitempty"`
	PasswordFile   string `json:"passwordFile,omitempty"`
	AllowPlainHTTP bool   `json:"allowPlainHTTP,omitempty"`
}

// ReadPACSFile reads the file of each campus's PACS (OCTFLOW_PACS_FILE),
// a JSON object of campus → PACSEntry, and checks each entry's shape
// without reading the files it names (the gateway, which only needs to
// know which campuses export, holds none of their credentials). Every
// fault is an error naming its campus: an unknown field, a URL that is
// not an absolute http(s) URL or holds credentials, http not waived, a
// CA for http, both a token and a username, a username without a
// password.
func ReadPACSFile(path string) (map[string]PACSEntry, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("OCTFLOW_PACS_FILE: %w", err)
	}
	var raws map[string]json.RawMessage
	if err := json.Unmarshal(raw, &raws); err != nil {
		return nil, fmt.Errorf("OCTFLOW_PACS_FILE %s: want a JSON object of campus → PACS: %w", path, err)
	}
	entries := map[string]PACSEntry{}
	var errs []error
	for campus, r := range raws {
		var e PACSEntry
		dec := json.NewDecoder(bytes.NewReader(r))
		dec.DisallowUnknownFields()
		err := dec.Decode(&e)
		if err == nil {
			err = e.check(campus)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("OCTFLOW_PACS_FILE %s, campus %q: %w", path, campus, err))
			continue
		}
		entries[campus] = e
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return entries, nil
}

// PACSTargets are the export's targets of entries (ReadPACSFile), with
// the CA and credential files each names read: a file that cannot be
// read, is empty, or (the CA) holds no certificate is an error naming
// its campus.
func PACSTargets(entries map[string]PACSEntry) (map[string]activities.PACSTarget, error) {
	targets := map[string]activities.PACSTarget{}
	var errs []error
	for campus, e := range entries {
		t, err := e.target()
		if err != nil {
			errs = append(errs, fmt.Errorf("OCTFLOW_PACS_FILE, campus %q: %w", campus, err))
			continue
		}
		targets[campus] = t
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return targets, nil
}

// check checks an entry's shape.
func (e PACSEntry) check(campus string) error {
	if err := exam.ValidateCampus(campus); err != nil {
		return err
	}
	u, err := url.Parse(e.URL)
	if err != nil {
		// The parser's error quotes the URL, which may hold a password.
		return errors.New("url: not a URL")
	}
	credentials := e.TokenFile != "" || e.UsernameFile != ""
	// What a refusal may quote of the URL: no user, query or fragment,
	// where a secret could be.
	shown := *u
	shown.User, shown.RawQuery, shown.Fragment, shown.ForceQuery = nil, "", "", false
	switch {
	case u.User != nil:
		return errors.New("url: credentials go in usernameFile and passwordFile, not in the URL")
	case u.Host == "" || (u.Scheme != "https" && u.Scheme != "http"):
		return fmt.Errorf("url %q: want the PACS's DICOMweb base URL, https://…", shown.String())
	case u.RawQuery != "" || u.Fragment != "":
		return fmt.Errorf("url %q: a base URL has no query or fragment (octflow appends /studies to it)", shown.String())
	case u.Scheme == "http" && !e.AllowPlainHTTP:
		return fmt.Errorf("url %q is plain http: patients' results would cross the network in clear; use https, or set allowPlainHTTP for a PACS on this host", shown.String())
	case u.Scheme == "http" && credentials && !loopback(u.Hostname()):
		return fmt.Errorf("url %q is plain http to another host: its credentials would cross the network in clear; use https", shown.String())
	case u.Scheme == "http" && e.CAFile != "":
		return errors.New("caFile is set for a plain http URL")
	case e.TokenFile != "" && (e.UsernameFile != "" || e.PasswordFile != ""):
		return errors.New("both tokenFile and usernameFile/passwordFile: sign in one way")
	case (e.UsernameFile == "") != (e.PasswordFile == ""):
		return errors.New("usernameFile and passwordFile go together")
	}
	return nil
}

// loopback reports whether host is this host's loopback: localhost or a
// loopback address.
func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// target is the entry as the export's target, its files read.
func (e PACSEntry) target() (activities.PACSTarget, error) {
	t := activities.PACSTarget{URL: e.URL}
	read := func(field, path string) (string, error) {
		if path == "" {
			return "", nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return "", fmt.Errorf("%s: %w", field, err)
		}
		v := strings.TrimSpace(string(b))
		if v == "" {
			return "", fmt.Errorf("%s %s is empty", field, path)
		}
		return v, nil
	}
	var errs [3]error
	t.Token, errs[0] = read("tokenFile", e.TokenFile)
	t.Username, errs[1] = read("usernameFile", e.UsernameFile)
	t.Password, errs[2] = read("passwordFile", e.PasswordFile)
	if err := errors.Join(errs[:]...); err != nil {
		return t, err
	}
	if e.CAFile != "" {
		pem, err := os.ReadFile(e.CAFile)
		if err != nil {
			return t, fmt.Errorf("caFile: %w", err)
		}
		t.RootCAs = x509.NewCertPool()
		if !t.RootCAs.AppendCertsFromPEM(pem) {
			return t, fmt.Errorf("caFile %s holds no PEM certificate", e.CAFile)
		}
	}
	return t, nil
}
