// Package smoke checks a deployment of clientagent end to end through its
// public HTTP API (docs/api/openapi.yaml), as a user would after `make deploy`: a
// conversation, its live events (through the delivery GET /v1/info names:
// AppSync Events or Server-Sent Events), the Popelnase turn, a form, an approval and a rejection, an
// artifact downloaded as the web page does (a JSON link fetched without the
// token, from the page's origin), and the conversation's deletion. It
// prints one pass/fail line per step. It speaks only HTTP (its vocabulary
// is pkg/wire); it must not import the server's packages.
package smoke

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/clientagent/clientagent/pkg/wire"
)

// Config says where and how to check.
type Config struct {
	URL   string // the API's base URL (…/v1 is appended)
	Token string // a bearer token
	// Origin is the web page's origin (e.g. https://chat.example.com): the
	// API's CORS answer and the artifact link are checked from it. Empty:
	// the page is served by the API itself (the local stack).
	Origin string
	// TurnTimeout bounds each turn (default 2 minutes: a real model).
	TurnTimeout time.Duration
	Out         io.Writer
	HTTP        *http.Client
}

// Result counts the steps.
type Result struct {
	Passed, Failed int
}

// Run runs every step in order and reports each; a step that fails is
// reported and the steps that depend on it are skipped as failed. The
// returned error is non-nil when any step failed.
func Run(ctx context.Context, cfg Config) (Result, error) {
	if cfg.HTTP == nil {
		cfg.HTTP = &http.Client{Timeout: 30 * time.Second}
	}
	if cfg.TurnTimeout <= 0 {
		cfg.TurnTimeout = 2 * time.Minute
	}
	if cfg.Out == nil {
		cfg.Out = io.Discard
	}
	s := &run{cfg: cfg, base: strings.TrimRight(cfg.URL, "/") + "/v1"}
	var res Result
	step := func(name string, f func(context.Context) (string, error)) bool {
		start := time.Now()
		detail, err := f(ctx)
		took := time.Since(start).Round(time.Millisecond)
		if err != nil {
			res.Failed++
			fmt.Fprintf(cfg.Out, "FAIL %-22s %s (%s)\n", name, err, took)
			return false
		}
		res.Passed++
		fmt.Fprintf(cfg.Out, "ok   %-22s %s (%s)\n", name, detail, took)
		return true
	}
	if !step("create conversation", s.create) {
		return res, errors.New("smoke: the API refused to create a conversation")
	}
	step("live events", s.live)
	step("popelnase turn", s.popelnase)
	step("form", s.form)
	step("approve", func(ctx context.Context) (string, error) { return s.approval(ctx, "approve") })
	step("reject", func(ctx context.Context) (string, error) { return s.approval(ctx, "reject") })
	step("download artifact", s.download)
	step("delete conversation", s.delete)
	fmt.Fprintf(cfg.Out, "%d passed, %d failed\n", res.Passed, res.Failed)
	if res.Failed > 0 {
		return res, fmt.Errorf("smoke: %d of %d steps failed", res.Failed, res.Passed+res.Failed)
	}
	return res, nil
}

type run struct {
	cfg  Config
	base string
	cid  string
	png  string // artifact id of the Popelnase PNG
}

func (s *run) do(ctx context.Context, method, path string, body any, out any) (int, http.Header, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, s.base+path, rd)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+s.cfg.Token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if s.cfg.Origin != "" {
		req.Header.Set("Origin", s.cfg.Origin)
	}
	resp, err := s.cfg.HTTP.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if resp.StatusCode >= 300 {
		return resp.StatusCode, resp.Header, fmt.Errorf("%s %s = %d: %s", method, path, resp.StatusCode, trim(b))
	}
	if out != nil && len(b) > 0 {
		if err := json.Unmarshal(b, out); err != nil {
			return resp.StatusCode, resp.Header, fmt.Errorf("%s %s: decode %s: %w", method, path, trim(b), err)
		}
	}
	return resp.StatusCode, resp.Header, nil
}

func trim(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}

