// Package catalog turns what the platform can do into the tools the model
// sees (docs/design.md §3.2), and writes the system prompt (docs/design.md §3.5). It knows
// capabilities, workflow templates and ask_user, and what validation needs
// of each tool (Entry); the checks of a batch of tool calls before anything
// runs (docs/design.md §3.3) and the tool results live in the subpackage batch,
// which reads records. Package record is below this one: it must not
// import the catalog (the form field and plan step types it stores are
// pkg/wire's). It must not call specialists,
// Valkey or the LLM.
package catalog

import (
	"encoding/json"

	"github.com/clientagent/clientagent/pkg/wire"
)

// ExtensionURI identifies our agent-card extension carrying input schemas
// (docs/design.md §5). A card lists it in capabilities.extensions[] with
// params.skills.<skill_id> = SkillExtension.
const ExtensionURI = "https://clientagent.dev/a2a/ext/skill-schema/v1"

// SkillExtension is the per-skill payload of our agent-card extension.
type SkillExtension struct {
	InputSchema      json.RawMessage `json:"input_schema,omitempty"`
	RequiresApproval bool            `json:"requires_approval,omitempty"`
	UsageNotes       string          `json:"usage_notes,omitempty"`
	// UserInput names input_schema properties only the user may supply:
	// the model is told never to invent them, and a missing one pauses the
	// call with a typed form.
	UserInput []string `json:"user_input,omitempty"`
}

// Capability is one specialist skill, as read from an agent card. It is
// what becomes one skill tool.
type Capability struct {
	// Tool is the sanitized tool name (^[a-zA-Z0-9_-]{1,64}$), unique in a catalog.
	Tool     string `json:"tool"`
	SkillID  string `json:"skill_id"`
	Agent    string `json:"agent"`     // agent card name
	AgentURL string `json:"agent_url"` // A2A endpoint URL used for message/send
	// Transport is the A2A transport at AgentURL: "JSONRPC" (empty means
	// it too) or "GRPC".
	Transport string `json:"transport,omitempty"`
	// MCPServer names the configured MCP server (pkg/mcp) whose tool this
	// is; empty for an A2A skill. SkillID is then the tool's own name,
	// Agent the server's name and AgentURL its URL (or stdio:<command>).
	MCPServer string `json:"mcp_server,omitempty"`
	SkillExtension
	Description string `json:"description"`
	// Plain is true for a skill without our extension: its schema is
	// {"input": string} and it is sent text.
	Plain bool `json:"plain,omitempty"`
	// Unavailable is true when the agent was down at the last refresh and
	// this card is the last good one.
	Unavailable bool `json:"unavailable,omitempty"`
}

// Workflow is a workflow template (docs/design.md §3.2, §3.4): a fixed chain of skill
// calls whose arguments are bound to the workflow's inputs or to artifacts
// that earlier steps produced. A template file holds ID … Steps;
// LoadWorkflows checks its bindings and Compile checks it against the
// skills and fills RequiredInputPaths, which are the parameters of its tool.
type Workflow struct {
	ID          string          `json:"id"`
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Inputs      []WorkflowInput `json:"inputs"`
	Steps       []WorkflowStep  `json:"steps"`
	// RequiredInputPaths is set by Compile: the inputs, completed from the
	// skill parameters they are bound to (type, enum, description, user
	// input, artifact reference).
	RequiredInputPaths []WorkflowInput `json:"-"`
}

// WorkflowInput is one input of a workflow, keyed by a dotted path such as
// "drawing.material". In a template only Path is needed: the rest defaults
// to what the skill parameter it is bound to says.
type WorkflowInput struct {
	Path        string   `json:"path"`
	Type        string   `json:"type"` // string, integer, number, boolean
	Description string   `json:"description"`
	Enum        []string `json:"enum,omitempty"`
	UserInput   bool     `json:"user_input,omitempty"`
	ArtifactRef bool     `json:"artifact_ref,omitempty"`
}

// WorkflowStep calls one skill. Argument values may be templates:
// "{{inputs.<path>}}" for a workflow input, "{{steps.<id>.artifacts.<i>}}"
// (or "{{steps.<id>.artifact}}" for the first) for an artifact id an
// earlier step produced, "{{steps.<id>.summary}}" and
// "{{steps.<id>.result[.<path>]}}" for its text and structured result;
// <id> is the step's ID, or its 0-based index.
type WorkflowStep struct {
	ID        string         `json:"id,omitempty"`
	Name      string         `json:"name,omitempty"` // shown when the step fails
	Skill     string         `json:"skill"`          // tool name of the capability
	Arguments map[string]any `json:"arguments"`
}

// PlanStep is one step of a workflow call as the user approves it: the
// skill and the arguments it will get, an earlier step's artifact shown as
// "<artifact 1 of step 2>" (docs/design.md §9: the plan is shown before it runs).
type PlanStep = wire.PlanStep

// AskUserTool is the name of the clarification tool.
const AskUserTool = "ask_user"

// FormField is one typed field of a form shown to the user (docs/api/openapi.yaml Turn.form).
type FormField = wire.FormField
