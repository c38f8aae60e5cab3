package turn

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/clientagent/clientagent/pkg/llm"
	"github.com/clientagent/clientagent/pkg/record"
)

// InterruptedMark ends the assistant message of an answer the user
// stopped, so the model's next window tells it the answer was cut short.
const InterruptedMark = "\n\n[interrupted: the user stopped this answer here]"

// stoppedCall is the LLM call a cancel interrupted: when it started and
// the text it had streamed by then.
type stoppedCall struct {
	started time.Time
	text    string
}

// maxStoppedEvents bounds how much of the event log a cancel reads for
// the interrupted answer's text.
const maxStoppedEvents = 20000

// inflightLLM finds, in the conversation's event log, the LLM call of
// turn t that had started and has no step in t: the call a cancel
// interrupts. Its text is what the page was shown (the llm.delta events),
// so the answer the user stopped is the one kept. The event log is a
// convenience: when it cannot be read, nothing is kept.
func (h *Handlers) inflightLLM(ctx context.Context, r Ref, t *record.Turn) (*stoppedCall, bool) {
	log := h.events()
	if !log.Enabled() {
		return nil, false
	}
	rows := 0
	for _, s := range t.Steps {
		if s.Tool == "llm" {
			rows++
		}
	}
	after := fmt.Sprintf("%d-0", t.StartedAt.UnixMilli())
	var (
		call    int
		started time.Time
		text    []rune
	)
	for read := 0; read < maxStoppedEvents; {
		evs, err := log.Events(ctx, r.ConversationID, after, 1000, 0)
		if err != nil {
			h.log().WarnContext(ctx, "the stopped answer's text could not be read", "conversation", r.ConversationID, "turn", t.ID, "error", err.Error())
			return nil, false
		}
		for _, ev := range evs {
			if ev.TurnID != t.ID {
				continue
			}
			if ev.Type != record.EventStepStarted && ev.Type != record.EventLLMDelta {
				continue
			}
			data := ev.Fields()
			n := intData(data, "llm_call")
			switch {
			case ev.Type == record.EventStepStarted && data["tool"] == "llm" && n > call:
				call, started, text = n, ev.At, nil
			case ev.Type == record.EventLLMDelta && n == call && call > 0:
				// offset is where the chunk starts, in code points: a
				// retried call starts again at 0.
				if off := intData(data, "offset"); off >= 0 && off < len(text) {
					text = text[:off]
				}
				s, _ := data["text"].(string)
				text = append(text, []rune(s)...)
			}
		}
		read += len(evs)
		if len(evs) < 1000 {
			break
		}
		after = evs[len(evs)-1].ID
	}
	if call == 0 || call <= rows {
		return nil, false
	}
	return &stoppedCall{started: started, text: string(text)}, true
}

func intData(d map[string]any, key string) int {
	switch v := d[key].(type) {
	case float64:
		return int(v)
	case int:
		return v
	case string:
		n, err := strconv.Atoi(v)
		if err == nil {
			return n
		}
	}
	return -1
}

// keepStopped records the interrupted LLM call in the cancelled turn t:
// its step (status stopped; the Turn view gives it the call's spend once
// the provider has answered, see stoppedSpend), and the text streamed so
// far as the turn's partial reply, in its history and, marked
// interrupted, as an assistant message of its transcript, so the model's
// next window sees what the user saw.
func (h *Handlers) keepStopped(t *record.Turn, s *stoppedCall) {
	t.Steps = append(t.Steps, record.Step{Tool: "llm", Status: record.StepStopped, StartedAt: s.started, EndedAt: h.now()})
	if s.text == "" {
		return
	}
	t.Partial = s.text
	t.Messages = append(t.Messages, llm.Message{Role: llm.RoleAssistant, Content: s.text + InterruptedMark})
	t.History = append(t.History, record.HistoryEntry{Role: "assistant", Kind: "message", Status: record.StepStopped, Content: s.text, At: h.now()})
}
