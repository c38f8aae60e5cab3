// Package catalog turns what the platform can do into the tools the model
// sees (spec §3.2), and writes the system prompt (spec §3.5). It knows
// capabilities, workflow templates and ask_user, and what validation needs
// of each tool (Entry); the checks of a batch of tool calls before anything
// runs (spec §3.3) and the tool results live in the subpackage batch,
// because package record imports this one. It must not call specialists,
// Valkey or the LLM.
package catalog

import "encoding/json"

// ExtensionURI identifies our agent-card extension carrying input schemas
// (DESIGN §4). A card lists it in capabilities.extensions[] with
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
	SkillExtension
	Description string `json:"description"`
	// Plain is true for a skill without our extension: its schema is
	// {"input": string} and it is sent text.
	Plain bool `json:"plain,omitempty"`
	// Unavailable is true when the agent was down at the last refresh and
	// this card is the last good one.
	Unavailable bool `json:"unavailable,omitempty"`
}

// Workflow is a workflow template: a fixed chain of skill calls whose
// inputs come from the workflow's inputs (dotted paths) or from earlier
// steps' results. Its tool's parameters are RequiredInputPaths as flat
// properties keyed by dotted path (spec §3.2).
type Workflow struct {
	ID                 string          `json:"id"`
	Name               string          `json:"name"`
	Description        string          `json:"description"`
	RequiredInputPaths []WorkflowInput `json:"required_input_paths"`
	Steps              []WorkflowStep  `json:"steps"`
}

// WorkflowInput is one input of a workflow, keyed by a dotted path such as
// "drawing.material".
type WorkflowInput struct {
	Path        string   `json:"path"`
	Type        string   `json:"type"` // string, integer, number, boolean
	Description string   `json:"description"`
	Enum        []string `json:"enum,omitempty"`
	UserInput   bool     `json:"user_input,omitempty"`
}

// WorkflowStep calls one skill. Arguments values may be templates:
// "{{inputs.<path>}}" for a workflow input, "{{steps.<n>.artifacts.<i>}}"
// for the artifact id produced by an earlier step (0-based).
type WorkflowStep struct {
	Skill     string         `json:"skill"` // tool name of the capability
	Arguments map[string]any `json:"arguments"`
}

// AskUserTool is the name of the clarification tool.
const AskUserTool = "ask_user"

// FormField is one typed field of a form shown to the user (API.md Turn.form).
type FormField struct {
	Name        string   `json:"name"`
	Type        string   `json:"type"` // string, integer, number, boolean
	Description string   `json:"description"`
	Required    bool     `json:"required"`
	Enum        []string `json:"enum,omitempty"`
}
