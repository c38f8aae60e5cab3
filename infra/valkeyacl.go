package main

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awselasticache"
	"github.com/aws/jsii-runtime-go"
)

// Each function signs in to the cache as its own ElastiCache user (IAM
// authentication, pkg/record/valkey/valkeyiam) whose access string admits
// the keys of its role and no other:
//
//   - the platform functions: conversations and their users' indexes
//     (conv:{…}, user:{…}, pkg/record/valkey), the agent-card and MCP tool
//     caches (capcache:{…}), api's A2A contexts (a2a:{…}, pkg/a2aserver);
//   - the demo specialists: their A2A tasks (a2atask:, pkg/a2astore) and
//     publication ledger (demoagents:) alone — no conversation key.
//
// The platform functions may also PUBLISH and SUBSCRIBE on channels named
// after the event logs' keys (&conv:*): a write that appends events wakes
// the streams waiting on its log (pkg/record/valkey, wake.go). -@dangerous keeps administrative commands (CONFIG, FLUSHALL, KEYS, …)
// from every role. TestValkeyACLs applies these strings on a real server.
const (
	platformKeys  = "~conv:* ~user:* ~capcache:* ~a2a:*"
	platformACL   = "on " + platformKeys + " &conv:* +@all -@dangerous"
	demoAgentsACL = "on ~a2atask:* ~demoagents:* +@all -@dangerous"
)

// ValkeyACL returns the access string of a function's user.
func ValkeyACL(fn string) string {
	switch fn {
	case FnDemoAgents:
		return demoAgentsACL
	}
	return platformACL
}

// valkeyUserID is a function's ElastiCache user id, which IAM
// authentication wants equal to the user's name: lowercase letters, digits
// and '-'.
func valkeyUserID(prefix, fn string) string { return prefix + "-" + fn }

// valkeyFunctions are the functions with a user of their own: the
// platform's, and the demo specialists' when deployed.
func valkeyFunctions(p StackProps) []string {
	names := functionNames()
	if p.DemoAgents {
		names = append(names, FnDemoAgents)
	}
	return names
}

// addValkeyUsers defines a user per function (valkeyFunctions) and the
// user group of the cache. A Valkey user group holds only users that
// authenticate, so it has no passwordless default user.
func (d *dataStack) addValkeyUsers(p StackProps, prefix string) awselasticache.CfnUserGroup {
	var ids []*string
	d.valkeyUsers = map[string]*string{}
	for _, fn := range valkeyFunctions(p) {
		id := valkeyUserID(prefix, fn)
		u := awselasticache.NewCfnUser(d.stack, jsii.String("ValkeyUser"+functionID(fn)), &awselasticache.CfnUserProps{
			Engine:             jsii.String("valkey"),
			UserId:             jsii.String(id),
			UserName:           jsii.String(id),
			AccessString:       jsii.String(ValkeyACL(fn)),
			AuthenticationMode: map[string]any{"Type": "iam"},
		})
		ids = append(ids, u.Ref())
		d.valkeyUsers[fn] = jsii.String(id)
	}
	return awselasticache.NewCfnUserGroup(d.stack, jsii.String("ValkeyUsers"), &awselasticache.CfnUserGroupProps{
		Engine:      jsii.String("valkey"),
		UserGroupId: jsii.String(prefix + "-users"),
		UserIds:     &ids,
	})
}

// valkeyConnectARNs are what elasticache:Connect names for fn: the cache
// and the function's own user.
func (d *dataStack) valkeyConnectARNs(fn string) []*string {
	base := "arn:" + *awscdk.Aws_PARTITION() + ":elasticache:" + *awscdk.Aws_REGION() + ":" + *awscdk.Aws_ACCOUNT_ID() + ":"
	return []*string{
		awscdk.Fn_Join(jsii.String(""), &[]*string{jsii.String(base + "serverlesscache:"), d.cache.Ref()}),
		jsii.String(base + "user:" + *d.valkeyUsers[fn]),
	}
}
