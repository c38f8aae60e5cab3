package functions_test

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// Package paths (prefixes) a function may link only when its role uses them
// (docs/design.md §12 rule 1).
const (
	openAI = "github.com/openai/openai-go"
	// The SDK's Bedrock runtime client: its package initialisers cost a cold
	// start; the model's ConverseStream is pkg/llm/bedrock.Client, the
	// guardian's ApplyGuardrail pkg/guardian/bedrock.Client.
	bedrock   = "github.com/aws/aws-sdk-go-v2/service/bedrockruntime"
	secrets   = "github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	llmconfig = "github.com/clientagent/clientagent/pkg/llm/llmconfig"
	sfnClient = "github.com/aws/aws-sdk-go-v2/service/sfn"
	a2aServer = "github.com/a2aproject/a2a-go/a2asrv"
	a2aClient = "github.com/a2aproject/a2a-go/a2aclient"
	// The sources of tools and the catalogue (pkg/platform/toolenv): the
	// A2A types and the MCP SDK, with their package initialisers (gob's
	// among them), only in the functions that build the catalogue.
	toolEnv = "github.com/clientagent/clientagent/pkg/platform/toolenv"
	a2aSDK  = "github.com/a2aproject/a2a-go"
	mcpSDK  = "github.com/modelcontextprotocol/go-sdk"
	grpc    = "google.golang.org/grpc"
	// The protobuf runtime and its generated types: their package
	// initialisers were 1.3–1.9 ms of each cold start. The OTLP exporter
	// writes the encoding itself (pkg/telemetry/otlphttp); only invoke
	// links it, through a2a-go's gRPC transport.
	protobuf      = "google.golang.org/protobuf"
	miniredis     = "github.com/alicebob/miniredis"
	lua           = "github.com/yuin/gopher-lua"
	demoAgentsPkg = "github.com/clientagent/clientagent/pkg/demoagents"
	localStack    = "github.com/clientagent/clientagent/pkg/devstack"
	localEngine   = "github.com/clientagent/clientagent/pkg/sfnlocal"
	embeddedStore = "github.com/clientagent/clientagent/pkg/record/valkey/embedded"
	localServer   = "github.com/clientagent/clientagent/pkg/record/valkey/localserver"
	awsSDK        = "github.com/aws/aws-sdk-go-v2"
	s3SDK         = "github.com/aws/aws-sdk-go-v2/service/s3"
	awsenv        = "github.com/clientagent/clientagent/pkg/platform/awsenv"
	turnSteps     = "github.com/clientagent/clientagent/pkg/turn"
	otlpCollector = "go.opentelemetry.io/proto/otlp/collector" // its gRPC service stubs
	otlpHTTP      = "go.opentelemetry.io/otel/exporters/otlp"  // otlptracehttp imports the collector
	// The JSON Schema validator pkg/schemacheck replaced, whose initialiser
	// compiled its draft meta-schemas (milliseconds of each cold start);
	// it stays as pkg/schemacheck's test oracle only.
	jsonSchema = "github.com/santhosh-tekuri/jsonschema"
	// The SDK's shared-config chain and the clients it links for profiles
	// (SSO, SSO OIDC, STS, sign-in): the functions read their environment
	// (pkg/awsconfig); the clientagent command reads profiles.
	// The confusables library builds a map of ~6,000 entries at init; the
	// guardian reads a static table generated from it (pkg/guardian/rules).
	confusablesLib = "github.com/mtibben/confusables"
	sharedConfig   = "github.com/aws/aws-sdk-go-v2/config"
	ssoClient      = "github.com/aws/aws-sdk-go-v2/service/sso"
	stsClient      = "github.com/aws/aws-sdk-go-v2/service/sts"
)

