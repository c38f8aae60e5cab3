package sfnlocal

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// HTTPHandler returns the Step Functions JSON 1.0 endpoint (POST /,
// X-Amz-Target: AWSStepFunctions.<Operation>) for StartExecution,
// DescribeExecution, StopExecution, GetExecutionHistory, SendTaskSuccess,
// SendTaskFailure and SendTaskHeartbeat, so the aws-sdk-go-v2 sfn client
// works against it through BaseEndpoint. Signatures are not checked: it is
// meant for loopback use only.
func (e *Engine) HTTPHandler() http.Handler {
	return http.HandlerFunc(e.serveHTTP)
}

func (e *Engine) serveHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		writeAPIError(w, http.StatusMethodNotAllowed, "ValidationException", "only POST is supported")
		return
	}
	op, ok := strings.CutPrefix(r.Header.Get("X-Amz-Target"), "AWSStepFunctions.")
	if !ok {
		writeAPIError(w, http.StatusBadRequest, errUnknownOperation.Code, "missing X-Amz-Target AWSStepFunctions.<Operation>")
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		writeAPIError(w, http.StatusBadRequest, "SerializationException", "read body: "+err.Error())
		return
	}
	var req struct {
		StateMachineArn string `json:"stateMachineArn"`
		ExecutionArn    string `json:"executionArn"`
		Name            string `json:"name"`
		Input           string `json:"input"`
		TaskToken       string `json:"taskToken"`
		Output          string `json:"output"`
		Error           string `json:"error"`
		Cause           string `json:"cause"`
		MaxResults      int    `json:"maxResults"`
		NextToken       string `json:"nextToken"`
		ReverseOrder    bool   `json:"reverseOrder"`
	}
	if len(body) > 0 {
		if err := json.Unmarshal(body, &req); err != nil {
			writeAPIError(w, http.StatusBadRequest, "SerializationException", "body is not JSON: "+err.Error())
			return
		}
	}
	ctx := r.Context()
	var resp any
	switch op {
	case "StartExecution":
		input := json.RawMessage(req.Input)
		if req.Input == "" {
			input = json.RawMessage("{}")
		}
		arn, start, err2 := e.StartExecution(ctx, req.StateMachineArn, req.Name, input)
		err = err2
		resp = map[string]any{"executionArn": arn, "startDate": epoch(start)}
	case "DescribeExecution":
		x, err2 := e.DescribeExecution(ctx, req.ExecutionArn)
		err = err2
		m := map[string]any{
			"executionArn": x.ExecutionArn, "stateMachineArn": x.StateMachineArn, "name": x.Name,
			"status": x.Status, "startDate": epoch(x.StartDate), "input": string(x.Input),
			"inputDetails": map[string]bool{"included": true},
		}
		if !x.StopDate.IsZero() {
			m["stopDate"] = epoch(x.StopDate)
		}
		if x.Output != nil {
			m["output"] = string(x.Output)
			m["outputDetails"] = map[string]bool{"included": true}
		}
		if x.Error != "" {
			m["error"] = x.Error
		}
		if x.Cause != "" {
			m["cause"] = x.Cause
		}
		resp = m
	case "StopExecution":
		stop, err2 := e.StopExecution(ctx, req.ExecutionArn, req.Error, req.Cause)
		err = err2
		resp = map[string]any{"stopDate": epoch(stop)}
	case "GetExecutionHistory":
		resp, err = e.historyPage(ctx, req.ExecutionArn, req.MaxResults, req.NextToken, req.ReverseOrder)
	case "SendTaskSuccess":
		err = e.SendTaskSuccess(ctx, req.TaskToken, json.RawMessage(req.Output))
		resp = struct{}{}
	case "SendTaskFailure":
		err = e.SendTaskFailure(ctx, req.TaskToken, req.Error, req.Cause)
		resp = struct{}{}
	case "SendTaskHeartbeat":
		err = e.SendTaskHeartbeat(ctx, req.TaskToken)
		resp = struct{}{}
	default:
		writeAPIError(w, http.StatusBadRequest, errUnknownOperation.Code, fmt.Sprintf("operation %s is not supported by sfnlocal", op))
		return
	}
	if err != nil {
		code := apiCode(err)
		if code == "" {
			e.log.ErrorContext(ctx, "sfn api", "op", op, "err", err)
			writeAPIError(w, http.StatusInternalServerError, "InternalServerError", "internal error")
			return
		}
		writeAPIError(w, http.StatusBadRequest, code, err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	_ = json.NewEncoder(w).Encode(resp)
}

func (e *Engine) historyPage(ctx context.Context, execArn string, maxResults int, next string, reverse bool) (any, error) {
	events, err := e.History(ctx, execArn)
	if err != nil {
		return nil, err
	}
	if reverse {
		for i, j := 0, len(events)-1; i < j; i, j = i+1, j-1 {
			events[i], events[j] = events[j], events[i]
		}
	}
	start := 0
	if next != "" {
		n, err := strconv.Atoi(next)
		if err != nil || n < 0 || n > len(events) {
			return nil, apiErr(&APIError{Code: "InvalidToken"}, "bad nextToken")
		}
		start = n
	}
	if maxResults <= 0 || maxResults > 1000 {
		maxResults = 100
	}
	end := min(start+maxResults, len(events))
	resp := map[string]any{"events": events[start:end]}
	if end < len(events) {
		resp["nextToken"] = strconv.Itoa(end)
	}
	return resp, nil
}

func writeAPIError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	w.Header().Set("X-Amzn-ErrorType", code)
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"__type": code, "message": msg})
}
