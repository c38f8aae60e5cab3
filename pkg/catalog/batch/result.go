package batch

import (
	"bytes"
	"encoding/json"
	"strings"
	"unicode/utf8"

	"github.com/clientagent/clientagent/pkg/record"
)

// Limits of a compact tool result, in characters (docs/design.md §3.5).
const (
	MaxSummary = 2000
	MaxResult  = 6000
	MaxInputs  = 2000
	MaxError   = 2000
)

// truncMarker ends a value that was cut.
const truncMarker = "…(truncated)"

// Truncate cuts s to at most n characters on a rune boundary, ending in a
// marker when it cut, so the value stays valid UTF-8 and valid JSON once
// serialized.
func Truncate(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	keep := n - utf8.RuneCountInString(truncMarker)
	if keep < 0 {
		keep = 0
	}
	i, count := 0, 0
	for i < len(s) && count < keep {
		_, size := utf8.DecodeRuneInString(s[i:])
		i += size
		count++
	}
	return strings.ToValidUTF8(s[:i], "") + truncMarker
}

// Compact applies the limits of docs/design.md §3.5 to r and adds what the model
// cannot see in its own tool call: when anything other than the model
// supplied an argument, "inputs" holds those arguments (or their JSON,
// truncated, when over the limit) and "input_sources" names the source of
// every argument. When the model supplied everything, neither is added;
// nor for ask_user, whose answers are its result.
func Compact(pc record.PendingCall, r record.ToolResult) record.ToolResult {
	r.Summary = Truncate(r.Summary, MaxSummary)
	r.Result = Truncate(r.Result, MaxResult)
	r.Error = Truncate(r.Error, MaxError)
	r.Inputs = nil
	r.InputSources = nil
	if pc.FilesNote != "" {
		// docs/design.md §3.5: a reply to a pending call names its files in that
		// call's result.
		r.Summary = strings.TrimSpace(Truncate(r.Summary, MaxSummary-utf8.RuneCountInString(pc.FilesNote)-1) + "\n" + pc.FilesNote)
	}

	if pc.Kind == record.KindAskUser {
		// Its user-supplied value is the answer, already the result.
		return r
	}
	sources := make(map[string]string, len(pc.Arguments))
	supplied := map[string]any{}
	for k, v := range pc.Arguments {
		src := pc.Sources[k]
		if src == "" {
			src = SourceModel
		}
		sources[k] = src
		if src != SourceModel {
			supplied[k] = v
		}
	}
	if len(supplied) == 0 {
		return r
	}
	r.InputSources = sources
	b := marshal(supplied)
	if utf8.RuneCount(b) > MaxInputs {
		b = marshal(Truncate(string(b), MaxInputs))
	}
	r.Inputs = b
	return r
}

// ResultFor is the immediate result of a call that does not run: invalid
// (the error for the model), rejected, not executed (superseded or
// expired), or an answered ask_user (the answers). For any other state it
// returns a failed result saying the call produced nothing.
func ResultFor(pc record.PendingCall) record.ToolResult {
	var r record.ToolResult
	switch pc.State {
	case record.CallInvalid:
		r = record.ToolResult{Status: record.ResultFailed, Error: pc.Error}
	case record.CallRejected:
		r = record.ToolResult{Status: record.ResultRejected, Summary: "The user rejected this call." + noteSuffix(pc.Note)}
	case record.CallNotExecuted:
		s := "This call was not executed."
		if pc.Note == "" {
			s += " The user moved on before it could run; call it again only if it is still wanted."
		}
		r = record.ToolResult{Status: record.ResultNotExecuted, Summary: s + noteSuffix(pc.Note)}
	case record.CallBlocked:
		r = record.ToolResult{Status: record.ResultBlocked, Error: "The policy guardian blocked this call; it did not run. Reason: " + pc.Note}
	case record.CallAnswered:
		r = record.ToolResult{Status: record.ResultAnswered, Result: string(marshal(pc.Arguments[AnswersKey])), Summary: pc.Note}
	default:
		r = record.ToolResult{Status: record.ResultFailed, Error: "the call produced no result (state " + string(pc.State) + ")"}
	}
	r.Summary = Truncate(r.Summary, MaxSummary)
	r.Result = Truncate(r.Result, MaxResult)
	r.Error = Truncate(r.Error, MaxError)
	return r
}

func noteSuffix(note string) string {
	note = strings.TrimSpace(note)
	if note == "" {
		return ""
	}
	return " Note: " + note
}

// Content is the compact JSON text of r, the content of its tool message.
func Content(r record.ToolResult) string {
	return string(marshal(r))
}

// marshal writes JSON without HTML escaping; values here are JSON trees,
// so it cannot fail.
func marshal(v any) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		b, _ := json.Marshal(err.Error())
		return b
	}
	return bytes.TrimRight(buf.Bytes(), "\n")
}
