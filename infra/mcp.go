package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/jsii-runtime-go"
)

// CtxMCPServers is the context key of the environment's MCP servers.
const CtxMCPServers = "mcpServers"

// MCPFunctions are the functions that reach MCP servers: the ones that
// build the tool catalogue (api, llmstep, validate, append list the
// servers' tools) and invoke, which calls them — the AgentCallers. Each
// reads the servers' secret headers at cold start (pkg/platform/mcpenv).
var MCPFunctions = AgentCallers

// mcpSecretPrefix starts a header value naming a Secrets Manager secret,
// as in pkg/mcp (SecretPrefix); "#<field>" after the id picks a field of
// a JSON secret (pkg/awssecrets).
const mcpSecretPrefix = "secret:"

// MCPServer is one MCP server of the mcpServers setting: an entry of
// CLIENTAGENT_MCP (pkg/mcp.ServerConfig, docs/architecture.md "MCP
// skills"), given to the functions as it is. Only streamable HTTP servers
// (URL) deploy; Command and the rest are here so that a stdio entry is
// refused by name rather than as an unknown field.
type MCPServer struct {
	Name    string            `json:"name"`
	URL     string            `json:"url,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
	Command string            `json:"command,omitempty"`
	Args    []string          `json:"args,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	Tools   map[string]struct {
		RequiresApproval *bool `json:"requires_approval,omitempty"`
	} `json:"tools,omitempty"`
}

// parseMCPServers reads the mcpServers context value: a JSON list, as
// cdk.json holds it or as a string from `-c mcpServers='[…]'`. Unknown keys
// are an error, as they are at the functions' cold start. Empty: none.
func parseMCPServers(v any) ([]MCPServer, error) {
	var data []byte
	switch x := v.(type) {
	case nil:
		return nil, nil
	case string:
		if strings.TrimSpace(x) == "" {
			return nil, nil
		}
		data = []byte(x)
	case []any:
		if len(x) == 0 {
			return nil, nil
		}
		var err error
		if data, err = json.Marshal(x); err != nil {
			return nil, fmt.Errorf("context %s: %w", CtxMCPServers, err)
		}
	default:
		return nil, fmt.Errorf("context %s: want a JSON list of servers, got %T", CtxMCPServers, v)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var servers []MCPServer
	if err := dec.Decode(&servers); err != nil {
		return nil, fmt.Errorf("context %s: want a JSON list of {name, url, headers, tools}: %w", CtxMCPServers, err)
	}
	if len(servers) == 0 {
		return nil, nil
	}
	return servers, nil
}

var (
	// A secret's name: what Secrets Manager allows.
	secretNameRE = regexp.MustCompile(`^[A-Za-z0-9/_+=.@-]{1,512}$`)
	// A secret's ARN: arn:<partition>:secretsmanager:<region>:<account>:secret:<name>.
	secretARNRE = regexp.MustCompile(`^arn:aws[a-z-]*:secretsmanager:[a-z0-9-]+:[0-9]{12}:secret:[A-Za-z0-9/_+=.@-]{1,512}$`)
)

// checkMCPServers refuses what would stop the functions at cold start, or
// cannot run on Lambda: a stdio server (a child process per turn), a
// server without an http(s) url, a duplicate name, a secret header that
// names no valid secret.
func checkMCPServers(servers []MCPServer) error {
	seen := map[string]bool{}
	for i, s := range servers {
		switch {
		case strings.TrimSpace(s.Name) == "":
			return fmt.Errorf("%s: server %d has no name", CtxMCPServers, i+1)
		case seen[s.Name]:
			return fmt.Errorf("%s: server %q is listed twice", CtxMCPServers, s.Name)
		case s.Command != "" || len(s.Args) > 0 || len(s.Env) > 0:
			return fmt.Errorf("%s: server %q is a stdio server (command): stdio MCP servers run on the local stack only, since Lambda cannot keep a child process per turn; give it a url (streamable HTTP)", CtxMCPServers, s.Name)
		}
		u, err := url.Parse(s.URL)
		if s.URL == "" || err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("%s: server %q: url %q is not an http(s) URL (streamable HTTP)", CtxMCPServers, s.Name, s.URL)
		}
		for _, h := range slices.Sorted(maps.Keys(s.Headers)) {
			id, ok := mcpSecretID(s.Headers[h])
			if !ok {
				continue
			}
			if !secretARNRE.MatchString(id) && !secretNameRE.MatchString(id) {
				return fmt.Errorf("%s: server %q: header %s: %q is not a Secrets Manager secret's ARN or name (secret:<arn-or-name>[#<field>])", CtxMCPServers, s.Name, h, s.Headers[h])
			}
		}
		seen[s.Name] = true
	}
	return nil
}

