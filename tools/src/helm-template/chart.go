package main

// Loading a chart directory and computing the values a release sees, as helm does.

import (
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"
)

// metadata is Chart.yaml, with the field names templates use (.Chart.Name, .Chart.AppVersion).
type metadata struct {
	APIVersion   string                   `json:"apiVersion"`
	Name         string                   `json:"name"`
	Version      string                   `json:"version"`
	KubeVersion  string                   `json:"kubeVersion,omitempty"`
	Description  string                   `json:"description,omitempty"`
	Type         string                   `json:"type,omitempty"`
	Keywords     []string                 `json:"keywords,omitempty"`
	Home         string                   `json:"home,omitempty"`
	Sources      []string                 `json:"sources,omitempty"`
	Dependencies []map[string]interface{} `json:"dependencies,omitempty"`
	Maintainers  []map[string]interface{} `json:"maintainers,omitempty"`
	Icon         string                   `json:"icon,omitempty"`
	AppVersion   string                   `json:"appVersion,omitempty"`
	Deprecated   bool                     `json:"deprecated,omitempty"`
	Annotations  map[string]string        `json:"annotations,omitempty"`
	Condition    string                   `json:"condition,omitempty"`
	Tags         string                   `json:"tags,omitempty"`
}

type chart struct {
	meta      metadata
	values    map[string]interface{} // values.yaml
	templates map[string]string      // "NAME/templates/x.yaml" -> source
	files     files                  // every other file, as .Files sees them
}

func loadChart(dir string) (*chart, error) {
	c := &chart{values: map[string]interface{}{}, templates: map[string]string{}, files: files{}}
	raw, err := os.ReadFile(filepath.Join(dir, "Chart.yaml"))
	if err != nil {
		return nil, err
	}
	if err := yaml.UnmarshalStrict(raw, &c.meta); err != nil {
		return nil, fmt.Errorf("Chart.yaml: %w", err)
	}
	if c.meta.APIVersion == "" || c.meta.Name == "" || c.meta.Version == "" {
		return nil, errors.New("Chart.yaml: apiVersion, name and version are required")
	}
	if len(c.meta.Dependencies) > 0 {
		return nil, errors.New("Chart.yaml: dependencies (subcharts) are not supported")
	}
	ignore, err := readHelmignore(filepath.Join(dir, ".helmignore"))
	if err != nil {
		return nil, err
	}
	err = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		rel = filepath.ToSlash(rel)
		if rel == "." {
			return nil
		}
		if ignore.matches(rel, d.IsDir()) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			if rel == "charts" {
				return errors.New("charts/ (subcharts) is not supported")
			}
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		switch {
		case rel == "values.yaml":
			if err := yaml.Unmarshal(data, &c.values); err != nil {
				return fmt.Errorf("values.yaml: %w", err)
			}
		case rel == "Chart.yaml" || rel == "values.schema.json" || rel == ".helmignore":
			// Not in .Files, as in helm.
		case strings.HasPrefix(rel, "templates/"):
			c.templates[path.Join(c.meta.Name, rel)] = string(data)
		default:
			c.files[rel] = data
		}
		return nil
	})
	if c.values == nil { // an empty values.yaml
		c.values = map[string]interface{}{}
	}
	return c, err
}

// helmignore holds the patterns of a .helmignore file: shell globs matched against the path
// and its base name; a trailing "/" matches directories only, a leading "/" anchors at the root.
type helmignore []string

func readHelmignore(p string) (helmignore, error) {
	data, err := os.ReadFile(p)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	var h helmignore
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if strings.HasPrefix(line, "!") {
			return nil, fmt.Errorf("%s: negated patterns (%s) are not supported", p, line)
		}
		h = append(h, line)
	}
	return h, err
}

func (h helmignore) matches(rel string, isDir bool) bool {
	for _, pat := range h {
		if strings.HasSuffix(pat, "/") {
			if !isDir {
				continue
			}
			pat = strings.TrimSuffix(pat, "/")
		}
		if strings.HasPrefix(pat, "/") {
			if ok, _ := path.Match(strings.TrimPrefix(pat, "/"), rel); ok {
				return true
			}
			continue
		}
		if ok, _ := path.Match(pat, rel); ok {
			return true
		}
		if ok, _ := path.Match(pat, path.Base(rel)); ok {
			return true
		}
	}
	return false
}

