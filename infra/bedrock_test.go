package main

import (
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/jsii-runtime-go"
	"github.com/google/go-cmp/cmp"
)

// llmstep may call the configured models and no other: a model id in the
// stack's region (or bedrockRegions), an inference profile on the profile
// and, through it alone, its foundation model.
func TestBedrockModelGrants(t *testing.T) {
	t.Parallel()
	const (
		profile = "arn:${AWS::Partition}:bedrock:${AWS::Region}:${AWS::AccountId}:inference-profile/"
	)
	through := func(p string) any {
		return map[string]any{"StringEquals": map[string]any{"bedrock:InferenceProfileArn": map[string]any{"Fn::Sub": profile + p}}}
	}
	type grant struct {
		Resources []string
		Condition any
	}
	tests := []struct {
		name string
		p    StackProps
		want map[string]grant
	}{
		{"model ids in the stack's region", StackProps{Model: "amazon.nova-pro-v1:0", ModelSmall: "amazon.nova-lite-v1:0"}, map[string]grant{
			"BedrockConverse": {Resources: []string{"arn:${AWS::Partition}:bedrock:${AWS::Region}::foundation-model/amazon.nova-pro-v1:0",
				"arn:${AWS::Partition}:bedrock:${AWS::Region}::foundation-model/amazon.nova-lite-v1:0"}},
		}},
		{"a model id in named regions", StackProps{Model: "amazon.nova-pro-v1:0", BedrockRegions: []string{"eu-west-1", "eu-central-1"}}, map[string]grant{
			"BedrockConverse": {Resources: []string{"arn:${AWS::Partition}:bedrock:eu-west-1::foundation-model/amazon.nova-pro-v1:0",
				"arn:${AWS::Partition}:bedrock:eu-central-1::foundation-model/amazon.nova-pro-v1:0"}},
		}},
		{"an inference profile", StackProps{Model: "us.amazon.nova-pro-v1:0"}, map[string]grant{
			"BedrockProfileusamazonnovaprov10": {Resources: []string{profile + "us.amazon.nova-pro-v1:0"}},
			"BedrockProfileModelusamazonnovaprov10": {Resources: []string{"arn:${AWS::Partition}:bedrock:*::foundation-model/amazon.nova-pro-v1:0"},
				Condition: through("us.amazon.nova-pro-v1:0")},
		}},
		{"a global profile", StackProps{Model: "global.anthropic.claude-sonnet-4-5-20250929-v1:0"}, map[string]grant{
			"BedrockProfileglobalanthropicclaudesonnet4520250929v10": {Resources: []string{profile + "global.anthropic.claude-sonnet-4-5-20250929-v1:0"}},
			"BedrockProfileModelglobalanthropicclaudesonnet4520250929v10": {Resources: []string{
				"arn:${AWS::Partition}:bedrock:*::foundation-model/anthropic.claude-sonnet-4-5-20250929-v1:0",
				"arn:${AWS::Partition}:bedrock:::foundation-model/anthropic.claude-sonnet-4-5-20250929-v1:0"},
				Condition: through("global.anthropic.claude-sonnet-4-5-20250929-v1:0")},
		}},
	}
	for _, tt := range tests {
		synthMu.Lock()
		stack := awscdk.NewStack(awscdk.NewApp(nil), jsii.String("T"), nil)
		fn := awslambda.NewFunction(stack, jsii.String("Fn"), &awslambda.FunctionProps{
			Runtime: awslambda.Runtime_NODEJS_20_X(), Handler: jsii.String("index.handler"),
			Code: awslambda.Code_FromInline(jsii.String("x")),
		})
		allowBedrockModels(fn, tt.p)
		tpl := *assertions.Template_FromStack(stack, nil).ToJSON()
		synthMu.Unlock()
		got := map[string]grant{}
		for _, r := range asMap(tpl["Resources"]) {
			r := asMap(r)
			if r["Type"] != "AWS::IAM::Policy" {
				continue
			}
			for _, st := range asList(asMap(asMap(r["Properties"])["PolicyDocument"])["Statement"]) {
				st := asMap(st)
				sid, _ := st["Sid"].(string)
				if sid == "" {
					continue
				}
				if diff := cmp.Diff(BedrockActions, actionsOf(st)); diff != "" {
					t.Errorf("%s: %s actions (-want +got):\n%s", tt.name, sid, diff)
				}
				var g grant
				for _, res := range asList(st["Resource"]) {
					// Tokens in a Go string: an Fn::Join, compared in its ${…} form.
					if sub, ok := asMap(normalizeJoins(res))["Fn::Sub"].(string); ok {
						g.Resources = append(g.Resources, sub)
					}
				}
				if c, ok := st["Condition"]; ok {
					g.Condition = normalizeJoins(c)
				}
				got[sid] = g
			}
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("%s: statements (-want +got):\n%s", tt.name, diff)
		}
	}
}

// normalizeJoins turns each Fn::Join of strings and Refs in v into the
// Fn::Sub form of the same string, for comparison.
func normalizeJoins(v any) any {
	switch x := v.(type) {
	case map[string]any:
		if j, ok := x["Fn::Join"]; ok && len(x) == 1 {
			var out string
			for _, part := range asList(asList(j)[1]) {
				if s, ok := part.(string); ok {
					out += s
				} else if ref, ok := asMap(part)["Ref"].(string); ok {
					out += "${" + ref + "}"
				}
			}
			return map[string]any{"Fn::Sub": out}
		}
		out := map[string]any{}
		for k, e := range x {
			out[k] = normalizeJoins(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = normalizeJoins(e)
		}
		return out
	}
	return v
}
