package record

import (
	"encoding/json"
	"sort"
	"time"
	"unicode/utf8"

	"github.com/clientagent/clientagent/pkg/artifact"
	"github.com/clientagent/clientagent/pkg/llm"
)

// DefaultWindow is the transcript window of spec §3.6: at most this many
// entries of llm_messages go to the model.
const DefaultWindow = 80

// TitleLimit is the longest title derived from a first user text, in runes.
const TitleLimit = 80

// Placeholder results for a call without a stored result (spec §3.4a,
// DESIGN §3). They are compact ToolResult JSON like every other result.
var (
	notExecutedResult  = mustJSON(ToolResult{Status: ResultNotExecuted, Summary: "This call was not executed."})
	stillRunningResult = mustJSON(ToolResult{Status: ResultNotExecuted,
		Summary: "This call is still running in another turn; its result will appear later."})
)

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// Assemble builds the merged view of a conversation from what is stored:
// turns ordered by StartedAt then id, artifacts by CreatedAt then id,
// Meta.Title from the first turn's text when not set, Meta.UpdatedAt from
// the newest turn (or CreatedAt). The store calls it on every read, so the
// merge of concurrent turns is computed, never written.
func Assemble(m Meta, turns []*Turn, arts []artifact.Artifact) *Conversation {
	c := &Conversation{Meta: m, Turns: append([]*Turn(nil), turns...), Artifacts: append([]artifact.Artifact(nil), arts...)}
	SortTurns(c.Turns)
	sort.SliceStable(c.Artifacts, func(i, j int) bool {
		a, b := c.Artifacts[i], c.Artifacts[j]
		if !a.CreatedAt.Equal(b.CreatedAt) {
			return a.CreatedAt.Before(b.CreatedAt)
		}
		return a.ID < b.ID
	})
	if c.Meta.Title == "" {
		for _, t := range c.Turns {
			if t.Text != "" {
				c.Meta.Title = Title(t.Text)
				break
			}
		}
	}
	c.Meta.UpdatedAt = c.Meta.CreatedAt
	for _, t := range c.Turns {
		if t.UpdatedAt.After(c.Meta.UpdatedAt) {
			c.Meta.UpdatedAt = t.UpdatedAt
		}
	}
	return c
}

// SortTurns orders turns by StartedAt, then id (spec §3.4a: blocks ordered
// by turn start; the id breaks ties deterministically).
func SortTurns(ts []*Turn) {
	sort.SliceStable(ts, func(i, j int) bool { return turnBefore(ts[i], ts[j]) })
}

func turnBefore(a, b *Turn) bool {
	if !a.StartedAt.Equal(b.StartedAt) {
		return a.StartedAt.Before(b.StartedAt)
	}
	return a.ID < b.ID
}

// Title shortens a user text to a conversation title of at most
// TitleLimit runes, ending in "…" when cut.
func Title(text string) string {
	if utf8.RuneCountInString(text) <= TitleLimit {
		return text
	}
	r := []rune(text)
	return string(r[:TitleLimit-1]) + "…"
}

// Turn returns the turn with id.
func (c *Conversation) Turn(id string) (*Turn, bool) {
	for _, t := range c.Turns {
		if t.ID == id {
			return t, true
		}
	}
	return nil, false
}

// Catalog is the conversation's artifact catalog (spec §3.5), ordered by
// creation; the system prompt lists it on every LLM call.
func (c *Conversation) Catalog() []artifact.Artifact {
	return append([]artifact.Artifact(nil), c.Artifacts...)
}

// active reports whether a turn may still write results: it runs or waits.
func (t *Turn) active() bool { return t.Status == StatusRunning || t.Status.Waiting() }

