package turn

import (
	"context"
	"errors"
	"net/url"
	"reflect"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/clientagent/clientagent/pkg/llm"
	"github.com/clientagent/clientagent/pkg/metrics"
	"github.com/clientagent/clientagent/pkg/record"
	"github.com/clientagent/clientagent/pkg/telemetry"
)

// Tracing (issue 16): a turn is one trace (pkg/telemetry). Each handler's
// work is a span named after its state, a child of the turn's root span
// whose traceparent the payload carries (Ref.Trace); the LLM call is a
// GenAI "chat" span, each tool call an "execute_tool" span, whose context
// the A2A request carries on; the user's wait is an AwaitUser span from the
// moment Await stored the token to the moment Validate applies the reply;
// and whatever ends the turn exports the root span and the turn's metrics.

// Attribute keys of ours (the GenAI conventions have no word for them).
const (
	attrConversation = attribute.Key("gen_ai.conversation.id")
	attrTurn         = attribute.Key("clientagent.turn.id")
	attrStatus       = attribute.Key("clientagent.status")
	attrNext         = attribute.Key("clientagent.next")
	attrFlavour      = attribute.Key("clientagent.llm.flavour")
	attrLLMCall      = attribute.Key("clientagent.llm.call")
	attrReply        = attribute.Key("clientagent.reply")
	attrCostUSD      = attribute.Key("clientagent.cost_usd")
	attrTokens       = attribute.Key("clientagent.tokens")
	attrLLMCalls     = attribute.Key("clientagent.llm_calls")
	attrSteps        = attribute.Key("clientagent.steps")
)

// agentName is gen_ai.agent.name of the turn's root span.
const agentName = "clientagent"

// startStep starts the span of one state of turn r (name: a telemetry.Span*
// constant): a child of the turn's root span. With tracing off it returns
// ctx and a no-op span, at no cost.
func (h *Handlers) startStep(ctx context.Context, r Ref, name string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	if !h.tracing().Enabled() {
		return ctx, trace.SpanFromContext(context.Background())
	}
	ctx = h.tracing().Remote(ctx, r.Trace)
	attrs = append(attrs, attrConversation.String(r.ConversationID), attrTurn.String(r.TurnID))
	return h.tracing().Tracer().Start(ctx, name, trace.WithAttributes(attrs...))
}

