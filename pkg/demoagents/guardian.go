package demoagents

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2asrv"
	"github.com/a2aproject/a2a-go/a2asrv/eventqueue"

	"github.com/clientagent/clientagent/pkg/guardian"
	"github.com/clientagent/clientagent/pkg/guardian/rules"
	"github.com/clientagent/clientagent/pkg/lambdahttp"
)

// The demo guardian (issue 19) is an A2A agent beside the specialists but
// not one of them: AgentURLs does not list it, so its skill never reaches
// the tool catalogue or the model. The platform asks it through
// CLIENTAGENT_GUARDIAN=a2a:<base URL>/agents/guardian (pkg/guardian/a2aagent).
const (
	PathGuardian = "/agents/guardian"
	// GuardianSkillID is the skill the platform's guardian client asks by
	// default (a2aagent.DefaultSkill).
	GuardianSkillID = "guardian_check"
	// GuardianWordEnv sets the word the demo guardian blocks when
	// Options.GuardianWord is empty.
	GuardianWordEnv = "CLIENTAGENT_GUARDIAN_WORD"
	// DefaultGuardianWord is the word blocked when nothing else is set.
	DefaultGuardianWord = "forbidden"
)

// injectionPhrase marks a tool result that tries to give the model
// instructions (OWASP LLM01); the demo guardian blocks it.
const injectionPhrase = "ignore previous instructions"

// guardianWord is the blocked word: opts', else $CLIENTAGENT_GUARDIAN_WORD,
// else DefaultGuardianWord. The environment is read here because the local
// stack builds Handler without knowing about the guardian.
func guardianWord(opts Options) string {
	if w := strings.TrimSpace(opts.GuardianWord); w != "" {
		return w
	}
	if w := strings.TrimSpace(os.Getenv(GuardianWordEnv)); w != "" {
		return w
	}
	return DefaultGuardianWord
}

// handleGuardian serves the demo guardian on mux: its card and its
// JSON-RPC endpoint. It answers with a message, never a task, so it keeps
// nothing in any task store.
func handleGuardian(mux *http.ServeMux, base, word string) {
	rpc := a2asrv.NewJSONRPCHandler(a2asrv.NewHandler(&guardianExecutor{word: word}, a2asrv.WithTaskStore(noTasks{})))
	mux.Handle("POST "+PathGuardian, rpc)
	mux.Handle("POST "+PathGuardian+"/{$}", rpc)
	mux.Handle("GET "+PathGuardian+a2asrv.WellKnownAgentCardPath, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b := base
		if b == "" {
			b = lambdahttp.RequestBase(r)
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(guardianCard(b))
	}))
}

func guardianCard(base string) *a2a.AgentCard {
	return &a2a.AgentCard{
		Name:               "Demo Guardian",
		Description:        "Checks requests, tool calls and tool results for the platform (not a specialist: never offered to the model).",
		URL:                base + PathGuardian,
		PreferredTransport: a2a.TransportProtocolJSONRPC,
		ProtocolVersion:    "0.3.0",
		Version:            "1.0.0",
		DefaultInputModes:  []string{"application/json"},
		DefaultOutputModes: []string{"application/json"},
		Skills: []a2a.AgentSkill{{
			ID:   GuardianSkillID,
			Name: "Guardian check",
			Description: `Takes {"kind": "request"|"model_output"|"tool_call"|"tool_result", "text", "tool"?, "arguments"?} and answers ` +
				`{"decision": "allowed"|"blocked", "reason"}: blocks a configured word anywhere (also disguised: look-alike letters, invisible characters, spaced letters), and tool results that tell the model to ignore its instructions.`,
			Tags:        []string{"guardian", "policy"},
			InputModes:  []string{"application/json"},
			OutputModes: []string{"application/json"},
		}},
	}
}

// guardianExecutor answers one check with one message.
type guardianExecutor struct {
	word string

	once sync.Once
	set  *rules.Set
	err  error
}

var _ a2asrv.AgentExecutor = (*guardianExecutor)(nil)