func (s *run) create(ctx context.Context) (string, error) {
	if s.cfg.Origin != "" {
		if err := s.preflight(ctx); err != nil {
			return "", err
		}
	}
	var out struct {
		ID string `json:"conversation_id"`
	}
	if _, _, err := s.do(ctx, "POST", "/conversations", map[string]any{"title": "smoke"}, &out); err != nil {
		return "", err
	}
	if out.ID == "" {
		return "", errors.New("no conversation_id")
	}
	s.cid = out.ID
	return out.ID, nil
}

// preflight is the browser's CORS preflight of the page's first call.
func (s *run) preflight(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, "OPTIONS", s.base+"/conversations", nil)
	if err != nil {
		return err
	}
	req.Header.Set("Origin", s.cfg.Origin)
	req.Header.Set("Access-Control-Request-Method", "POST")
	req.Header.Set("Access-Control-Request-Headers", "authorization,content-type")
	resp, err := s.cfg.HTTP.Do(req)
	if err != nil {
		return fmt.Errorf("CORS preflight: %w", err)
	}
	resp.Body.Close()
	if got := resp.Header.Get("Access-Control-Allow-Origin"); got != s.cfg.Origin {
		return fmt.Errorf("CORS preflight from %s: Access-Control-Allow-Origin = %q", s.cfg.Origin, got)
	}
	return nil
}

// send posts text and waits for the turn to leave running.
func (s *run) send(ctx context.Context, text string) (wire.Turn, error) {
	var out struct {
		TurnID string `json:"turn_id"`
	}
	if _, _, err := s.do(ctx, "POST", "/conversations/"+s.cid+"/messages", map[string]any{"text": text}, &out); err != nil {
		return wire.Turn{}, err
	}
	return s.wait(ctx, out.TurnID)
}

func (s *run) wait(ctx context.Context, tid string) (wire.Turn, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.TurnTimeout)
	defer cancel()
	delay := 100 * time.Millisecond
	for {
		var v wire.Turn
		code, h, err := s.do(ctx, "GET", "/conversations/"+s.cid+"/turns/"+tid, nil, &v)
		switch {
		case code == http.StatusServiceUnavailable:
			// The store is unavailable: wait as long as the API asks.
			if d, perr := time.ParseDuration(h.Get("Retry-After") + "s"); perr == nil {
				delay = d
			}
		case err != nil:
			return v, err
		case v.Status != "running":
			return v, nil
		}
		select {
		case <-ctx.Done():
			return v, fmt.Errorf("turn %s still %s after %s", tid, v.Status, s.cfg.TurnTimeout)
		case <-time.After(delay):
		}
		delay = min(delay*3/2, 2*time.Second)
	}
}

func (s *run) popelnase(ctx context.Context) (string, error) {
	v, err := s.send(ctx, "Create a PNG image with the word Popelnase")
	if err != nil {
		return "", err
	}
	if v.Status != "succeeded" {
		return "", fmt.Errorf("turn %s %s: %s", v.TurnID, v.Status, v.Reply)
	}
	for _, a := range v.Artifacts {
		if a.MimeType == "image/png" {
			s.png = a.ID
			return "PNG " + a.ID, nil
		}
	}
	return "", fmt.Errorf("turn %s succeeded without a PNG (%d artifacts)", v.TurnID, len(v.Artifacts))
}

func (s *run) form(ctx context.Context) (string, error) {
	v, err := s.send(ctx, "Design a valve flange with 4 holes")
	if err != nil {
		return "", err
	}
	if v.Status != "awaiting_input" || v.Form == nil || len(v.Form.Calls) == 0 {
		return "", fmt.Errorf("turn %s is %s without a form: %s", v.TurnID, v.Status, v.Reply)
	}
	answers := map[string]any{}
	for _, c := range v.Form.Calls {
		fields := map[string]any{}
		for _, f := range c.Fields {
			val := "steel"
			if len(f.Enum) > 0 {
				val = f.Enum[0]
			}
			fields[f.Name] = val
		}
		answers[c.CallID] = fields
	}
	if _, _, err := s.do(ctx, "POST", "/conversations/"+s.cid+"/turns/"+v.TurnID+"/input", map[string]any{"answers": answers}, nil); err != nil {
		return "", err
	}
	v, err = s.wait(ctx, v.TurnID)
	if err != nil {
		return "", err
	}
	if v.Status != "succeeded" {
		return "", fmt.Errorf("turn %s %s after the answer: %s", v.TurnID, v.Status, v.Reply)
	}
	return "answered, turn succeeded", nil
}

