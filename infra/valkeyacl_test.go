package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// The cache admits only the functions' users (RBAC), each signing in with
// IAM, each function with its own user's id and elasticache:Connect on
// the cache and that user alone.
func TestValkeyUsers(t *testing.T) {
	t.Parallel()
	for _, config := range []string{"bedrock", "prod"} {
		s := synth(t, config)
		cacheID, cache := s.one(t, "AWS::ElastiCache::ServerlessCache")
		groupID, group := s.one(t, "AWS::ElastiCache::UserGroup")
		if diff := cmp.Diff(map[string]any{"Ref": groupID}, cache["UserGroupId"]); diff != "" {
			t.Errorf("%s: cache UserGroupId (-want +got):\n%s", config, diff)
		}
		users := s.resources("AWS::ElastiCache::User")
		byID := map[string]map[string]any{}
		for id, u := range users {
			if u["UserId"] != u["UserName"] || u["Engine"] != "valkey" || mustJSON(u["AuthenticationMode"]) != `{"Type":"iam"}` {
				t.Errorf("%s: user %s = %s, want valkey, IAM auth, id = name", config, id, mustJSON(u))
			}
			byID[u["UserId"].(string)] = u
		}
		var inGroup []string
		for _, ref := range refsIn(group["UserIds"]) {
			inGroup = append(inGroup, users[ref]["UserId"].(string))
		}
		names := valkeyFunctions(s.props)
		var want []string
		for _, name := range names {
			want = append(want, "clientagent-"+s.props.EnvName+"-"+name)
		}
		slices.Sort(inGroup)
		slices.Sort(want)
		if diff := cmp.Diff(want, inGroup); diff != "" {
			t.Errorf("%s: user group members (-want +got):\n%s", config, diff)
		}
		for _, name := range names {
			_, fn := s.function(t, name)
			env := envOf(fn)
			user := "clientagent-" + s.props.EnvName + "-" + name
			if env["VALKEY_AUTH"] != "iam" || env["VALKEY_USER"] != user || byID[user]["AccessString"] != ValkeyACL(name) {
				t.Errorf("%s: %s VALKEY_AUTH=%v VALKEY_USER=%v, access %v; want iam as %s with %q", config, name, env["VALKEY_AUTH"], env["VALKEY_USER"],
					byID[user]["AccessString"], user, ValkeyACL(name))
			}
			// A serverless cache's Ref is its name.
			if diff := cmp.Diff(map[string]any{"Ref": cacheID}, env["VALKEY_CACHE_NAME"]); diff != "" {
				t.Errorf("%s: %s VALKEY_CACHE_NAME (-the cache's name +got):\n%s", config, name, diff)
			}
			grants := allowed(s.roleStatements(t, fn, "Role"), "elasticache:Connect")
			if len(grants) != 2 || !strings.Contains(grants[0]+grants[1], ":serverlesscache:") || !strings.Contains(grants[0]+grants[1], ":user:"+user+`"`) {
				t.Errorf("%s: %s may elasticache:Connect on %v, want the cache and user %s", config, name, grants, user)
			}
		}
		if s.props.DemoAgents == (byID["clientagent-"+s.props.EnvName+"-"+FnDemoAgents] == nil) {
			t.Errorf("%s: a demoagents user exists = %v, want %v", config, !s.props.DemoAgents, s.props.DemoAgents)
		}
	}
}

// The access strings do what valkeyacl.go says, on a real server (ACL
// DRYRUN): each role reaches its keys, the demo specialists no
// conversation, the events function nothing it could change, and no role
// the administrative commands.
func TestValkeyACLs(t *testing.T) {
	t.Parallel()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatalf("the ACL test needs redis-server on PATH: %v", err)
	}
	port := 6300 + os.Getpid()%600
	dir := t.TempDir()
	srv := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir)
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Process.Kill(); _ = srv.Wait() })
	cli := func(args ...string) string {
		out, _ := exec.Command(filepath.Join(filepath.Dir(bin), "redis-cli"), append([]string{"-p", strconv.Itoa(port)}, args...)...).CombinedOutput()
		return strings.TrimSpace(string(out))
	}
	for deadline := time.Now().Add(20 * time.Second); cli("PING") != "PONG"; {
		if time.Now().After(deadline) {
			t.Fatalf("redis-server on %d did not answer", port)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, fn := range []string{FnAPI, FnDemoAgents} {
		if got := cli(append([]string{"ACL", "SETUSER", fn, "nopass"}, strings.Fields(ValkeyACL(fn))...)...); got != "OK" {
			t.Fatalf("ACL SETUSER %s %s: %s", fn, ValkeyACL(fn), got)
		}
	}
	tests := []struct {
		user string
		cmd  []string
		ok   bool
	}{
		{FnAPI, []string{"HSET", "conv:{c1}", "meta", "x"}, true},
		{FnAPI, []string{"ZADD", "user:{u}:convs", "1", "c1"}, true},
		{FnAPI, []string{"SET", "capcache:{agents}:card:x", "1"}, true},
		{FnAPI, []string{"SET", "a2a:{abc}:ctx", "1"}, true},
		{FnAPI, []string{"EVALSHA", "0000000000000000000000000000000000000000", "1", "conv:{c1}"}, true},
		{FnAPI, []string{"GET", "a2atask:t1"}, false},
		{FnAPI, []string{"GET", "demoagents:publications"}, false},
		{FnAPI, []string{"FLUSHALL"}, false},
		{FnAPI, []string{"KEYS", "*"}, false},
		{FnAPI, []string{"CONFIG", "GET", "maxmemory"}, false},
		{FnAPI, []string{"PUBLISH", "conv:{c1}:events", ""}, true},
		{FnAPI, []string{"SUBSCRIBE", "conv:{c1}:events"}, true},
		{FnAPI, []string{"PUBLISH", "other", ""}, false},
		{FnDemoAgents, []string{"SET", "a2atask:t1", "x"}, true},
		{FnDemoAgents, []string{"PUBLISH", "conv:{c1}:events", ""}, false},
		{FnDemoAgents, []string{"HSETNX", "demoagents:publications", "publication:1", "x"}, true},
		{FnDemoAgents, []string{"HGETALL", "conv:{c1}"}, false},
		{FnDemoAgents, []string{"ZRANGE", "user:{u}:convs", "0", "-1"}, false},
		{FnDemoAgents, []string{"EVAL", "return 1", "1", "conv:{c1}"}, false},
	}
	for _, tt := range tests {
		got := cli(append([]string{"ACL", "DRYRUN", tt.user}, tt.cmd...)...)
		if (got == "OK") != tt.ok {
			t.Errorf("%s may %s: %q, want allowed = %v", tt.user, strings.Join(tt.cmd, " "), got, tt.ok)
		}
	}
	if t.Failed() {
		fmt.Println(cli("ACL", "LIST"))
	}
}
