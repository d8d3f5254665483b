package composetest

import (
	"encoding/json"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The compose test runs deploy/orthanc's router recipe as its README
// tells a site (compose.test.yml's router and device; run.sh, its router
// section). What is checked here would otherwise fail only minutes into
// `make compose-test`: Orthanc's directory holds the site's file and the
// recipe's two, as shipped and read-only, with no key twice (Orthanc
// refuses it); the site declares the device's AE title at the address
// the device has; the router reaches octflow's DICOMweb root over HTTPS
// by a name every api certificate has, checked against the stack's CA,
// and takes its token from a secret file, not from its environment.
func TestTheComposeTestsRouterIsSetUpAsTheRecipeSays(t *testing.T) {
	env := siteSettings()
	env["OCTFLOW_TEST_API_PORT"], env["OCTFLOW_TEST_UI_PORT"] = "18080", "18233"
	p, err := loadAll(repoRoot, env, "docker-compose.yml", "deploy/compose-test/compose.test.yml")
	if err != nil {
		t.Fatalf("load docker-compose.yml with compose.test.yml: %v", err)
	}
	router, ok := p.Services["router"]
	if !ok {
		t.Fatal("compose.test.yml has no router")
	}
	device, ok := p.Services["device"]
	if !ok {
		t.Fatal("compose.test.yml has no device")
	}

	// Orthanc's configuration directory, as its command names it, and
	// what is mounted there: by the path in the run directory (run.sh
	// copies deploy/ there as it is, and router-site/orthanc.json from
	// deploy/compose-test), the file of this repository it is.
	const dir = "/etc/orthanc-router/"
	if cmd := strings.Join(router.Command, " "); !strings.Contains(cmd, "exec Orthanc "+dir) {
		t.Errorf("the router's command %q does not run Orthanc on %s", cmd, dir)
	}
	root, err := filepath.Abs(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{} // name in dir → file of this repository
	for _, v := range router.Volumes {
		name, ok := strings.CutPrefix(v.Target, dir)
		if !ok {
			continue
		}
		if !v.ReadOnly {
			t.Errorf("the router mounts %s writable", v.Target)
		}
		abs, err := filepath.Abs(v.Source)
		if err != nil {
			t.Fatal(err)
		}
		src, err := filepath.Rel(root, abs)
		if err != nil {
			t.Fatal(err)
		}
		if rest, ok := strings.CutPrefix(src, "router-site/"); ok {
			src = filepath.Join("deploy/compose-test/router-site", rest)
		}
		files[name] = src
	}
	want := map[string]string{"orthanc.json": "deploy/compose-test/router-site/orthanc.json",
		"octflow.json": "deploy/orthanc/octflow.json", "octflow-forward.lua": "deploy/orthanc/octflow-forward.lua"}
	for name, src := range want {
		if files[name] != src {
			t.Errorf("the router's %s%s is %q, want %s", dir, name, files[name], src)
		}
	}
	if len(files) != len(want) {
		t.Errorf("the router's %s holds %v, want %v", dir, files, want)
	}

	// The site's file beside the recipe's: no key twice.
	var site struct {
		DicomAet            string
		DicomModalities     map[string][]any
		RemoteAccessAllowed *bool
	}
	siteRaw := read(t, filepath.Join(repoRoot, want["orthanc.json"]))
	if err := json.Unmarshal([]byte(siteRaw), &site); err != nil {
		t.Fatalf("%s: %v", want["orthanc.json"], err)
	}
	var siteKeys, recipeKeys map[string]json.RawMessage
	if err := json.Unmarshal([]byte(siteRaw), &siteKeys); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(read(t, filepath.Join(repoRoot, want["octflow.json"]))), &recipeKeys); err != nil {
		t.Fatalf("%s: %v", want["octflow.json"], err)
	}
	for k := range siteKeys {
		if _, ok := recipeKeys[k]; ok {
			t.Errorf("the site's orthanc.json and the recipe's octflow.json both set %s: Orthanc refuses a key twice", k)
		}
	}
	if site.RemoteAccessAllowed == nil || *site.RemoteAccessAllowed {
		t.Error("the router's REST API is open beyond its own container (RemoteAccessAllowed), and run.sh reads it from inside")
	}

	// The device's AE title at the address the device has, on a network
	// the router is on.
	if len(device.Networks) != 1 {
		t.Fatalf("the device is on %v, want its campus's network alone", device.Networks)
	}
	var network, address string
	for n, cfg := range device.Networks {
		if cfg != nil {
			network, address = n, cfg.Ipv4Address
		}
	}
	if _, ok := router.Networks[network]; !ok || address == "" {
		t.Fatalf("the device is at %q on %q, a network the router is not on (%v)", address, network, router.Networks)
	}
	declared := 0
	for name, m := range site.DicomModalities {
		if len(m) < 2 {
			t.Errorf("the modality %s is %v, want [AE title, host, port]", name, m)
			continue
		}
		if m[1] != address {
			t.Errorf("the modality %s (%v) is declared at %v; the device is at %s", name, m[0], m[1], address)
		}
		declared++
	}
	if declared != 1 || site.DicomAet == "" {
		t.Errorf("the site declares %d modalities and the router's AE title %q; want the device and its own title", declared, site.DicomAet)
	}

	// octflow over HTTPS, by a name deploy/make-certs.sh gives every api
	// certificate, whichever OCTFLOW_API_HOSTS; the stack's CA.
	envOf := func(k string) string {
		if v := router.Environment[k]; v != nil {
			return *v
		}
		return ""
	}
	u, err := url.Parse(envOf("OCTFLOW_DICOMWEB_URL"))
	if err != nil || u.Scheme != "https" {
		t.Fatalf("the router's OCTFLOW_DICOMWEB_URL %q: want https", envOf("OCTFLOW_DICOMWEB_URL"))
	}
	m := regexp.MustCompile(`(?m)^for h in \$HOSTS ([^;]+); do$`).FindStringSubmatch(read(t, filepath.Join(repoRoot, "deploy/make-certs.sh")))
	if m == nil {
		t.Fatal("deploy/make-certs.sh: the api certificate's names not found")
	}
	if !slices.Contains(strings.Fields(m[1]), u.Hostname()) {
		t.Errorf("the router reaches octflow as %s, not a name of every api certificate (%s)", u.Hostname(), m[1])
	}
	if len(shared(p, "router", u.Hostname())) == 0 {
		t.Errorf("the router does not reach %s", u.Hostname())
	}
	secrets := map[string]string{}
	for _, s := range router.Secrets {
		secrets[secretPath(s)] = s.Source
	}
	if ca := envOf("OCTFLOW_CA_FILE"); secrets[ca] != "ca.pem" {
		t.Errorf("the router's OCTFLOW_CA_FILE is %q, want the stack's CA (the secret ca.pem), mounted", ca)
	}

	// The token: from a secret file the command reads, never set in the
	// environment.
	if _, ok := router.Environment["OCTFLOW_ROUTER_TOKEN"]; ok {
		t.Error("the router's token is in its environment")
	}
	file := regexp.MustCompile(`OCTFLOW_ROUTER_TOKEN=\$\(cat (\S+)\)`).FindStringSubmatch(strings.Join(router.Command, " "))
	if file == nil || secrets[file[1]] == "" {
		t.Errorf("the router's command %q does not read its token from a secret it mounts (%v)", router.Command, secrets)
	}
}