// mcpSecretID is the secret a header value names ("secret:<id>[#<field>]"),
// without the field.
func mcpSecretID(value string) (string, bool) {
	ref, ok := strings.CutPrefix(value, mcpSecretPrefix)
	if !ok {
		return "", false
	}
	ref = strings.TrimSpace(ref)
	if i := strings.Index(ref, "#"); i >= 0 {
		if ref[i+1:] == "" {
			return ref, true // an empty field: not a valid id
		}
		ref = ref[:i]
	}
	return ref, true
}

// mcpSecretARNs are the resources of the secrets the servers' headers
// name, sorted and once each: an ARN as given, a name as its ARN in the
// stack's account and region with any suffix of the six characters
// Secrets Manager appends ("<name>-??????").
func mcpSecretARNs(servers []MCPServer) []string {
	var out []string
	for _, s := range servers {
		for _, v := range s.Headers {
			id, ok := mcpSecretID(v)
			if !ok {
				continue
			}
			if !strings.HasPrefix(id, "arn:") {
				id = "arn:" + *awscdk.Aws_PARTITION() + ":secretsmanager:" + *awscdk.Aws_REGION() + ":" + *awscdk.Aws_ACCOUNT_ID() + ":secret:" + id + "-??????"
			}
			if !slices.Contains(out, id) {
				out = append(out, id)
			}
		}
	}
	slices.Sort(out)
	return out
}

// addMCPServers gives the functions that reach MCP servers the
// environment's list (CLIENTAGENT_MCP) and secretsmanager:GetSecretValue
// on exactly the secrets its headers name; nothing without servers.
func addMCPServers(stack awscdk.Stack, p StackProps, fns map[string]awslambda.Function) {
	if len(p.MCPServers) == 0 {
		return
	}
	list, err := json.Marshal(p.MCPServers)
	if err != nil {
		panic(fmt.Sprintf("%s: %v", CtxMCPServers, err))
	}
	for _, s := range p.MCPServers {
		for _, h := range slices.Sorted(maps.Keys(s.Headers)) {
			if _, secret := mcpSecretID(s.Headers[h]); !secret && credentialHeaderRE.MatchString(h) {
				awscdk.Annotations_Of(stack).AddWarningV2(jsii.String("clientagent:mcpPlainCredential"), jsii.String(fmt.Sprintf(
					"%s: server %q sends header %s as plain text, which the template and the functions' configuration then hold; name a secret instead (secret:<arn-or-name>)",
					CtxMCPServers, s.Name, h)), nil)
			}
		}
	}
	secrets := mcpSecretARNs(p.MCPServers)
	for _, name := range MCPFunctions {
		fns[name].AddEnvironment(jsii.String("CLIENTAGENT_MCP"), jsii.String(string(list)), nil)
		if len(secrets) > 0 {
			allow(fns[name], "MCPHeaderSecrets", []string{"secretsmanager:GetSecretValue"}, *jsii.Strings(secrets...)...)
		}
	}
}

// credentialHeaderRE matches the names of headers that usually carry a
// credential.
var credentialHeaderRE = regexp.MustCompile(`(?i)auth|token|key|secret|cookie|password`)
