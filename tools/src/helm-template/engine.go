package main

// The template engine: Go text/template with sprig and helm's own functions, the objects
// helm gives templates (.Values, .Release, .Chart, .Capabilities, .Template, .Files), and
// the output of `helm template`.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"sort"
	"strings"
	"text/template"

	"github.com/Masterminds/semver/v3"
	sprig "github.com/Masterminds/sprig/v3"
	"sigs.k8s.io/yaml"
)

type release struct {
	Name, Namespace, Service string
	IsInstall, IsUpgrade     bool
	Revision                 int
}

type kubeVersion struct{ Version, Major, Minor string }

func (k kubeVersion) String() string     { return k.Version }
func (k kubeVersion) GitVersion() string { return k.Version }

// versionSet is .Capabilities.APIVersions: "group/version" (and "group/version/Kind") strings.
type versionSet []string

func (v versionSet) Has(apiVersion string) bool {
	for _, x := range v {
		if x == apiVersion {
			return true
		}
	}
	return false
}

type capabilities struct {
	KubeVersion kubeVersion
	APIVersions versionSet
	HelmVersion struct{ Version string }
}

// builtinAPIs are the API versions of a plain Kubernetes 1.30 cluster; -a adds CRD groups.
var builtinAPIs = []string{
	"v1", "admissionregistration.k8s.io/v1", "apiextensions.k8s.io/v1", "apiregistration.k8s.io/v1",
	"apps/v1", "authentication.k8s.io/v1", "authorization.k8s.io/v1", "autoscaling/v1",
	"autoscaling/v2", "batch/v1", "certificates.k8s.io/v1", "coordination.k8s.io/v1",
	"discovery.k8s.io/v1", "events.k8s.io/v1", "flowcontrol.apiserver.k8s.io/v1",
	"networking.k8s.io/v1", "node.k8s.io/v1", "policy/v1", "rbac.authorization.k8s.io/v1",
	"scheduling.k8s.io/v1", "storage.k8s.io/v1",
}

func newCapabilities(version string, extra []string) (capabilities, error) {
	v, err := semver.NewVersion(version)
	if err != nil {
		return capabilities{}, fmt.Errorf("--kube-version %q: %w", version, err)
	}
	c := capabilities{
		KubeVersion: kubeVersion{Version: "v" + v.String(), Major: fmt.Sprint(v.Major()), Minor: fmt.Sprint(v.Minor())},
		APIVersions: append(append(versionSet{}, builtinAPIs...), extra...),
	}
	c.HelmVersion.Version = "v3.15.0"
	return c, nil
}

func render(o options) (manifests, notes string, err error) {
	c, err := loadChart(o.chartDir)
	if err != nil {
		return "", "", err
	}
	caps, err := newCapabilities(o.kubeVersion, o.apiVersions)
	if err != nil {
		return "", "", err
	}
	if c.meta.KubeVersion != "" {
		constraint, err := semver.NewConstraint(c.meta.KubeVersion)
		if err != nil {
			return "", "", fmt.Errorf("Chart.yaml kubeVersion %q: %w", c.meta.KubeVersion, err)
		}
		if v, _ := semver.NewVersion(caps.KubeVersion.Version); !constraint.Check(v) {
			return "", "", fmt.Errorf("chart requires kubeVersion %s, which is incompatible with Kubernetes %s", c.meta.KubeVersion, caps.KubeVersion)
		}
	}
	user, err := userValues(o.valueFiles, o.sets)
	if err != nil {
		return "", "", err
	}
	values := coalesce(user, c.values)

	names := make([]string, 0, len(c.templates))
	for n := range c.templates {
		names = append(names, n)
	}
	sort.Strings(names)
	root := template.New("chart")
	if o.strict {
		root.Option("missingkey=error")
	} else {
		root.Option("missingkey=zero")
	}
	root.Funcs(funcMap(root))
	for _, n := range names {
		if _, err := root.New(n).Parse(c.templates[n]); err != nil {
			return "", "", err
		}
	}

	templatesDir := path.Join(c.meta.Name, "templates")
	notesName := path.Join(templatesDir, "NOTES.txt")
	var out strings.Builder
	for _, n := range names {
		base := path.Base(n)
		if strings.HasPrefix(base, "_") || (n == notesName && !o.notes) {
			continue // partials define templates; they render nothing themselves
		}
		if n != notesName && !strings.HasSuffix(base, ".yaml") && !strings.HasSuffix(base, ".yml") && !strings.HasSuffix(base, ".json") {
			continue // helm skips other files too
		}
		data := map[string]interface{}{
			"Values": values,
			"Chart":  c.meta,
			"Release": release{Name: o.release, Namespace: o.namespace, Service: "Helm",
				IsInstall: true, Revision: 1},
			"Capabilities": caps,
			"Template":     map[string]interface{}{"Name": n, "BasePath": templatesDir},
			"Files":        c.files,
			"Subcharts":    map[string]interface{}{},
		}
		text, err := execute(root, n, data)
		if err != nil {
			return "", "", err
		}
		switch {
		case strings.TrimSpace(text) == "":
		case n == notesName:
			notes = text
		default:
			// One "# Source:" header per template file; documents in it are not split.
			fmt.Fprintf(&out, "---\n# Source: %s\n%s\n", n, strings.TrimSpace(text))
		}
	}
	return out.String(), notes, nil
}

