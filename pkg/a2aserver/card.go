package a2aserver

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/clientagent/clientagent/pkg/catalog"
)

// chatSkillID is the skill that runs one turn of the loop on free text.
const chatSkillID = "chat"

// chatSchema is the chat skill's input in our extension: a calling
// clientagent sends it as a data part {"text"}.
var chatSchema = json.RawMessage(`{"type":"object","properties":{"text":{"type":"string","description":"The request in plain language, with every detail it needs. Earlier messages with the same contextId are part of the same conversation."}},"required":["text"]}`)

// workflowSkillID is a workflow's skill id: the workflow's own id, unless
// that is the chat skill's.
func workflowSkillID(id string) string {
	if id == chatSkillID {
		return "workflow_" + id
	}
	return id
}

// Card is the agent card at base (the public scheme://host of the mux):
// the chat skill and one skill per workflow template of the current
// catalogue, each described in our schema extension (catalog.ExtensionURI)
// exactly as pkg/agents reads a specialist's, so another clientagent
// sees typed inputs.
func (s *Server) Card(ctx context.Context, base string) (*a2a.AgentCard, error) {
	cat, err := s.Catalogs.Catalog(ctx)
	if err != nil {
		return nil, fmt.Errorf("catalog: %w", err)
	}
	var tools []string
	for _, sk := range cat.Skills() {
		if !sk.Unavailable {
			tools = append(tools, sk.Name)
		}
	}
	exts := map[string]catalog.SkillExtension{}
	chat := a2a.AgentSkill{
		ID:   chatSkillID,
		Name: "Chat with clientagent",
		Description: "Ask clientagent, an orchestrator, to do something in plain language. It plans and runs calls to its own tools" +
			toolList(tools) + " and answers with text and files (artifacts with download links). " +
			"It may pause the task as input-required: with a form (send the listed fields as a data part on the same task) " +
			"or with an approval of the exact calls it wants to run (answer approve or reject, or yes/no, on the same task). " +
			"Messages with the same contextId continue one conversation, so a follow-up may refer to earlier results.",
		Tags:        []string{"orchestrator", "chat", "workflow"},
		Examples:    []string{"Create a PNG image with the word Popelnase", "Design a valve flange with 6 holes and 120 mm outer diameter"},
		InputModes:  []string{"text/plain", "application/json"},
		OutputModes: []string{"text/plain", "application/json"},
	}
	exts[chatSkillID] = catalog.SkillExtension{InputSchema: chatSchema,
		UsageNotes: "One request per task; a form or an approval comes back as input-required and is answered on the same task."}
	skills := []a2a.AgentSkill{chat}

	schemas := map[string]json.RawMessage{}
	for _, t := range cat.Tools() {
		schemas[t.Name] = t.Parameters
	}
	for _, w := range cat.Workflows() {
		id := workflowSkillID(w.ID)
		steps := make([]string, 0, len(w.Steps))
		for _, st := range w.Steps {
			steps = append(steps, st.Skill)
		}
		var desc []string
		if w.Unavailable {
			desc = append(desc, "(currently unavailable)")
		}
		if d := strings.TrimSpace(w.Description); d != "" {
			desc = append(desc, d)
		}
		desc = append(desc, "A fixed workflow: runs "+strings.Join(steps, " → ")+" in one task, with the inputs given as a data part.")
		var userInput []string
		for _, in := range w.Inputs {
			if in.UserInput {
				userInput = append(userInput, in.Path)
			}
		}
		if len(userInput) > 0 {
			desc = append(desc, "Leave out "+strings.Join(userInput, ", ")+" unless the user gave it: the task then asks for it with a form (input-required).")
		}
		notes := "Inputs missing from the data part are asked for with a form (input-required)."
		if w.RequiresApproval {
			// Not requires_approval in the extension: the plan is approved
			// here, with the exact arguments, as input-required on the task;
			// flagging it would make a calling clientagent ask twice.
			desc = append(desc, "It shows its plan (every step with its exact arguments) for approval before anything runs: input-required with an approval, answered approve or reject.")
			notes += " The plan is approved on the task itself (input-required)."
		}
		skills = append(skills, a2a.AgentSkill{
			ID:          id,
			Name:        w.Name,
			Description: strings.Join(desc, " "),
			Tags:        []string{"workflow"},
			InputModes:  []string{"application/json"},
			OutputModes: []string{"text/plain", "application/json"},
		})
		exts[id] = catalog.SkillExtension{InputSchema: schemas[catalog.WorkflowToolName(w.ID)], UserInput: userInput, UsageNotes: notes}
	}

	return &a2a.AgentCard{
		Name: "clientagent",
		Description: "An orchestrator for LLM agents: it runs a conversation's turns, calling specialist agents and fixed workflows, " +
			"asks for missing input with typed forms and for approval before consequential calls, and returns files as artifacts.",
		URL:                strings.TrimRight(base, "/") + strings.TrimRight(s.Path, "/"),
		PreferredTransport: a2a.TransportProtocolJSONRPC,
		ProtocolVersion:    "0.3.0",
		Version:            "1.0.0",
		DefaultInputModes:  []string{"text/plain", "application/json"},
		DefaultOutputModes: []string{"text/plain", "application/json"},
		Capabilities: a2a.AgentCapabilities{
			Streaming: s.Streaming,
			Extensions: []a2a.AgentExtension{{
				URI:         catalog.ExtensionURI,
				Description: "Input schemas and user-input fields of this agent's skills.",
				Params:      map[string]any{"skills": exts},
			}},
		},
		SecuritySchemes: a2a.NamedSecuritySchemes{"bearer": a2a.HTTPAuthSecurityScheme{
			Scheme: "bearer", BearerFormat: "JWT", Description: "The same bearer token as clientagent's HTTP API; conversations and tasks belong to its subject."}},
		Security: []a2a.SecurityRequirements{{"bearer": a2a.SecuritySchemeScopes{}}},
		Skills:   skills,
	}, nil
}

func toolList(tools []string) string {
	if len(tools) == 0 {
		return ""
	}
	return " (" + strings.Join(tools, ", ") + ")"
}
