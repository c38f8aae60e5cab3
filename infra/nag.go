package main

import (
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"
)

// The stacks pass cdk-nag's AwsSolutions pack (TestCDKNag, `make
// test-infra`). What it flags and the stacks keep is suppressed here, on
// the construct it concerns, with the reason: each call names one rule.

// suppress records that c (and its children) keep what rule flags, and why.
func suppress(c constructs.IConstruct, rule, reason string, appliesTo ...string) {
	s := &cdknag.NagPackSuppression{Id: jsii.String(rule), Reason: jsii.String(reason)}
	if len(appliesTo) > 0 {
		var at []any
		for _, re := range appliesTo {
			at = append(at, &cdknag.RegexAppliesTo{Regex: jsii.String(re)})
		}
		s.AppliesTo = &at
	}
	cdknag.NagSuppressions_AddResourceSuppressions(c, &[]*cdknag.NagPackSuppression{s}, jsii.Bool(true))
}

// functionRoleWildcards are the wildcard resources a function's role
// holds, each where IAM offers nothing narrower (iam_test.go names every
// action on "*"): the VPC's network interfaces, X-Ray, task tokens; the
// objects of a bucket (keys are per conversation, made at run time).
var functionRoleWildcards = []string{
	`/^Resource::\*$/`,
	`/^Resource::<(Artifacts|Audit)[0-9A-F]{8}\.Arn>\/\*$/`,
	// The same ARNs as the app stack reads them from the data stack.
	`/^Resource::\{"Fn::GetStackOutput":\{.*"OutputName":"PublishOutputFnGetAtt(Artifacts|Audit)[0-9A-F]{8}Arn[0-9A-F]{8}"\}\}\/\*$/`,
}

const functionRoleWildcardReason = "Resource * only for actions without a resource type (ec2 network interfaces for the VPC, " +
	"xray:PutTraceSegments, states:SendTaskSuccess: a task token is no resource); bucket/* because object keys are made per conversation at run time"
