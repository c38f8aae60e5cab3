package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"go.yaml.in/yaml/v4"
)

// EnvVar is the setting that lists the MCP servers: a JSON list of
// ServerConfig, or the path of a JSON or YAML file holding one (a list, or
// an object whose "servers" is the list).
const EnvVar = "CLIENTAGENT_MCP"

// SecretPrefix starts a header value that names a secret (an ARN or a name
// in Secrets Manager) instead of giving the value itself.
const SecretPrefix = "secret:"

// ErrStdioOnLambda is returned for a stdio server configured in a Lambda
// function: Lambda cannot keep a child process per turn, so stdio servers
// run on the local stack only.
var ErrStdioOnLambda = errors.New("stdio MCP servers run on the local stack only: Lambda cannot keep a child process per turn; give the server a url (streamable HTTP)")

// ServerConfig is one MCP server: streamable HTTP (URL and Headers) or
// stdio (Command and Args, the local stack only).
type ServerConfig struct {
	// Name prefixes the server's tool names (<name>_<tool>) and keys its cache.
	Name string `json:"name"`
	// URL is the streamable HTTP endpoint, e.g. https://example.com/mcp.
	URL string `json:"url,omitempty"`
	// Headers are sent with every HTTP request; a value "secret:<arn-or-name>"
	// is read from Secrets Manager (Resolve), "secret:<arn-or-name>#<field>"
	// a field of a JSON secret (pkg/awssecrets).
	Headers map[string]string `json:"headers,omitempty"`
	// Command and Args start a stdio server; Env adds to its environment.
	Command string            `json:"command,omitempty"`
	Args    []string          `json:"args,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	// Tools overrides what the server's annotations say, per tool name.
	Tools map[string]ToolOverride `json:"tools,omitempty"`
	// Unusable is why the server cannot be reached as configured (a secret
	// header could not be read; ResolveEach), or nil: every session fails
	// with it. It is never read from the configuration.
	Unusable error `json:"-"`
}

// ToolOverride is the configuration of one tool of a server.
type ToolOverride struct {
	// RequiresApproval, when set, decides whether the tool waits for the
	// user's approval, whatever its destructiveHint says.
	RequiresApproval *bool `json:"requires_approval,omitempty"`
}

// Stdio reports whether s starts a child process.
func (s ServerConfig) Stdio() bool { return s.Command != "" }

// Endpoint is what the catalog shows as the server's address: its URL, or
// "stdio:<command>".
func (s ServerConfig) Endpoint() string {
	if s.Stdio() {
		return "stdio:" + s.Command
	}
	return s.URL
}

// LoadConfig reads EnvVar: empty means no servers. onLambda refuses stdio
// servers (ErrStdioOnLambda). Secret headers are left as they are (Resolve).
func LoadConfig(getenv func(string) string) ([]ServerConfig, error) {
	servers, err := ParseConfig(getenv(EnvVar))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", EnvVar, err)
	}
	if getenv("AWS_LAMBDA_FUNCTION_NAME") != "" {
		for _, s := range servers {
			if s.Stdio() {
				return nil, fmt.Errorf("%s: server %q: %w", EnvVar, s.Name, ErrStdioOnLambda)
			}
		}
	}
	return servers, nil
}

// ParseConfig reads a server list: inline JSON (starting with '[' or '{'),
// or the path of a .json, .yaml or .yml file. Each entry is checked: a
// unique name, and either an http(s) url or a command.
func ParseConfig(value string) ([]ServerConfig, error) {
	value = strings.TrimSpace(value)
	if value == "" {
		return nil, nil
	}
	data := []byte(value)
	yamlFile := false
	if !strings.HasPrefix(value, "[") && !strings.HasPrefix(value, "{") {
		b, err := os.ReadFile(value)
		if err != nil {
			return nil, fmt.Errorf("read MCP server list: %w", err)
		}
		data = b
		ext := strings.ToLower(filepath.Ext(value))
		yamlFile = ext == ".yaml" || ext == ".yml"
	}
	if yamlFile {
		var v any
		if err := yaml.Unmarshal(data, &v); err != nil {
			return nil, fmt.Errorf("decode %s: %w", value, err)
		}
		b, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("decode %s: %w", value, err)
		}
		data = b
	}
	var servers []ServerConfig
	if bytes.HasPrefix(bytes.TrimSpace(data), []byte("{")) {
		var wrapped struct {
			Servers []ServerConfig `json:"servers"`
		}
		if err := strictJSON(data, &wrapped); err != nil {
			return nil, fmt.Errorf("decode MCP server list: %w", err)
		}
		servers = wrapped.Servers
	} else if err := strictJSON(data, &servers); err != nil {
		return nil, fmt.Errorf("decode MCP server list: %w", err)
	}
	seen := map[string]bool{}
	for i, s := range servers {
		switch {
		case strings.TrimSpace(s.Name) == "":
			return nil, fmt.Errorf("MCP server %d has no name", i+1)
		case seen[s.Name]:
			return nil, fmt.Errorf("MCP server %q is listed twice", s.Name)
		case s.URL != "" && s.Command != "":
			return nil, fmt.Errorf("MCP server %q has both a url and a command: give one", s.Name)
		case s.URL == "" && s.Command == "":
			return nil, fmt.Errorf("MCP server %q needs a url (streamable HTTP) or a command (stdio)", s.Name)
		case s.URL != "":
			u, err := url.Parse(s.URL)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				return nil, fmt.Errorf("MCP server %q: url %q is not an http(s) URL", s.Name, s.URL)
			}
		}
		if s.Stdio() && len(s.Headers) > 0 {
			return nil, fmt.Errorf("MCP server %q: headers are for a url server, not a command", s.Name)
		}
		seen[s.Name] = true
	}
	return servers, nil
}

// strictJSON decodes data into v, refusing unknown fields, so a misspelt
// key ("header", "requiresApproval") is an error at start rather than a
// setting silently ignored.
func strictJSON(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// Secrets reads a secret's string by ARN or name (Secrets Manager on AWS).
type Secrets interface {
	SecretString(ctx context.Context, id string) (string, error)
}

// ResolveEach is Resolve for a process that must start whatever one
// server's configuration says (the local stack): a server whose secret
// headers cannot be read is kept without headers and with Unusable set, so the
// Source lists it as down (its tools left out, or their last good list
// marked unavailable) and a call of its tools fails with that error.
func ResolveEach(ctx context.Context, servers []ServerConfig, secrets Secrets) []ServerConfig {
	out := make([]ServerConfig, len(servers))
	for i, s := range servers {
		r, err := Resolve(ctx, []ServerConfig{s}, secrets)
		if err != nil {
			out[i] = s
			out[i].Headers, out[i].Unusable = nil, err
			continue
		}
		out[i] = r[0]
	}
	return out
}

// Resolve replaces every "secret:<id>" header value with the secret's
// string read through secrets, once, at start. With secrets nil a secret
// header is an error naming it. The values never appear in an error.
func Resolve(ctx context.Context, servers []ServerConfig, secrets Secrets) ([]ServerConfig, error) {
	out := make([]ServerConfig, len(servers))
	for i, s := range servers {
		out[i] = s
		if len(s.Headers) == 0 {
			continue
		}
		h := make(map[string]string, len(s.Headers))
		for k, v := range s.Headers {
			id, ok := strings.CutPrefix(v, SecretPrefix)
			if !ok {
				h[k] = v
				continue
			}
			if secrets == nil {
				return nil, fmt.Errorf("MCP server %q: header %s names secret %s, but no secret reader is configured", s.Name, k, id)
			}
			val, err := secrets.SecretString(ctx, strings.TrimSpace(id))
			if err != nil {
				return nil, fmt.Errorf("MCP server %q: header %s: read secret %s: %w", s.Name, k, id, err)
			}
			h[k] = strings.TrimSpace(val)
		}
		out[i].Headers = h
	}
	return out, nil
}
