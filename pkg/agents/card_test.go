package agents

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/google/go-cmp/cmp"

	"github.com/clientagent/clientagent/pkg/catalog"
)

var update = flag.Bool("update", false, "rewrite golden files")

func readCard(t *testing.T, name string) *a2a.AgentCard {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "cards", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var card a2a.AgentCard
	if err := json.Unmarshal(b, &card); err != nil {
		t.Fatalf("decode card %s: %v", name, err)
	}
	return &card
}

// TestCapabilitiesFromCardGolden checks card parsing against golden
// capabilities (docs/design.md §5: schema extension, plain fallback; docs/design.md §3.2:
// sanitized tool names).
func TestCapabilitiesFromCardGolden(t *testing.T) {
	t.Parallel()
	tests := []struct {
		card, base string
	}{
		{card: "extension", base: "http://drawing.example:9001"},
		{card: "plain", base: "http://echo.example:9002/agents/echo"},
		{card: "odd_ids", base: "http://odd.example:8080"},
	}
	for _, tt := range tests {
		t.Run(tt.card, func(t *testing.T) {
			t.Parallel()
			got := CapabilitiesFromCard(readCard(t, tt.card), tt.base)
			gotJSON, err := json.MarshalIndent(got, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			golden := filepath.Join("testdata", "cards", tt.card+".golden.json")
			if *update {
				if err := os.WriteFile(golden, append(gotJSON, '\n'), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			wantJSON, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			var want, gotAny any
			if err := json.Unmarshal(wantJSON, &want); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(gotJSON, &gotAny); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, gotAny); diff != "" {
				t.Errorf("CapabilitiesFromCard(%s) mismatch (-want +got):\n%s", tt.card, diff)
			}
		})
	}
}

// docs/design.md §3.2: every tool name matches ^[a-zA-Z0-9_-]{1,64}$.
func TestCapabilitiesFromCardToolNamesValid(t *testing.T) {
	t.Parallel()
	valid := regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)
	for _, name := range []string{"extension", "plain", "odd_ids"} {
		for _, c := range CapabilitiesFromCard(readCard(t, name), "http://x") {
			if !valid.MatchString(c.Tool) {
				t.Errorf("card %s skill %q: Tool = %q, not a valid tool name", name, c.SkillID, c.Tool)
			}
		}
	}
}

func TestCapabilitiesFromCardFields(t *testing.T) {
	t.Parallel()
	caps := CapabilitiesFromCard(readCard(t, "extension"), "http://drawing.example:9001")
	byID := map[string]catalog.Capability{}
	for _, c := range caps {
		byID[c.SkillID] = c
	}
	conv := byID["convert_svg_to_png"]
	if conv.Plain || !conv.RequiresApproval || !cmp.Equal(conv.UserInput, []string{"dpi"}) {
		t.Errorf("convert_svg_to_png = %+v, want schema skill requiring approval with user input dpi", conv)
	}
	// An extension entry without input_schema keeps its flags but is sent text.
	desc := byID["describe_drawing"]
	if !desc.Plain || !desc.RequiresApproval || string(desc.InputSchema) != string(PlainInputSchema) {
		t.Errorf("describe_drawing = %+v, want plain skill requiring approval", desc)
	}
	// The other extension with a "skills" param must not be read as ours.
	if create := byID["create_svg_artifact"]; create.Plain {
		t.Errorf("create_svg_artifact.Plain = true, want false (schema from our extension)")
	}
}

func TestAgentEndpoint(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, cardURL, base, want string
	}{
		{"absolute", "http://a.example/rpc", "http://b.example", "http://a.example/rpc"},
		{"empty", "", "http://b.example/agent", "http://b.example/agent"},
		{"relative path", "/rpc", "http://b.example/agent", "http://b.example/rpc"},
		{"relative segment", "rpc", "http://b.example/agent", "http://b.example/agent/rpc"},
		{"dot", ".", "http://b.example/agent", "http://b.example/agent"},
	}
	for _, tt := range tests {
		got, transport := agentEndpoint(&a2a.AgentCard{URL: tt.cardURL}, tt.base)
		if got != tt.want || transport != "JSONRPC" {
			t.Errorf("%s: agentEndpoint(%q, %q) = %q %s, want %q JSONRPC", tt.name, tt.cardURL, tt.base, got, transport, tt.want)
		}
	}
}

// JSON-RPC wherever a card offers it, else gRPC; a transport we do not
// speak, with no alternative, is tried with JSON-RPC at its URL.
func TestAgentEndpointTransport(t *testing.T) {
	t.Parallel()
	grpcOnly := &a2a.AgentCard{URL: "agents.example:443", PreferredTransport: a2a.TransportProtocolGRPC}
	both := &a2a.AgentCard{URL: "agents.example:443", PreferredTransport: a2a.TransportProtocolGRPC,
		AdditionalInterfaces: []a2a.AgentInterface{{Transport: a2a.TransportProtocolJSONRPC, URL: "https://agents.example/rpc"}}}
	restOnly := &a2a.AgentCard{URL: "https://agents.example/v1", PreferredTransport: a2a.TransportProtocolHTTPJSON}
	restThenGRPC := &a2a.AgentCard{URL: "https://agents.example/v1", PreferredTransport: a2a.TransportProtocolHTTPJSON,
		AdditionalInterfaces: []a2a.AgentInterface{{Transport: a2a.TransportProtocolGRPC, URL: "http://127.0.0.1:9000"}}}
	tests := []struct {
		name                string
		card                *a2a.AgentCard
		wantURL, wantTransp string
	}{
		{"gRPC only", grpcOnly, "agents.example:443", "GRPC"},
		{"JSON-RPC beside gRPC", both, "https://agents.example/rpc", "JSONRPC"},
		{"HTTP+JSON only", restOnly, "https://agents.example/v1", "JSONRPC"},
		{"HTTP+JSON and gRPC", restThenGRPC, "http://127.0.0.1:9000", "GRPC"},
	}
	for _, tt := range tests {
		got, transport := agentEndpoint(tt.card, "https://agents.example")
		if got != tt.wantURL || transport != tt.wantTransp {
			t.Errorf("%s: agentEndpoint() = %q %s, want %q %s", tt.name, got, transport, tt.wantURL, tt.wantTransp)
		}
	}
}

func TestUniqueTools(t *testing.T) {
	t.Parallel()
	long := "x123456789012345678901234567890123456789012345678901234567890123" // 64
	caps := []catalog.Capability{{Tool: "echo"}, {Tool: "echo"}, {Tool: "echo_2"}, {Tool: "echo"}, {Tool: long}, {Tool: long}}
	uniqueTools(caps)
	var got []string
	for _, c := range caps {
		got = append(got, c.Tool)
	}
	want := []string{"echo", "echo_2", "echo_2_2", "echo_3", long, long[:62] + "_2"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("uniqueTools() mismatch (-want +got):\n%s", diff)
	}
}

func TestParseAgentList(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want []string
	}{
		{"", nil},
		{" , ,", nil},
		{"http://a:1, http://b:2/ ,http://a:1/", []string{"http://a:1", "http://b:2"}},
		{"http://gw/a2a/agent", []string{"http://gw/a2a/agent"}},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, ParseAgentList(tt.in)); diff != "" {
			t.Errorf("ParseAgentList(%q) mismatch (-want +got):\n%s", tt.in, diff)
		}
	}
}
