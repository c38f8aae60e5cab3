package main

import (
	"regexp"
	"slices"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/jsii-runtime-go"
)

// BedrockActions are what llmstep calls on a model (Converse and
// ConverseStream authorize as these two).
var BedrockActions = []string{"bedrock:InvokeModel", "bedrock:InvokeModelWithResponseStream"}

// bedrockModelRE is a Bedrock model id (amazon.nova-pro-v1:0), or an
// inference profile's (a geography before it: us.amazon.nova-pro-v1:0,
// global.…): the stack builds the ARNs it grants, so an ARN is refused.
var bedrockModelRE = regexp.MustCompile(`^(?:(us|eu|apac|us-gov|global|jp|au|ca)\.)?([a-z0-9-]+\.[A-Za-z0-9.:_-]+)$`)

// bedrockModels returns the distinct model ids of the configuration
// (model, modelSmall, modelLarge), in that order.
func bedrockModels(p StackProps) []string {
	var out []string
	for _, m := range []string{p.Model, p.ModelSmall, p.ModelLarge} {
		if m != "" && !slices.Contains(out, m) {
			out = append(out, m)
		}
	}
	return out
}

// allowBedrockModels lets fn call exactly the configured models. A
// foundation model id is granted in the stack's region, or in
// bedrockRegions. An inference profile id is granted on the profile, and
// on its foundation model only when the request comes through that profile
// (bedrock:InferenceProfileArn): in any region, the profile's routing being
// AWS's to change, unless bedrockRegions names them.
func allowBedrockModels(fn awslambda.Function, p StackProps) {
	partition, region, account := *awscdk.Aws_PARTITION(), *awscdk.Aws_REGION(), *awscdk.Aws_ACCOUNT_ID()
	modelARNs := func(regions []string, base string) *[]*string {
		var out []*string
		for _, r := range regions {
			out = append(out, jsii.String("arn:"+partition+":bedrock:"+r+"::foundation-model/"+base))
		}
		return &out
	}
	var direct []*string
	for _, model := range bedrockModels(p) {
		m := bedrockModelRE.FindStringSubmatch(model)
		geo, base := m[1], m[2]
		if geo == "" {
			regions := p.BedrockRegions
			if len(regions) == 0 {
				regions = []string{region}
			}
			direct = append(direct, *modelARNs(regions, base)...)
			continue
		}
		profile := "arn:" + partition + ":bedrock:" + region + ":" + account + ":inference-profile/" + model
		fn.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Sid: jsii.String("BedrockProfile" + sidPart(model)), Actions: jsii.Strings(BedrockActions...), Resources: jsii.Strings(profile),
		}))
		regions := p.BedrockRegions
		if len(regions) == 0 {
			regions = []string{"*"}
			if geo == "global" {
				// A global profile's foundation model ARN has no region.
				regions = append(regions, "")
			}
		}
		fn.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Sid: jsii.String("BedrockProfileModel" + sidPart(model)), Actions: jsii.Strings(BedrockActions...), Resources: modelARNs(regions, base),
			Conditions: &map[string]any{"StringEquals": map[string]any{"bedrock:InferenceProfileArn": profile}},
		}))
	}
	if len(direct) > 0 {
		fn.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Sid: jsii.String("BedrockConverse"), Actions: jsii.Strings(BedrockActions...), Resources: &direct,
		}))
	}
}

// sidPart is s with only the letters and digits a statement id may hold.
func sidPart(s string) string { return nonSidRE.ReplaceAllString(s, "") }

var nonSidRE = regexp.MustCompile(`[^A-Za-z0-9]`)
