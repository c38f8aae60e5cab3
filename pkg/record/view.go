package record

import (
	"encoding/json"
	"sort"
	"unicode/utf8"

	"github.com/clientagent/clientagent/pkg/artifact"
	"github.com/clientagent/clientagent/pkg/llm"
)

// DefaultWindow is the transcript window of docs/design.md §3.6: at most this many
// entries of llm_messages go to the model.
const DefaultWindow = 80

// TitleLimit is the longest title derived from a first user text, in runes.
const TitleLimit = 80

// Placeholder results for a call without a stored result (docs/design.md §3.4a,
// docs/design.md §4). They are compact ToolResult JSON like every other result
// (TestPlaceholderResultsAreToolResults), and each says what is true of the
// call. Constants rather than encoded at start: a package initialiser is
// part of every function's cold start.
const (
	notExecutedResult  = `{"status":"not_executed","summary":"This call was not executed."}`
	stillRunningResult = `{"status":"not_executed","summary":"This call is still running in another turn; its result will appear later."}`
	waitingResult      = `{"status":"not_executed","summary":"This call is waiting for the user's answer in another turn; it may never run."}`
	// A call that had started when its turn was cancelled runs to its end;
	// until its result is recorded, the model must not think it did not run.
	runningAfterCancelResult = `{"status":"running","summary":"This call had started when its turn was cancelled and is still running; its result will appear when it ends. Do not assume it did not run."}`
)

// CallRunningStatus is the status of the placeholder result of a call
// still running after its turn was cancelled (CallRunning).
const CallRunningStatus = "running"

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

// SortTurns orders turns by StartedAt, then id (docs/design.md §3.4a: blocks ordered
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