// execute runs one template; a value missing in non-strict mode prints as nothing (helm).
func execute(t *template.Template, name string, data interface{}) (string, error) {
	var buf bytes.Buffer
	if err := t.ExecuteTemplate(&buf, name, data); err != nil {
		return "", err
	}
	return strings.ReplaceAll(buf.String(), "<no value>", ""), nil
}

// funcMap is sprig's functions (minus those reading the environment or the network) and
// helm's: include, tpl, required, lookup and the YAML/JSON converters.
func funcMap(root *template.Template) template.FuncMap {
	f := sprig.TxtFuncMap()
	for _, unsafe := range []string{"env", "expandenv", "getHostByName"} {
		delete(f, unsafe)
	}
	depth := map[string]int{}
	f["include"] = func(name string, data interface{}) (string, error) {
		if depth[name]++; depth[name] > 1000 {
			return "", fmt.Errorf("include %q: too deeply nested (a template including itself?)", name)
		}
		defer func() { depth[name]-- }()
		var buf bytes.Buffer
		err := root.ExecuteTemplate(&buf, name, data)
		return buf.String(), err
	}
	f["tpl"] = func(text string, data interface{}) (string, error) {
		t, err := root.Clone() // sees every define of the chart, adds nothing to it
		if err != nil {
			return "", err
		}
		if t, err = t.New("tpl").Parse(text); err != nil {
			return "", err
		}
		return execute(t, "tpl", data)
	}
	f["required"] = func(msg string, v interface{}) (interface{}, error) {
		if s, ok := v.(string); v == nil || (ok && s == "") {
			return nil, errors.New(msg)
		}
		return v, nil
	}
	// Nothing is installed: helm template's lookup finds nothing either.
	f["lookup"] = func(apiVersion, kind, namespace, name string) (map[string]interface{}, error) {
		return map[string]interface{}{}, nil
	}
	f["toYaml"] = func(v interface{}) string {
		out, err := yaml.Marshal(v)
		if err != nil {
			return ""
		}
		return strings.TrimSuffix(string(out), "\n")
	}
	f["toJson"] = func(v interface{}) string {
		out, err := json.Marshal(v)
		if err != nil {
			return ""
		}
		return string(out)
	}
	// The from* functions report a parse error in the result ("Error"), as helm's do.
	f["fromYaml"] = func(s string) map[string]interface{} {
		m := map[string]interface{}{}
		if err := yaml.Unmarshal([]byte(s), &m); err != nil {
			m = map[string]interface{}{"Error": err.Error()}
		}
		return m
	}
	f["fromJson"] = func(s string) map[string]interface{} {
		m := map[string]interface{}{}
		if err := json.Unmarshal([]byte(s), &m); err != nil {
			m = map[string]interface{}{"Error": err.Error()}
		}
		return m
	}
	f["fromYamlArray"] = func(s string) []interface{} {
		var a []interface{}
		if err := yaml.Unmarshal([]byte(s), &a); err != nil {
			a = []interface{}{err.Error()}
		}
		return a
	}
	f["fromJsonArray"] = func(s string) []interface{} {
		var a []interface{}
		if err := json.Unmarshal([]byte(s), &a); err != nil {
			a = []interface{}{err.Error()}
		}
		return a
	}
	return f
}
