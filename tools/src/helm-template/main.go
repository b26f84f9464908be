// helm-template renders a Helm chart directory offline, the way `helm template` does, for the
// chart tests of this repository (no helm binary is packaged by Debian 12).
//
// It builds from Debian packages only (golang-go, golang-github-masterminds-sprig-dev,
// golang-k8s-sigs-yaml-dev); tools/setup compiles it. See tools/README.md for what it does
// and does not do compared with helm.
package main

import (
	"fmt"
	"os"
	"regexp"
	"strings"
)

const usage = `usage: helm-template [flags] [RELEASE] CHART_DIR
  -f, --values FILE        values file (repeatable; later files win)
      --set K=V[,K=V]      set values (true/false/null/integers are typed; null deletes a key)
      --set-string K=V     set values as strings
  -a, --api-versions G/V   API version the cluster serves, for .Capabilities.APIVersions.Has
      --name NAME          release name (default "release-name")
  -n, --namespace NS       release namespace (default "default")
      --kube-version V     .Capabilities.KubeVersion (default v1.30.0)
      --strict             fail on a missing value key, like helm lint --strict
      --notes              print the rendered NOTES.txt to stderr, after a "NOTES:" line
`

type options struct {
	release, namespace, kubeVersion string
	strict, notes                   bool
	valueFiles, apiVersions         []string
	sets                            []setArg
	chartDir                        string
}

type setArg struct {
	expr     string
	asString bool
}

func parseArgs(args []string) (options, error) {
	o := options{release: "release-name", namespace: "default", kubeVersion: "v1.30.0"}
	var positional []string
	for i := 0; i < len(args); i++ {
		arg := args[i]
		if !strings.HasPrefix(arg, "-") || arg == "-" {
			positional = append(positional, arg)
			continue
		}
		name, value, inline := strings.Cut(arg, "=")
		// value returns the flag's argument: after "=" or the next word.
		value1 := func() (string, error) {
			if inline {
				return value, nil
			}
			if i+1 >= len(args) {
				return "", fmt.Errorf("flag %s needs a value", name)
			}
			i++
			return args[i], nil
		}
		var err error
		var v string
		switch name {
		case "--strict", "--notes":
			if inline {
				return o, fmt.Errorf("flag %s takes no value", name)
			}
			if name == "--strict" {
				o.strict = true
			} else {
				o.notes = true
			}
		case "-f", "--values":
			if v, err = value1(); err == nil {
				o.valueFiles = append(o.valueFiles, v)
			}
		case "--set", "--set-string":
			if v, err = value1(); err == nil {
				o.sets = append(o.sets, setArg{v, name == "--set-string"})
			}
		case "-a", "--api-versions":
			if v, err = value1(); err == nil {
				o.apiVersions = append(o.apiVersions, strings.Split(v, ",")...)
			}
		case "--name":
			o.release, err = value1()
		case "-n", "--namespace":
			o.namespace, err = value1()
		case "--kube-version":
			o.kubeVersion, err = value1()
		case "-h", "--help":
			fmt.Print(usage)
			os.Exit(0)
		default:
			return o, fmt.Errorf("unknown flag %s", name)
		}
		if err != nil {
			return o, err
		}
	}
	switch len(positional) {
	case 1:
		o.chartDir = positional[0]
	case 2: // helm template NAME CHART
		o.release, o.chartDir = positional[0], positional[1]
	default:
		return o, fmt.Errorf("expected [RELEASE] CHART_DIR, got %d arguments", len(positional))
	}
	return o, nil
}

func main() {
	o, err := parseArgs(os.Args[1:])
	if err != nil {
		fmt.Fprintf(os.Stderr, "helm-template: %v\n%s", err, usage)
		os.Exit(2)
	}
	manifests, notes, err := render(o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "Error:", helmError(err))
		os.Exit(1)
	}
	os.Stdout.WriteString(manifests)
	if o.notes && notes != "" {
		fmt.Fprintf(os.Stderr, "NOTES:\n%s\n", notes)
	}
}

var outerLocation = regexp.MustCompile(`^template: ([^:]+:\d+:\d+): `)

// helmError shortens the error of a template's fail or required call as helm does: "execution
// error at (outermost template:line:col): message", instead of the whole chain of includes.
func helmError(err error) string {
	s := err.Error()
	for _, call := range []string{"error calling fail: ", "error calling required: "} {
		if i := strings.LastIndex(s, call); i >= 0 {
			at := ""
			if m := outerLocation.FindStringSubmatch(s); m != nil {
				at = " at (" + m[1] + ")"
			}
			return "execution error" + at + ": " + s[i+len(call):]
		}
	}
	return s
}