// LLMView is the transcript the LLM call of turn turnID sees (spec §3.4a
// llm_view, DESIGN §3): every other turn's block ordered by start, then
// this turn's own block last, so a model working on this turn never gets
// another turn's newer request as the last word. It repairs the merged
// transcript so that every provider accepts it:
//
//   - each assistant tool call is directly followed by its result, results
//     of one message in call order, wherever the result was stored;
//   - a call without a result gets a placeholder: "still running in another
//     turn" when the owning turn is another active turn, else "not
//     executed". Calls of this turn may be filled from outcomes (its stored
//     CallOutcomes not yet appended to its block);
//   - results without a call, a second result for one call id, repeated
//     call ids, system messages and empty assistant messages are dropped.
//
// Then the window of spec §3.6 applies (window <= 0: none): when the view
// has more than window entries the oldest are dropped, cutting only where a
// user message starts and never inside this turn's block, so no result is
// orphaned and this turn's user message is always kept.
func (c *Conversation) LLMView(turnID string, outcomes map[string]CallOutcome, window int) []llm.Message {
	ordered := make([]*Turn, 0, len(c.Turns))
	var self *Turn
	for _, t := range c.Turns {
		if t.ID == turnID && self == nil {
			self = t
			continue
		}
		ordered = append(ordered, t)
	}
	SortTurns(ordered)
	if self != nil {
		ordered = append(ordered, self)
	}

	// The first stored result of each call id, wherever it landed.
	results := map[string]string{}
	for _, t := range ordered {
		for _, m := range t.Messages {
			if m.Role != llm.RoleTool || m.ToolCallID == "" {
				continue
			}
			if _, ok := results[m.ToolCallID]; !ok {
				results[m.ToolCallID] = m.Content
			}
		}
	}

	var view []llm.Message
	selfStart := -1
	seen := map[string]bool{} // call ids already placed
	for _, t := range ordered {
		isSelf := t == self
		if isSelf {
			selfStart = len(view)
		}
		for _, m := range t.Messages {
			switch m.Role {
			case llm.RoleUser:
				view = append(view, llm.Message{Role: llm.RoleUser, Content: m.Content})
			case llm.RoleAssistant:
				var calls []llm.ToolCall
				for _, tc := range m.ToolCalls {
					if tc.ID == "" || seen[tc.ID] {
						continue
					}
					seen[tc.ID] = true
					calls = append(calls, tc)
				}
				if m.Content == "" && len(calls) == 0 {
					continue
				}
				view = append(view, llm.Message{Role: llm.RoleAssistant, Content: m.Content, ToolCalls: calls})
				for _, tc := range calls {
					view = append(view, llm.ToolResultMessage(tc.ID, resultFor(tc.ID, results, outcomes, t, isSelf)))
				}
			}
			// System messages and tool results are not copied: results are
			// placed after their calls above, system text is the prompt's.
		}
	}
	if selfStart < 0 {
		selfStart = len(view)
	}
	return applyWindow(view, selfStart, window)
}

func resultFor(id string, results map[string]string, outcomes map[string]CallOutcome, owner *Turn, isSelf bool) string {
	if r, ok := results[id]; ok {
		return r
	}
	if isSelf {
		if o, ok := outcomes[id]; ok && o.InputRequired == nil && o.Result.Status != "" {
			return mustJSON(o.Result)
		}
		return notExecutedResult
	}
	if owner.active() {
		return stillRunningResult
	}
	return notExecutedResult
}

// applyWindow cuts view to at most window entries where it can (spec §3.6):
// only at a user message at or before selfStart. When no such cut is short
// enough, it keeps from the last allowed one, so this turn's block stays whole.
func applyWindow(view []llm.Message, selfStart, window int) []llm.Message {
	if window <= 0 || len(view) <= window {
		return view
	}
	last := -1
	for i := 0; i <= selfStart && i < len(view); i++ {
		if view[i].Role != llm.RoleUser {
			continue
		}
		if len(view)-i <= window {
			return view[i:]
		}
		last = i
	}
	if last < 0 {
		return view
	}
	return view[last:]
}

// leavesPendingInput reports whether t leaves input pending for the user
// (spec §3.4a _leaves_pending_input): it waits with an open form or
// approval, or it has unfinished pending calls. A finished turn leaves none.
func (t *Turn) leavesPendingInput() bool {
	if t.Status.Final() {
		return false
	}
	for _, p := range t.Pending {
		switch p.State {
		case CallNeedsInput, CallNeedsApproval, CallReady:
			return true
		}
	}
	return false
}

// PendingOwner is the turn that owns the conversation's pending input
// (awaiting_approval, missing_info; spec §3.4a newest-turn ownership): the
// newest turn by start that leaves pending input. A newer turn that left no
// form, approval or unfinished call does not clear an older turn's open one.
// Nil when no turn leaves pending input.
func (c *Conversation) PendingOwner() *Turn {
	var owner *Turn
	for _, t := range c.Turns {
		if t.leavesPendingInput() && (owner == nil || turnBefore(owner, t)) {
			owner = t
		}
	}
	return owner
}

// AwaitingApproval is the merged awaiting_approval flag: the pending owner
// has a call waiting for approval.
func (c *Conversation) AwaitingApproval() bool {
	o := c.PendingOwner()
	if o == nil {
		return false
	}
	for _, p := range o.Pending {
		if p.State == CallNeedsApproval {
			return true
		}
	}
	return false
}

// MissingInfo is the merged missing_info: the pending owner's calls that
// wait for form answers.
func (c *Conversation) MissingInfo() []PendingCall {
	o := c.PendingOwner()
	if o == nil {
		return nil
	}
	var out []PendingCall
	for _, p := range o.Pending {
		if p.State == CallNeedsInput {
			out = append(out, p)
		}
	}
	return out
}

