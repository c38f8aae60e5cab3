package main

import (
	"os"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"
)

func TestNagExplore(t *testing.T) {
	for _, cfg := range []string{"bedrock", "dev", "prod"} {
		outdir, _ := os.MkdirTemp("", "nag-")
		app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(outdir)})
		p := configs[cfg]()
		dep := NewDeployment(app, &p)
		awscdk.Aspects_Of(app).Add(cdknag.NewAwsSolutionsChecks(&cdknag.NagPackProps{Verbose: jsii.Bool(false)}), nil)
		for _, st := range []awscdk.Stack{dep.Data, dep.App} {
			a := assertions.Annotations_FromStack(st)
			for _, m := range *a.FindError(jsii.String("*"), assertions.Match_StringLikeRegexp(jsii.String("AwsSolutions-.*"))) {
				t.Logf("%s ERROR %s %v", cfg, *m.Id, m.Entry.Data)
			}
			for _, m := range *a.FindWarning(jsii.String("*"), assertions.Match_StringLikeRegexp(jsii.String("AwsSolutions-.*"))) {
				t.Logf("%s WARN %s %v", cfg, *m.Id, m.Entry.Data)
			}
		}
	}
}