func (s *run) approval(ctx context.Context, decision string) (string, error) {
	v, err := s.send(ctx, "Publish it to web")
	if err != nil {
		return "", err
	}
	if v.Status != "awaiting_approval" || v.Approval == nil || v.Approval.ID == "" {
		return "", fmt.Errorf("turn %s is %s without an approval: %s", v.TurnID, v.Status, v.Reply)
	}
	body := map[string]any{"approval": map[string]any{"id": v.Approval.ID, "decision": decision, "note": "smoke"}}
	if _, _, err := s.do(ctx, "POST", "/conversations/"+s.cid+"/turns/"+v.TurnID+"/input", body, nil); err != nil {
		return "", err
	}
	v, err = s.wait(ctx, v.TurnID)
	if err != nil {
		return "", err
	}
	if v.Status != "succeeded" {
		return "", fmt.Errorf("turn %s %s after %s: %s", v.TurnID, v.Status, decision, v.Reply)
	}
	return strings.TrimSuffix(decision, "e") + "ed, turn succeeded", nil
}

// download fetches the PNG as the web page does: its link as JSON
// (?redirect=false), then the link without the token, from the page's
// origin.
func (s *run) download(ctx context.Context) (string, error) {
	if s.png == "" {
		return "", errors.New("no PNG from the Popelnase step")
	}
	var link struct {
		URL string `json:"url"`
	}
	_, h, err := s.do(ctx, "GET", "/conversations/"+s.cid+"/artifacts/"+s.png+"?redirect=false", nil, &link)
	if err != nil {
		return "", err
	}
	if s.cfg.Origin != "" {
		if got := h.Get("Access-Control-Allow-Origin"); got != s.cfg.Origin {
			return "", fmt.Errorf("artifact link from %s: Access-Control-Allow-Origin = %q", s.cfg.Origin, got)
		}
	}
	if link.URL == "" {
		return "", errors.New("the artifact link has no url")
	}
	if strings.HasPrefix(link.URL, "/") {
		link.URL = strings.TrimRight(s.cfg.URL, "/") + link.URL
	}
	req, err := http.NewRequestWithContext(ctx, "GET", link.URL, nil)
	if err != nil {
		return "", err
	}
	if s.cfg.Origin != "" {
		req.Header.Set("Origin", s.cfg.Origin)
	}
	resp, err := s.cfg.HTTP.Do(req)
	if err != nil {
		return "", fmt.Errorf("GET the artifact link: %w", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 20<<20))
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET the artifact link = %d: %s", resp.StatusCode, trim(b))
	}
	if s.cfg.Origin != "" {
		if got := resp.Header.Get("Access-Control-Allow-Origin"); got != s.cfg.Origin && got != "*" {
			return "", fmt.Errorf("the artifact link's CORS from %s: Access-Control-Allow-Origin = %q", s.cfg.Origin, got)
		}
	}
	if !bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")) {
		return "", fmt.Errorf("the artifact is not a PNG (%d bytes)", len(b))
	}
	return fmt.Sprintf("%d bytes of PNG", len(b)), nil
}

func (s *run) delete(ctx context.Context) (string, error) {
	if _, _, err := s.do(ctx, "DELETE", "/conversations/"+s.cid, nil, nil); err != nil {
		return "", err
	}
	code, _, _ := s.do(ctx, "GET", "/conversations/"+s.cid, nil, nil)
	if code != http.StatusNotFound {
		return "", fmt.Errorf("GET after DELETE = %d, want 404", code)
	}
	return "deleted", nil
}