// userValues merges the -f files (later files win, maps merge key by key) and then the --set
// expressions, like helm before it coalesces the result with the chart's values.
func userValues(valueFiles []string, sets []setArg) (map[string]interface{}, error) {
	user := map[string]interface{}{}
	for _, f := range valueFiles {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		m := map[string]interface{}{}
		if err := yaml.Unmarshal(data, &m); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		mergeInto(user, m)
	}
	for _, s := range sets {
		if err := applySet(user, s); err != nil {
			return nil, err
		}
	}
	return user, nil
}

func mergeInto(dst, src map[string]interface{}) {
	for k, v := range src {
		if sm, ok := v.(map[string]interface{}); ok {
			if dm, ok := dst[k].(map[string]interface{}); ok {
				mergeInto(dm, sm)
				continue
			}
		}
		dst[k] = v
	}
}

// coalesce fills user values with the chart's defaults: a null user value deletes the
// default (helm's way to unset a key), maps are filled in recursively.
func coalesce(user, defaults map[string]interface{}) map[string]interface{} {
	for k, dv := range defaults {
		uv, present := user[k]
		switch {
		case !present:
			user[k] = dv
		case uv == nil:
			delete(user, k)
		default:
			um, uok := uv.(map[string]interface{})
			dm, dok := dv.(map[string]interface{})
			if uok && dok {
				coalesce(um, dm)
			}
		}
	}
	return user
}

// applySet applies one --set argument: "a.b=1,c=x" (a backslash escapes "," "." "=").
func applySet(values map[string]interface{}, s setArg) error {
	for _, assignment := range splitUnescaped(s.expr, ',') {
		key, val, ok := cutUnescaped(assignment, '=')
		if !ok || key == "" {
			return fmt.Errorf("--set %q: expected KEY=VALUE", s.expr)
		}
		if strings.ContainsAny(key, "[]") {
			return fmt.Errorf("--set %q: list indexes are not supported", s.expr)
		}
		parts := splitUnescaped(key, '.')
		cur := values
		for _, p := range parts[:len(parts)-1] {
			next, ok := cur[unescape(p)].(map[string]interface{})
			if !ok {
				next = map[string]interface{}{}
				cur[unescape(p)] = next
			}
			cur = next
		}
		cur[unescape(parts[len(parts)-1])] = typedValue(unescape(val), s.asString)
	}
	return nil
}

// typedValue types a --set value as helm does: booleans, null and integers; the rest
// (floats included) stays a string.
func typedValue(v string, asString bool) interface{} {
	if asString {
		return v
	}
	switch strings.ToLower(v) {
	case "true":
		return true
	case "false":
		return false
	case "null":
		return nil
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil && (v == "0" || !strings.HasPrefix(v, "0")) {
		return n
	}
	return v
}

func splitUnescaped(s string, sep byte) []string {
	var out []string
	start := 0
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' {
			i++
		} else if s[i] == sep {
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return append(out, s[start:])
}

func cutUnescaped(s string, sep byte) (string, string, bool) {
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' {
			i++
		} else if s[i] == sep {
			return s[:i], s[i+1:], true
		}
	}
	return s, "", false
}

func unescape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			i++
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// files is .Files: the chart's files outside templates/ (helm's methods on them).
type files map[string][]byte

func (f files) Get(name string) string      { return string(f[name]) }
func (f files) GetBytes(name string) []byte { return f[name] }

func (f files) Lines(name string) []string {
	s := strings.TrimSuffix(string(f[name]), "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// Glob returns the files whose path matches pattern ("*" does not cross "/").
func (f files) Glob(pattern string) files {
	out := files{}
	for name, data := range f {
		if ok, _ := path.Match(pattern, name); ok {
			out[name] = data
		}
	}
	return out
}

// AsConfig is the files as ConfigMap data (base name: content), in YAML.
func (f files) AsConfig() string { return f.asYAML(func(b []byte) string { return string(b) }) }

// AsSecrets is the files as Secret data (base name: base64 content), in YAML.
func (f files) AsSecrets() string { return f.asYAML(base64.StdEncoding.EncodeToString) }

func (f files) asYAML(enc func([]byte) string) string {
	names := make([]string, 0, len(f))
	for n := range f {
		names = append(names, n)
	}
	sort.Strings(names)
	m := map[string]string{}
	for _, n := range names {
		m[path.Base(n)] = enc(f[n])
	}
	out, _ := yaml.Marshal(m)
	return strings.TrimSuffix(string(out), "\n")
}