// endStep ends a step's span with the word it returns to the state machine
// or its error, named by type as Step Functions names it.
func endStep(span trace.Span, next string, err error) {
	if !span.IsRecording() {
		return
	}
	if next != "" {
		span.SetAttributes(attrNext.String(next))
	}
	if err != nil {
		span.SetAttributes(semconv.ErrorTypeKey.String(errorName(err)))
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// errorName is the error's type name, as aws-lambda-go reports it to Step
// Functions (the name a Retry or Catch matches).
func errorName(err error) string {
	t := reflect.TypeOf(err)
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Name() == "" {
		return "error"
	}
	return t.Name()
}

// chat makes the LLM call inside a GenAI "chat <model>" client span
// (semantic conventions for generative AI): the model, the token usage
// (cached input tokens too), the finish reason; the messages only when
// content capture is on.
func (h *Handlers) chat(ctx context.Context, req llm.Request, call int) (*llm.Response, error) {
	if !h.tracing().Enabled() {
		return h.complete(ctx, req)
	}
	ctx, span := h.tracing().Tracer().Start(ctx, "chat", trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
		semconv.GenAIOperationNameChat, attrFlavour.String(string(req.Flavour)), attrLLMCall.Int(call)))
	defer span.End()
	if h.tracing().Capture() {
		span.SetAttributes(semconv.GenAIInputMessagesKey.String(mustJSON(req.Messages)))
	}
	resp, err := h.complete(ctx, req)
	if err != nil {
		span.SetAttributes(semconv.ErrorTypeKey.String(llmErrorType(err)))
		span.SetStatus(codes.Error, err.Error())
		return resp, err
	}
	if resp == nil {
		return resp, err
	}
	if resp.Model != "" {
		span.SetName("chat " + resp.Model)
		span.SetAttributes(semconv.GenAIRequestModelKey.String(resp.Model), semconv.GenAIResponseModelKey.String(resp.Model))
	}
	// The provider's own finish reason does not reach llm.Response: a
	// response with tool calls stopped for them, any other stopped.
	finish := "stop"
	if len(resp.ToolCalls) > 0 {
		finish = "tool_calls"
	}
	span.SetAttributes(
		semconv.GenAIUsageInputTokensKey.Int(resp.Usage.InputTokens),
		semconv.GenAIUsageOutputTokensKey.Int(resp.Usage.OutputTokens),
		semconv.GenAIUsageCacheReadInputTokensKey.Int(resp.Usage.CachedInputTokens),
		semconv.GenAIResponseFinishReasonsKey.StringSlice([]string{finish}),
		attrCostUSD.Float64(float64(h.cost(resp))/1e6),
	)
	if h.tracing().Capture() {
		span.SetAttributes(semconv.GenAIOutputMessagesKey.String(mustJSON([]llm.Message{resp.AssistantMessage()})))
	}
	return resp, err
}

func llmErrorType(err error) string {
	switch {
	case errors.Is(err, llm.ErrRateLimited):
		return "rate_limited"
	case errors.Is(err, llm.ErrUnavailable):
		return "unavailable"
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	}
	return "provider_error"
}

// startTool starts the "execute_tool <tool>" span of call callID of tool,
// run by the specialist at agentURL (empty for a workflow, whose steps
// have their own).
func (h *Handlers) startTool(ctx context.Context, tool, callID, agentURL string, args map[string]any) (context.Context, trace.Span) {
	if !h.tracing().Enabled() {
		return ctx, trace.SpanFromContext(context.Background())
	}
	attrs := []attribute.KeyValue{semconv.GenAIOperationNameExecuteTool, semconv.GenAIToolNameKey.String(tool), semconv.GenAIToolCallIDKey.String(callID)}
	if agentURL != "" {
		attrs = append(attrs, semconv.URLFullKey.String(agentURL))
		if u, err := url.Parse(agentURL); err == nil && u.Hostname() != "" {
			attrs = append(attrs, semconv.ServerAddressKey.String(u.Hostname()))
			if p, err := strconv.Atoi(u.Port()); err == nil {
				attrs = append(attrs, semconv.ServerPortKey.Int(p))
			}
		}
	}
	if h.tracing().Capture() {
		attrs = append(attrs, semconv.GenAIToolCallArgumentsKey.String(mustJSON(args)))
	}
	return h.tracing().Tracer().Start(ctx, "execute_tool "+tool, trace.WithAttributes(attrs...))
}

// endTool ends a tool span with the call's outcome.
func (h *Handlers) endTool(span trace.Span, o record.CallOutcome) {
	if !span.IsRecording() {
		return
	}
	status := o.StepStatus()
	span.SetAttributes(attrStatus.String(status))
	if status == record.ResultFailed {
		span.SetAttributes(semconv.ErrorTypeKey.String("tool_failed"))
		span.SetStatus(codes.Error, o.Result.Error)
	}
	if h.tracing().Capture() {
		span.SetAttributes(semconv.GenAIToolCallResultKey.String(mustJSON(o.Result)))
	}
	span.End()
}

// awaitEnded records the user's wait of turn t, which ends now (how: the
// kind of reply), as the AwaitUser span: from the time Await stored the
// token (t.WaitingSince) to now. Call it before the wait is cleared.
func (h *Handlers) awaitEnded(ctx context.Context, r Ref, t *record.Turn, how string) {
	if !h.tracing().Enabled() || t.WaitingSince.IsZero() {
		return
	}
	tp := r.Trace
	if tp == "" {
		tp = t.Trace
	}
	ctx = h.tracing().Remote(ctx, tp)
	_, span := h.tracing().Tracer().Start(ctx, telemetry.SpanAwaitUser, trace.WithTimestamp(t.WaitingSince), trace.WithAttributes(
		attrConversation.String(r.ConversationID), attrTurn.String(r.TurnID), attrReply.String(how), attrStatus.String(string(t.Status))))
	span.End(trace.WithTimestamp(h.now()))
}

// replyKind names a reply for the AwaitUser span.
func replyKind(r *Reply) string {
	switch {
	case r == nil:
		return "none"
	case r.Superseded:
		return "superseded"
	case r.Expired:
		return "expired"
	case r.Approval != nil:
		return r.Approval.Decision
	}
	return "answers"
}

// turnEnded runs once when turn t reaches a final status (save): it logs
// the turn's figures as CloudWatch metrics (EMF) and exports the turn's
// root span, from its start to now.
func (h *Handlers) turnEnded(ctx context.Context, r Ref, t *record.Turn) {
	end := h.now()
	waited := t.Waited
	if !t.WaitingSince.IsZero() {
		// Ended while waiting (cancelled): the wait ends with it.
		h.awaitEnded(ctx, r, t, "ended")
		waited += end.Sub(t.WaitingSince)
	}
	duration := end.Sub(t.StartedAt)
	cost := float64(t.CostMicros) / 1e6
	h.log().InfoContext(ctx, "turn ended", append([]any{
		"conversation", r.ConversationID, "turn", t.ID, "status", string(t.Status), "llm_calls", t.LLMCalls,
		"tokens", t.Tokens, "cost_usd", cost, "steps", len(t.Steps), "duration_ms", duration.Milliseconds(),
	}, metrics.Values(map[string]string{"Status": string(t.Status)},
		metrics.Metric{Name: metrics.TurnEnded, Unit: "Count", Value: 1},
		metrics.Metric{Name: metrics.TurnTokens, Unit: "Count", Value: float64(t.Tokens)},
		metrics.Metric{Name: metrics.TurnCachedTokens, Unit: "Count", Value: float64(t.CachedTokens)},
		metrics.Metric{Name: metrics.TurnCostUSD, Unit: "None", Value: cost},
		metrics.Metric{Name: metrics.TurnLLMCalls, Unit: "Count", Value: float64(t.LLMCalls)},
		metrics.Metric{Name: metrics.TurnSteps, Unit: "Count", Value: float64(len(t.Steps))},
		metrics.Metric{Name: metrics.TurnDuration, Unit: "Milliseconds", Value: float64(duration.Milliseconds())},
		metrics.Metric{Name: metrics.TurnUserWait, Unit: "Milliseconds", Value: float64(waited.Milliseconds())},
	)...)...)
	if !h.tracing().Enabled() {
		return
	}
	tp := t.Trace
	if tp == "" {
		tp = r.Trace
	}
	failed := ""
	switch t.Status {
	case record.StatusFailed, record.StatusBlocked:
		failed = t.Error
		if failed == "" {
			failed = string(t.Status)
		}
	}
	h.tracing().EndTurn(ctx, tp, t.StartedAt, end, failed,
		semconv.GenAIOperationNameInvokeAgent, semconv.GenAIAgentNameKey.String(agentName),
		attrConversation.String(r.ConversationID), attrTurn.String(t.ID), attrStatus.String(string(t.Status)),
		attrLLMCalls.Int(t.LLMCalls), attrTokens.Int(t.Tokens), attrSteps.Int(len(t.Steps)), attrCostUSD.Float64(cost),
		semconv.GenAIUsageCacheReadInputTokensKey.Int(t.CachedTokens))
}