// Superseded maps each turn another turn replaces (Turn.Supersedes) to
// the turn that replaces it.
func (c *Conversation) Superseded() map[string]string {
	out := map[string]string{}
	for _, t := range c.Turns {
		if t.Supersedes != "" {
			out[t.Supersedes] = t.ID
		}
	}
	return out
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

// LLMView is the transcript the LLM call of turn turnID sees (docs/design.md §3.4a
// llm_view, docs/design.md §4): every other turn's block ordered by start, then
// this turn's own block last, so a model working on this turn never gets
// another turn's newer request as the last word. It repairs the merged
// transcript so that every provider accepts it:
//
//   - each assistant tool call is directly followed by its result, results
//     of one message in call order;
//   - a call without a result gets a placeholder that says what is true:
//     "still running in another turn" while the owning turn runs it,
//     "waiting for the user's answer in another turn" while it waits for a
//     form or approval, else "not executed";
//   - results without a call, a second result for one call id, repeated
//     call ids, system messages and empty assistant messages are dropped.
//
// Calls and results are matched within their turn's block first: a batch
// is appended to the block of the turn that made it, so one turn's ids can
// never hide another turn's call or result, whichever was stored first
// (stored ids also carry their turn, see turn.CallID). A result stored in
// a block without its call goes to the first call with its id that has no
// result of its own.
//
// A blocked turn (the guardian blocked its message, what the model wrote,
// or its workflow call) contributes only BlockedText as its user message.
//
// Then the window of docs/design.md §3.6 applies (window <= 0: none): when the view
// has more than window entries the oldest are dropped, cutting only where a
// user message starts and never inside this turn's block, so no result is
// orphaned and this turn's user message is always kept.
func (c *Conversation) LLMView(turnID string, window int) []llm.Message {
	view, _ := c.LLMWindow(turnID, window)
	return view
}

// LLMWindow is LLMView with the turn where its window starts ("" when
// nothing is cut). Issue 18: the cut moves in steps, so the transcript's
// start — the part of a request a provider can serve from its prompt cache
// — stays the same from call to call: the window keeps starting at
// c.WindowFrom while at most window entries follow it; past that it is cut
// again at the first turn that leaves at most three quarters of the window,
// a quarter of the window of room to grow before the next cut.
func (c *Conversation) LLMWindow(turnID string, window int) ([]llm.Message, string) {
	ordered := make([]*Turn, 0, len(c.Turns))
	var self *Turn
	replaced := c.Superseded()
	for _, t := range c.Turns {
		if t.ID == turnID && self == nil {
			self = t
			continue
		}
		if replaced[t.ID] != "" {
			continue // an edited or regenerated message replaced it
		}
		ordered = append(ordered, t)
	}
	SortTurns(ordered)
	if self != nil {
		ordered = append(ordered, self)
	}

	// Each turn's own results by call id (the first stored copy), and the
	// results stored in a block that has no call with their id (docs/design.md
	// §3.4a: a batch resumed in a later turn), which a call of any turn
	// without a result of its own may take.
	own := make(map[*Turn]map[string]string, len(ordered))
	moved := map[string]string{}
	for _, t := range ordered {
		calls := map[string]bool{}
		for _, m := range t.Messages {
			for _, tc := range m.ToolCalls {
				calls[tc.ID] = true
			}
		}
		results := map[string]string{}
		for _, m := range t.Messages {
			if m.Role != llm.RoleTool || m.ToolCallID == "" {
				continue
			}
			into := results
			if !calls[m.ToolCallID] {
				into = moved
			}
			if _, ok := into[m.ToolCallID]; !ok {
				into[m.ToolCallID] = m.Content
			}
		}
		own[t] = results
	}

	var view []llm.Message
	var owners []string // the turn of each view entry
	selfStart := -1
	for _, t := range ordered {
		if t == self {
			selfStart = len(view)
		}
		if t.Status == StatusBlocked && t != self {
			// A blocked turn is never replayed: neither the message the
			// guardian blocked, nor calls and answers made from it, even as
			// stored before blocked messages were forgotten.
			view = append(view, llm.Message{Role: llm.RoleUser, Content: BlockedText})
			owners = append(owners, t.ID)
			continue
		}
		results := own[t]
		seen := map[string]bool{} // call ids of this turn already placed
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
					r, ok := results[tc.ID]
					if !ok {
						r, ok = moved[tc.ID]
						delete(moved, tc.ID)
					}
					if !ok {
						r = placeholder(t, tc.ID, t == self)
					}
					view = append(view, llm.ToolResultMessage(tc.ID, r))
				}
			}
			// System messages and tool results are not copied: results are
			// placed after their calls above, system text is the prompt's.
		}
		for len(owners) < len(view) {
			owners = append(owners, t.ID)
		}
	}
	if selfStart < 0 {
		selfStart = len(view)
	}
	from := windowStart(view, owners, selfStart, window, c.WindowFrom)
	anchor := ""
	if from > 0 {
		anchor = owners[from]
	}
	return uniqueIDs(view[from:], owners[from:]), anchor
}

// uniqueIDs gives every call of view an id no earlier call of the view has:
// providers want each id once per transcript, and records from before ids
// carried their turn may share one. A repeated id is shown with its turn's
// id appended, on the call and its result alike. It works on the windowed
// view, so a turn's view does not depend on turns the window left out.
func uniqueIDs(view []llm.Message, owners []string) []llm.Message {
	used := map[string]bool{}
	renamed := map[string]string{} // owner+"\x00"+id → shown id
	for i := range view {
		m := &view[i]
		if len(m.ToolCalls) > 0 {
			calls := make([]llm.ToolCall, len(m.ToolCalls))
			copy(calls, m.ToolCalls)
			for k := range calls {
				id := calls[k].ID
				if used[id] {
					calls[k].ID = id + "_" + owners[i]
					renamed[owners[i]+"\x00"+id] = calls[k].ID
				}
				used[calls[k].ID] = true
			}
			m.ToolCalls = calls
		}
		if m.Role == llm.RoleTool {
			if shown, ok := renamed[owners[i]+"\x00"+m.ToolCallID]; ok {
				m.ToolCallID = shown
			}
		}
	}
	return view
}