func (e *guardianExecutor) Execute(ctx context.Context, reqCtx *a2asrv.RequestContext, q eventqueue.Queue) error {
	args, err := messageArgs(reqCtx.Message)
	var verdict map[string]any
	if err == nil {
		verdict, err = e.decide(args)
	}
	if err != nil {
		// No decision: the platform treats it as a failed check.
		return q.Write(ctx, a2a.NewMessageForTask(a2a.MessageRoleAgent, reqCtx, a2a.TextPart{Text: "bad guardian request: " + err.Error()}))
	}
	text := "allowed"
	if r, _ := verdict["reason"].(string); r != "" {
		text = "blocked: " + r
	}
	return q.Write(ctx, a2a.NewMessageForTask(a2a.MessageRoleAgent, reqCtx, a2a.TextPart{Text: text}, a2a.DataPart{Data: verdict}))
}

// decide is the demo policy: a tool result asking to ignore previous
// instructions is a prompt injection; the word is blocked in any kind,
// in the text or the arguments.
func (e *guardianExecutor) decide(args map[string]any) (map[string]any, error) {
	kind, _ := args["kind"].(string)
	k, err := guardian.ParseKind(kind)
	if err != nil {
		return nil, err
	}
	text, _ := args["text"].(string)
	if a, ok := args["arguments"]; ok && a != nil {
		b, _ := json.Marshal(a)
		text += "\n" + string(b)
	}
	what := map[guardian.Kind]string{guardian.Request: "message", guardian.ModelOutput: "model's output",
		guardian.ToolCall: "tool call", guardian.ToolResult: "tool result"}[k]
	set, err := e.rules()
	if err != nil {
		return nil, err
	}
	d, err := set.Check(context.Background(), guardian.Input{Kind: k, Text: text})
	if err != nil {
		return nil, err
	}
	switch {
	case d.Action != guardian.Block:
	case d.Rule == "prompt_injection":
		return map[string]any{"decision": "blocked", "rule": "prompt_injection",
			"reason": "prompt injection: the tool result tells the model to ignore previous instructions"}, nil
	default:
		return map[string]any{"decision": "blocked", "rule": "blocked_word",
			"reason": fmt.Sprintf("the %s contains the word %q, which this demo guardian blocks", what, e.word)}, nil
	}
	return map[string]any{"decision": "allowed"}, nil
}

// rules is the demo policy as a rule set: it matches the text as a reader
// sees it (rules.Normalize), so disguised spellings of the word (other
// scripts' look-alike letters, invisible characters, spaced letters) are
// blocked too.
func (e *guardianExecutor) rules() (*rules.Set, error) {
	e.once.Do(func() {
		e.set, e.err = rules.New(rules.File{Rules: []rules.Rule{
			{ID: "prompt_injection", Kinds: []guardian.Kind{guardian.ToolResult}, Contains: injectionPhrase, Action: guardian.Block},
			{ID: "blocked_word", Contains: e.word, Spaced: true, Action: guardian.Block},
		}})
		if e.err != nil {
			e.err = fmt.Errorf("demo guardian word %q: %w", e.word, e.err)
		}
	})
	return e.set, e.err
}

// Cancel has nothing to cancel: a check is answered in the request.
func (e *guardianExecutor) Cancel(ctx context.Context, reqCtx *a2asrv.RequestContext, q eventqueue.Queue) error {
	ev := a2a.NewStatusUpdateEvent(reqCtx, a2a.TaskStateCanceled, nil)
	ev.Final = true
	return q.Write(ctx, ev)
}

// noTasks is a task store that keeps nothing: the guardian answers every
// request with a message, so no task is ever made.
type noTasks struct{}

var _ a2asrv.TaskStore = noTasks{}

func (noTasks) Save(context.Context, *a2a.Task) error { return nil }
func (noTasks) Get(context.Context, a2a.TaskID) (*a2a.Task, error) {
	return nil, a2a.ErrTaskNotFound
}
