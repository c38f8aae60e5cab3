package main

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Issue 14: two stacks per environment. The app stack retains nothing and
// names nothing that outlives it, so `make destroy` (the app stack alone)
// always succeeds and a deploy after it creates it again; what holds state,
// with the network the cache sits in, is the data stack's.

// statefulTypes are the resource types that hold state or that the cache
// occupies: all of them belong in the data stack.
var statefulTypes = []string{
	"AWS::EC2::VPC", "AWS::EC2::Subnet", "AWS::EC2::SecurityGroup",
	"AWS::ElastiCache::ServerlessCache", "AWS::S3::Bucket", "AWS::Cognito::UserPool",
	"AWS::SecretsManager::Secret",
}

// typesIn returns the sorted resource types of a template.
func typesIn(tpl map[string]any) []string {
	var out []string
	for _, r := range asMap(tpl["Resources"]) {
		out = append(out, asMap(r)["Type"].(string))
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// retained returns the logical ids of a template's resources whose
// DeletionPolicy or UpdateReplacePolicy keeps them.
func retained(tpl map[string]any) []string {
	var out []string
	for id, r := range asMap(tpl["Resources"]) {
		rm := asMap(r)
		if rm["DeletionPolicy"] == "Retain" || rm["DeletionPolicy"] == "RetainExceptOnCreate" || rm["UpdateReplacePolicy"] == "Retain" {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// fixedNames returns "<id>.<property> = <value>" for every name property
// (…Name, or Name) of the given resources whose value does not depend on the
// stack's id: a name a deleted stack's retained resource would still hold
// when the stack is created again.
func fixedNames(tpl map[string]any, ids []string) []string {
	var out []string
	resources := asMap(tpl["Resources"])
	for _, id := range ids {
		for key, v := range asMap(asMap(resources[id])["Properties"]) {
			if !strings.HasSuffix(key, "Name") {
				continue
			}
			if !strings.Contains(mustJSON(v), `{"Ref":"AWS::StackId"}`) {
				out = append(out, fmt.Sprintf("%s.%s = %s", id, key, mustJSON(v)))
			}
		}
	}
	slices.Sort(out)
	return out
}

func TestAppStackRetainsNothing(t *testing.T) {
	t.Parallel()
	for _, config := range slices.Sorted(maps.Keys(configs)) {
		s := synth(t, config)
		if got := retained(s.app); len(got) > 0 {
			t.Errorf("%s: the app stack retains %v, want nothing (its deletion must leave nothing that a redeploy meets)", config, got)
		}
		for _, typ := range typesIn(s.app) {
			if slices.Contains(statefulTypes, typ) {
				t.Errorf("%s: the app stack holds a %s, want it in the data stack", config, typ)
			}
		}
		// Its only log group is the demo specialists' (the platform's are data).
		var logs []string
		for id := range resourcesIn(s.app, "AWS::Logs::LogGroup") {
			logs = append(logs, id)
		}
		wantLogs := 0
		if s.props.DemoAgents {
			wantLogs = 1
		}
		if len(logs) != wantLogs || (wantLogs == 1 && !strings.HasPrefix(logs[0], "FnDemoagentsLogs")) {
			t.Errorf("%s: app stack log groups %v, want only the demo specialists' (demo: %v)", config, logs, s.props.DemoAgents)
		}
	}
}

func TestDataStackHoldsTheState(t *testing.T) {
	t.Parallel()
	for _, config := range slices.Sorted(maps.Keys(configs)) {
		s := synth(t, config)
		types := typesIn(s.data)
		for _, typ := range []string{"AWS::EC2::VPC", "AWS::ElastiCache::ServerlessCache", "AWS::S3::Bucket", "AWS::Logs::LogGroup"} {
			if !slices.Contains(types, typ) {
				t.Errorf("%s: the data stack has no %s", config, typ)
			}
		}
		if got, want := slices.Contains(types, "AWS::Cognito::UserPool"), s.props.JWTIssuer == ""; got != want {
			t.Errorf("%s: user pool in the data stack: %v, want %v", config, got, want)
		}
		// The cache sits in the data stack's own subnets and security
		// group: deleting the app stack never touches them.
		for id, cache := range resourcesIn(s.data, "AWS::ElastiCache::ServerlessCache") {
			for _, ref := range refsIn([]any{cache["SubnetIds"], cache["SecurityGroupIds"]}) {
				if _, ok := asMap(s.data["Resources"])[ref]; !ok {
					t.Errorf("%s: cache %s uses %s, which is not in the data stack", config, id, ref)
				}
			}
		}
		// The data stack references nothing of the app stack (no cycle, and
		// the app stack can go without it).
		if strings.Contains(mustJSON(s.data), "Fn::ImportValue") {
			t.Errorf("%s: the data stack imports a value", config)
		}
		// Termination protection and retention go with retainData.
		if s.dataProtected != s.props.RetainData {
			t.Errorf("%s: data stack termination protection %v, want %v (retainData)", config, s.dataProtected, s.props.RetainData)
		}
		ret := retained(s.data)
		if s.props.RetainData && len(ret) == 0 {
			t.Errorf("%s: retainData but the data stack retains nothing", config)
		}
		if !s.props.RetainData && len(ret) > 0 {
			t.Errorf("%s: without retainData the data stack retains %v", config, ret)
		}
	}
}

// What a data stack retains outlives it under a name that holds the
// stack's id, so a data stack created again never collides with it (a log
// group, a cache, a secret name is unique; a secret's name stays taken for
// its recovery window even when it is deleted).
func TestRetainedResourcesHaveNoFixedNames(t *testing.T) {
	t.Parallel()
	s := synth(t, "prod")
	ret := retained(s.data)
	var types []string
	for _, id := range ret {
		types = append(types, asMap(asMap(s.data["Resources"])[id])["Type"].(string))
	}
	slices.Sort(types)
	types = slices.Compact(types)
	want := []string{"AWS::Cognito::UserPool", "AWS::ElastiCache::ServerlessCache", "AWS::Logs::LogGroup", "AWS::S3::Bucket", "AWS::SecretsManager::Secret"}
	if diff := cmp.Diff(want, types); diff != "" {
		t.Errorf("prod retains (-want +got):\n%s", diff)
	}
	if got := fixedNames(s.data, ret); len(got) > 0 {
		t.Errorf("retained resources with fixed names: %v", got)
	}
	// The cache's name fits ElastiCache's 40 characters for any env name.
	if got := cacheNameBase("clientagent-" + strings.Repeat("e", 20)); len(got)+len("-12345678") > 40 || strings.HasSuffix(got, "-") {
		t.Errorf("cacheNameBase() = %q, want at most 31 characters without a trailing -", got)
	}
	if got := cacheNameBase("clientagent-abcdefghijklmnopqrs-"); strings.HasSuffix(got, "-") {
		t.Errorf("cacheNameBase() = %q, want no trailing -", got)
	}

	// The check sees a fixed name and accepts one with the stack's id.
	tpl := map[string]any{"Resources": map[string]any{
		"A": map[string]any{"Type": "AWS::Logs::LogGroup", "Properties": map[string]any{"LogGroupName": "/aws/lambda/x", "RetentionInDays": 7}},
		"B": map[string]any{"Type": "AWS::Logs::LogGroup", "Properties": map[string]any{"LogGroupName": map[string]any{"Fn::Join": []any{"", []any{"x-", map[string]any{"Ref": "AWS::StackId"}}}}}},
	}}
	if diff := cmp.Diff([]string{`A.LogGroupName = "/aws/lambda/x"`}, fixedNames(tpl, []string{"A", "B"})); diff != "" {
		t.Errorf("fixedNames() (-want +got):\n%s", diff)
	}
}

// The functions and the state machine log to the data stack's groups, each
// its own.
func TestLogsLiveInTheDataStack(t *testing.T) {
	t.Parallel()
	s := synth(t, "dev")
	dataLogs := resourcesIn(s.data, "AWS::Logs::LogGroup")
	seen := map[string]string{}
	for _, name := range functionNames() {
		_, fn := s.function(t, name)
		group := refsIn(asMap(fn["LoggingConfig"])["LogGroup"])
		if len(group) != 1 {
			t.Errorf("%s LoggingConfig.LogGroup = %s, want a log group", name, mustJSON(asMap(fn["LoggingConfig"])["LogGroup"]))
			continue
		}
		if _, ok := dataLogs[group[0]]; !ok {
			t.Errorf("%s logs to %s, want a log group of the data stack", name, group[0])
		}
		if other, ok := seen[group[0]]; ok {
			t.Errorf("%s and %s share the log group %s", name, other, group[0])
		}
		seen[group[0]] = name
	}
	_, sm := s.turnMachine(t)
	for _, ref := range refsIn(asMap(sm["LoggingConfiguration"])["Destinations"]) {
		if _, ok := dataLogs[ref]; !ok {
			t.Errorf("the state machine logs to %s, want a log group of the data stack", ref)
		}
	}
}

// resourcesIn returns the logical ids and properties of a type in one template.
func resourcesIn(tpl map[string]any, typ string) map[string]map[string]any {
	out := map[string]map[string]any{}
	for id, r := range asMap(tpl["Resources"]) {
		if rm := asMap(r); rm["Type"] == typ {
			out[id] = asMap(rm["Properties"])
		}
	}
	return out
}

// The VPC logs the traffic its security groups reject, to a log group of
// the data stack with the environment's retention.
func TestVPCFlowLogRejected(t *testing.T) {
	t.Parallel()
	s := synth(t, "prod")
	_, flow := s.one(t, "AWS::EC2::FlowLog")
	vpcID, _ := s.one(t, "AWS::EC2::VPC")
	groupID, group := s.named(t, "AWS::Logs::LogGroup", "VpcFlowLogs")
	if flow["TrafficType"] != "REJECT" || flow["LogDestinationType"] != "cloud-watch-logs" ||
		mustJSON(flow["ResourceId"]) != mustJSON(map[string]any{"Ref": vpcID}) || mustJSON(flow["LogGroupName"]) != mustJSON(map[string]any{"Ref": groupID}) {
		t.Errorf("flow log = %s, want the VPC's rejected traffic to %s", mustJSON(flow), groupID)
	}
	if group["RetentionInDays"] != float64(s.props.LogRetentionDays) {
		t.Errorf("flow log group retention = %v, want %d", group["RetentionInDays"], s.props.LogRetentionDays)
	}
	if _, ok := asMap(s.data["Resources"])[groupID]; !ok {
		t.Errorf("flow log group %s is not in the data stack", groupID)
	}
}