// placeholder is the result shown for call id of turn owner, which has no
// stored result. The turn whose view it is sees its own calls only after
// their results are appended, so for it a missing result means not executed.
func placeholder(owner *Turn, id string, isSelf bool) string {
	for _, p := range owner.Pending {
		if p.CallID == id && p.State == CallRunning {
			return runningAfterCancelResult
		}
	}
	switch {
	case isSelf || owner.Status.Final():
		return notExecutedResult
	case owner.Status.Waiting():
		return waitingResult
	}
	for _, p := range owner.Pending {
		if p.CallID != id {
			continue
		}
		switch p.State {
		case CallNeedsInput, CallNeedsApproval:
			return waitingResult
		case CallReady:
			return stillRunningResult
		}
		return notExecutedResult
	}
	// A running turn whose batch is not validated yet.
	return stillRunningResult
}

// windowStart is where the window of docs/design.md §3.6 cuts view (window <= 0:
// none), always at a turn's user message at or before selfStart: at the
// start of turn anchor while at most window entries remain from there,
// else at the first turn start leaving at most 3/4 of the window (so the
// next cuts are a quarter of the window apart, issue 18), else at the first
// leaving at most window. When no cut is short enough, it keeps from the
// last allowed one, so this turn's block stays whole.
func windowStart(view []llm.Message, owners []string, selfStart, window int, anchor string) int {
	if window <= 0 || len(view) <= window {
		return 0
	}
	var starts []int
	for i := 0; i <= selfStart && i < len(view); i++ {
		if view[i].Role == llm.RoleUser && (i == 0 || owners[i] != owners[i-1] || view[i-1].Role != llm.RoleUser) {
			starts = append(starts, i)
		}
	}
	if anchor != "" {
		for _, i := range starts {
			if owners[i] == anchor && len(view)-i <= window {
				return i
			}
		}
	}
	for _, keep := range []int{window - window/4, window} {
		for _, i := range starts {
			if len(view)-i <= keep {
				return i
			}
		}
	}
	if len(starts) == 0 {
		return 0
	}
	return starts[len(starts)-1]
}

// RecentSkillInputs is recent_skill_inputs (docs/design.md §3.5): for each tool, the
// inputs of its newest succeeded call, taken from the tool_inputs of the
// conversation_history entries of every turn, so they outlive the
// transcript window. The store keeps them as a summary updated on each
// write (Conversation.Inputs), merged here with the turns that were read.
// Newest is by entry time, then turn order.
func (c *Conversation) RecentSkillInputs() map[string]map[string]any {
	best := map[string]SkillInputs{}
	for tool, in := range c.Inputs {
		best[tool] = in
	}
	turns := append([]*Turn(nil), c.Turns...)
	SortTurns(turns)
	for _, t := range turns {
		for tool, in := range t.NewestInputs() {
			if b, ok := best[tool]; ok && in.At.Before(b.At) {
				continue
			}
			best[tool] = in
		}
	}
	out := make(map[string]map[string]any, len(best))
	for tool, b := range best {
		out[tool] = b.Inputs
	}
	return out
}

// NewestInputs are, per tool, the inputs of t's newest succeeded call, from
// its conversation_history entries (the evidence of docs/design.md §3.5).
func (t *Turn) NewestInputs() map[string]SkillInputs {
	out := map[string]SkillInputs{}
	for _, h := range t.History {
		if h.Status != ResultSucceeded || h.Tool == "" || len(h.ToolInputs) == 0 {
			continue
		}
		if b, ok := out[h.Tool]; ok && h.At.Before(b.At) {
			continue
		}
		out[h.Tool] = SkillInputs{At: h.At, Inputs: h.ToolInputs}
	}
	return out
}

// ViewSize is how many entries t's block adds to the LLM view: its user
// and assistant messages and one result per call (LLMView's repair gives
// every call exactly one). The store keeps it beside the turn, so a step
// reads back only the turns its window needs.
func (t *Turn) ViewSize() int {
	n := 0
	for _, m := range t.Messages {
		switch m.Role {
		case llm.RoleUser, llm.RoleAssistant:
			n += 1 + len(m.ToolCalls)
		}
	}
	return n
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
// produced artifacts stamped onto the reply they restore with (docs/design.md §3.4a
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

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}