// mustNotLink is, for each function, what its binary must not link: the
// model is llmstep's alone, Step Functions the API's, the S3 wiring and the
// S3 SDK (the audit's S3 writer is pkg/audit/s3audit) neither await's nor
// append's nor events', the A2A server the demo agents' and api's (the demo
// agents link none of the platform), the A2A client only invoke's (the
// calls; the guardian agent's checks make their one JSON-RPC call
// themselves, pkg/guardian/a2aagent), and with it gRPC (the OTLP exporter
// is pkg/telemetry/otlphttp, without the collector's gRPC stubs), and the
// embedded Valkey, the local Valkey server and the local engine nobody's.
// Secrets Manager's SDK client is nobody's: the functions that read a
// secret (MCP header secrets, the OpenAI key) make their one call through
// pkg/awssecrets.Client.
var mustNotLink = map[string][]string{
	"api":        {grpc, protobuf, llmconfig, demoAgentsPkg, a2aClient},                                      // a2asrv: clientagent as an A2A agent (pkg/a2aserver)
	"llmstep":    {grpc, protobuf, sfnClient, a2aServer, demoAgentsPkg, a2aClient},                           // the model (pkg/llm/bedrock.Client); a2a (types only): the guardian agent
	"validate":   {grpc, protobuf, llmconfig, sfnClient, a2aServer, demoAgentsPkg, a2aClient},                // a2a (types only): the guardian agent; the guardian's ApplyGuardrail is pkg/guardian/bedrock.Client
	"invoke":     {llmconfig, sfnClient, a2aServer, demoAgentsPkg},                                           // a2aclient and gRPC: the calls (pkg/agents/a2acall, pkg/platform/invokeenv)
	"append":     {grpc, protobuf, llmconfig, sfnClient, a2aServer, demoAgentsPkg, awsenv, s3SDK, a2aClient}, // a2a (types only): the guardian agent; the guardian's ApplyGuardrail is pkg/guardian/bedrock.Client
	"await":      {grpc, protobuf, llmconfig, sfnClient, a2aServer, demoAgentsPkg, awsenv, s3SDK, a2aClient, toolEnv, a2aSDK, mcpSDK},
	"events":     {grpc, protobuf, llmconfig, a2aServer, demoAgentsPkg, awsenv, s3SDK, a2aClient, toolEnv, a2aSDK, mcpSDK},
	"demoagents": {grpc, protobuf, llmconfig, a2aClient, turnSteps}, // aws-sdk: tracing (SigV4 to X-Ray)
}

// nobody links these: the local stack's parts; openai-go (pkg/llm/openai
// speaks the wire protocol itself, the SDK is its tests' oracle); the
// OTLP exporters and collector types that bring gRPC; the JSON Schema
// validator pkg/schemacheck replaced (its tests' oracle); the AWS SDK's
// shared-config chain (pkg/awsconfig); the SDK's Bedrock runtime and
// Secrets Manager clients (pkg/llm/bedrock, pkg/guardian/bedrock and
// pkg/awssecrets make their calls themselves).
var noFunctionLinks = []string{miniredis, lua, embeddedStore, localServer, localStack, localEngine, openAI, otlpCollector, otlpHTTP, jsonSchema, sharedConfig, ssoClient, stsClient, confusablesLib, secrets, bedrock}

// pending are links that are wrong but wait on another package's change.
// The test fails when one of them is gone, so that it moves to mustNotLink
// and stays gone.
var pending = []struct{ fn, pkg, why string }{
	{"events", sfnClient, apiSFN},
}

const apiSFN = "pkg/api, whose events route the events function serves, imports the Step Functions client for its other routes"

// Issue 13: each function links what its role uses and nothing of the
// others' (go list over the deployed build: linux/arm64, LAMBDA_TAGS).
func TestFunctionsLinkOnlyTheirRole(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("go is not on PATH: cannot list the functions' dependencies")
	}
	var mains []string
	for fn := range mustNotLink {
		mains = append(mains, "./"+fn)
	}
	cmd := exec.Command("go", append([]string{"list", "-tags", buildTags, "-f", "{{.ImportPath}} {{join .Deps \" \"}}"}, mains...)...)
	cmd.Env = append(os.Environ(), "GOOS=linux", "GOARCH=arm64", "CGO_ENABLED=0")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	deps := map[string][]string{} // function → its packages
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) > 0 {
			deps[filepath.Base(f[0])] = f[1:]
		}
	}
	links := func(fn, prefix string) string {
		for _, p := range deps[fn] {
			if p == prefix || strings.HasPrefix(p, prefix+"/") {
				return p
			}
		}
		return ""
	}
	for fn, banned := range mustNotLink {
		if len(deps[fn]) == 0 {
			t.Errorf("go list printed no dependencies of ./functions/%s", fn)
			continue
		}
		for _, b := range append(banned, noFunctionLinks...) {
			if p := links(fn, b); p != "" {
				t.Errorf("functions/%s links %s (%s), which its role does not use", fn, p, b)
			}
		}
	}
	for _, fn := range []string{"validate", "api"} {
		if links(fn, "github.com/clientagent/clientagent/pkg/schemacheck") == "" {
			t.Errorf("functions/%s does not link pkg/schemacheck: it checks tool arguments (schemacheck.Use in its main)", fn)
		}
	}
	for _, p := range pending {
		if links(p.fn, p.pkg) == "" {
			t.Errorf("functions/%s no longer links %s: move it from pending to mustNotLink", p.fn, p.pkg)
		}
	}
}

// The runtime tests build with the tags the Makefile deploys with.
func TestMakefileBuildsWithTheseTags(t *testing.T) {
	t.Parallel()
	mk, err := os.ReadFile(filepath.Join("..", "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^LAMBDA_TAGS\s*:?=\s*`+regexp.QuoteMeta(buildTags)+`\s*$`).Match(mk) ||
		!bytes.Contains(mk, []byte("-tags $(LAMBDA_TAGS)")) {
		t.Errorf("Makefile: want LAMBDA_TAGS := %s used by the build as -tags $(LAMBDA_TAGS)", buildTags)
	}
}