// Waiting returns the turns paused for the user, oldest first.
func (c *Conversation) Waiting() []*Turn {
	var out []*Turn
	for _, t := range c.Turns {
		if t.Status.Waiting() {
			out = append(out, t)
		}
	}
	SortTurns(out)
	return out
}

// RecentSkillInputs is recent_skill_inputs (spec §3.5): for each tool, the
// inputs of its newest succeeded call, taken from the tool_inputs of every
// conversation_history entry of every turn, so they outlive the transcript
// window. Newest is by entry time, then turn order.
func (c *Conversation) RecentSkillInputs() map[string]map[string]any {
	type pick struct {
		at     time.Time
		inputs map[string]any
	}
	best := map[string]pick{}
	turns := append([]*Turn(nil), c.Turns...)
	SortTurns(turns)
	for _, t := range turns {
		for _, h := range t.History {
			if h.Status != ResultSucceeded || h.Tool == "" || len(h.ToolInputs) == 0 {
				continue
			}
			if b, ok := best[h.Tool]; ok && h.At.Before(b.at) {
				continue
			}
			best[h.Tool] = pick{h.At, h.ToolInputs}
		}
	}
	out := make(map[string]map[string]any, len(best))
	for tool, b := range best {
		out[tool] = b.inputs
	}
	return out
}

// History is the conversation_history a chat UI restores: every turn's
// entries in turn order, each turn's artifacts stamped by
// StampTurnArtifacts.
func (c *Conversation) History() []HistoryEntry {
	turns := append([]*Turn(nil), c.Turns...)
	SortTurns(turns)
	var out []HistoryEntry
	for _, t := range turns {
		var produced []artifact.Artifact
		for _, a := range c.Artifacts {
			if a.TurnID == t.ID {
				produced = append(produced, a)
			}
		}
		out = append(out, StampTurnArtifacts(t.History, produced, t.Status.Final())...)
	}
	return out
}

// Entry kinds of conversation_history that StampTurnArtifacts treats apart.
const (
	KindMessage           = "message"
	KindFollowupQuestions = "followup_questions"
	KindPlan              = "plan"
	KindPlanApproved      = "plan_approved"
	KindToolResult        = "tool_result"
)

// StampTurnArtifacts returns a copy of one turn's history with the turn's
// produced artifacts stamped onto the reply they restore with (spec §3.4a
// restore fidelity). A pause's followup_questions or plan entry carries the
// reply text as content, so each artifact goes onto the first assistant
// entry with content at or after its creation: artifacts produced before a
// pause restore with the pause's reply, later ones with the next reply.
// The plan_approved entry never has content or artifacts, so a restored
// chat shows no bubble the live UI never showed. When the turn is final,
// artifacts newer than every reply (clock skew between steps) go onto the
// last reply; otherwise they wait for a reply to come. Artifacts already on
// an assistant entry are not stamped twice; tool entries are left as they are.
func StampTurnArtifacts(history []HistoryEntry, produced []artifact.Artifact, final bool) []HistoryEntry {
	out := make([]HistoryEntry, len(history))
	copy(out, history)
	stamped := map[string]bool{}
	for i := range out {
		e := &out[i]
		if e.Kind == KindPlanApproved {
			e.Content, e.Artifacts = "", nil
			continue
		}
		if e.Role == "assistant" {
			e.Artifacts = append([]artifact.Ref(nil), e.Artifacts...)
			for _, r := range e.Artifacts {
				stamped[r.ID] = true
			}
		}
	}
	arts := append([]artifact.Artifact(nil), produced...)
	sort.SliceStable(arts, func(i, j int) bool { return arts[i].CreatedAt.Before(arts[j].CreatedAt) })
	lastReply := -1
	for i := range out {
		e := &out[i]
		if e.Role != "assistant" || e.Content == "" || e.Kind == KindPlanApproved {
			continue
		}
		lastReply = i
		for _, a := range arts {
			if stamped[a.ID] || a.CreatedAt.After(e.At) {
				continue
			}
			e.Artifacts = append(e.Artifacts, a.Ref())
			stamped[a.ID] = true
		}
	}
	if final && lastReply >= 0 {
		for _, a := range arts {
			if !stamped[a.ID] {
				out[lastReply].Artifacts = append(out[lastReply].Artifacts, a.Ref())
				stamped[a.ID] = true
			}
		}
	}
	for i := range out {
		if len(out[i].Artifacts) == 0 {
			out[i].Artifacts = nil
		}
	}
	return out
}
