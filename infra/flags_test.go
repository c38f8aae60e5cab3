package main

import (
	"archive/tar"
	"compress/gzip"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// flagOverrides are the recommended feature flags cdk.json sets otherwise,
// each with its reason (infra/README.md, "Feature flags").
var flagOverrides = map[string]any{
	// It adds a custom resource (a Lambda with its own role) to strip the
	// VPC's default security group; nothing uses that group (every function
	// has its own), and the templates hold no custom resources.
	"@aws-cdk/aws-ec2:restrictDefaultSecurityGroup": false,
}

// cdk.json sets every feature flag that `cdk init` writes for the CDK
// version of go.mod (aws-cdk-lib's recommended-feature-flags.json), at its
// recommended value but for flagOverrides.
func TestCDKJSONFeatureFlags(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/aws/aws-cdk-go/awscdk/v2").Output()
	if err != nil {
		t.Fatalf("go list the CDK module: %v", err)
	}
	tgzs, _ := filepath.Glob(filepath.Join(strings.TrimSpace(string(out)), "jsii", "aws-cdk-lib-*.tgz"))
	if len(tgzs) != 1 {
		t.Fatalf("aws-cdk-lib tarballs %v, want one", tgzs)
	}
	f, err := os.Open(tgzs[0])
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	var want map[string]any
	for {
		h, err := tr.Next()
		if err != nil {
			t.Fatalf("no recommended-feature-flags.json in %s: %v", tgzs[0], err)
		}
		if h.Name == "package/recommended-feature-flags.json" {
			b, err := io.ReadAll(tr)
			if err == nil {
				err = json.Unmarshal(b, &want)
			}
			if err != nil {
				t.Fatal(err)
			}
			break
		}
	}
	for k, v := range flagOverrides {
		if _, ok := want[k]; !ok {
			t.Errorf("override %s is no recommended flag any more: drop it", k)
		}
		want[k] = v
	}
	got := map[string]any{}
	ctx, err := ReadCDKJSONContext(filepath.Join("..", "cdk.json"))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range ctx {
		if strings.HasPrefix(k, "@") {
			got[k] = v
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("cdk.json feature flags (-recommended +cdk.json):\n%s", diff)
	}
}
