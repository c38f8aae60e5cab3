package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/clientagent/clientagent/pkg/devstack"
	"github.com/clientagent/clientagent/pkg/llm/llmconfig"
)

// popelnaseModel is an OpenAI-compatible chat completions endpoint playing
// the Popelnase script as the peer kit's fakellm does: create_svg_artifact,
// then convert_svg_to_png on the SVG artifact its result names, then the
// answer. It counts completions and the tool results it could not use.
type popelnaseModel struct {
	completions, bad atomic.Int64
}

func (m *popelnaseModel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !strings.HasSuffix(r.URL.Path, "/chat/completions") {
		http.NotFound(w, r)
		return
	}
	var req struct {
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	n := m.completions.Add(1)
	last := 0
	for i, msg := range req.Messages {
		if msg.Role == "user" {
			last = i
		}
	}
	svgID, done := "", ""
	for _, msg := range req.Messages[last+1:] {
		if msg.Role != "tool" {
			continue
		}
		var text string
		if json.Unmarshal(msg.Content, &text) != nil {
			text = string(msg.Content)
		}
		var res struct {
			Artifacts []struct {
				ID   string `json:"artifact_id"`
				Mime string `json:"mime_type"`
			} `json:"artifacts"`
		}
		if json.Unmarshal([]byte(text), &res) != nil || len(res.Artifacts) == 0 {
			m.bad.Add(1)
		}
		for _, a := range res.Artifacts {
			switch {
			case strings.HasPrefix(a.Mime, "image/svg"):
				svgID, done = a.ID, "svg"
			case a.Mime == "image/png":
				done = "png"
			}
		}
	}
	msg := map[string]any{"role": "assistant", "content": nil}
	finish := "tool_calls"
	call := func(name, args string) []map[string]any {
		return []map[string]any{{"id": fmt.Sprintf("call_%d", n), "type": "function", "function": map[string]string{"name": name, "arguments": args}}}
	}
	switch done {
	case "":
		msg["tool_calls"] = call("create_svg_artifact", `{"word":"Popelnase"}`)
	case "svg":
		msg["tool_calls"] = call("convert_svg_to_png", fmt.Sprintf(`{"artifact_id":%q}`, svgID))
	default:
		msg["content"], finish = "Here is the PNG image with the word Popelnase.", "stop"
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"id": fmt.Sprintf("chatcmpl-%d", n), "object": "chat.completion", "created": time.Now().Unix(), "model": "fake",
		"choices": []map[string]any{{"index": 0, "message": msg, "finish_reason": finish}},
		"usage":   map[string]int{"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}})
}

// The driver against a stack with the fast specialists and an
// OpenAI-compatible model over HTTP, as `make bench-peers` runs it: every
// turn makes 3 model calls and 2 artifacts, the record's times are
// positive and never later than what a poll saw, and the stack's memory
// (this process) is read.
func TestRunAgainstFastStack(t *testing.T) {
	model, url, tok := fastStack(t)
	const turns, conc, warmup = 10, 3, 1
	r, err := Run(t.Context(), Options{BaseURL: url, Token: tok, Turns: turns, Concurrency: conc, Warmup: warmup, Poll: 2 * time.Millisecond, PIDs: []int{os.Getpid()}})
	if err != nil {
		t.Fatalf("Run() error = %v (report %+v)", err, r)
	}
	t.Logf("report: %+v", *r)
	if r.Peer != "clientagent" || r.Turns != turns || r.Concurrency != conc || r.Failed != 0 || r.FirstError != "" {
		t.Errorf("report = %+v, want clientagent, %d turns at %d, none failed", *r, turns, conc)
	}
	if r.LLMCallsPerTurn != 3 || r.ArtifactsPerTurn != 2 {
		t.Errorf("per turn: %v LLM calls, %v artifacts; want 3 and 2 (the fast SVG and PNG)", r.LLMCallsPerTurn, r.ArtifactsPerTurn)
	}
	if got, want := model.completions.Load(), int64(3*(turns+warmup)); got != want || model.bad.Load() != 0 {
		t.Errorf("the model served %d completions (%d unusable tool results), want %d and 0", got, model.bad.Load(), want)
	}
	if !(0 < r.P50Ms && r.P50Ms <= r.P99Ms && r.P99Ms < 30000) {
		t.Errorf("p50 %v ms, p99 %v ms: want 0 < p50 ≤ p99 < 30 s", r.P50Ms, r.P99Ms)
	}
	// A poll sees a turn end only after its record says it ended.
	if r.ClientP50Ms < r.P50Ms || r.ClientP99Ms < r.P99Ms || r.PollsPerTurn < 1 || r.PollMs != 2 {
		t.Errorf("client p50 %v, p99 %v ms with %v polls of %v ms, want ≥ the record's %v, %v and ≥ 1 poll of 2 ms", r.ClientP50Ms, r.ClientP99Ms, r.PollsPerTurn, r.PollMs, r.P50Ms, r.P99Ms)
	}
	// conc turns at once cannot take less than the p50 of a round each.
	if maxRate := float64(conc) * 1000 / r.P50Ms * 2; !(0 < r.TurnsPerS && r.TurnsPerS < maxRate) {
		t.Errorf("turns/s = %v, want in (0, %v)", r.TurnsPerS, maxRate)
	}
	if !(r.RSSMB > 1 && r.PeakRSSMB >= r.RSSMB) {
		t.Errorf("rss %v MB, peak %v MB: want > 1 and peak ≥ rss", r.RSSMB, r.PeakRSSMB)
	}
}

// fastStack starts a stack with the fast specialists and the scripted
// OpenAI-compatible model over HTTP; it returns the model, the API's URL
// and a token.
func fastStack(t *testing.T) (*popelnaseModel, string, string) {
	t.Helper()
	model := &popelnaseModel{}
	llmSrv := httptest.NewServer(model)
	t.Cleanup(llmSrv.Close)
	env := map[string]string{"CLIENTAGENT_LLM": "openai", "OPENAI_BASE_URL": llmSrv.URL + "/v1", "OPENAI_API_KEY": "x"}
	provider, _, err := llmconfig.FromEnv(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	st, err := devstack.StartFast(t.Context(), devstack.Config{Addr: "127.0.0.1:0", DataDir: t.TempDir(), LLM: provider})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	tok, err := st.Token("bench")
	if err != nil {
		t.Fatal(err)
	}
	return model, st.URL(), tok
}

// Issue 29: watched the way the page watches a turn (the event stream
// opened before the POST, closed at turn.ended), a turn is timed until its
// turn.ended arrived, which is never before its record says it ended, and
// no poll is made; the turns run one at a time after the burst are
// reported too.
func TestRunWatchedAgainstFastStack(t *testing.T) {
	model, url, tok := fastStack(t)
	const turns, conc, warmup, after = 6, 3, 1, 2
	r, err := Run(t.Context(), Options{BaseURL: url, Token: tok, Turns: turns, Concurrency: conc, Warmup: warmup, Watch: true, After: after})
	if err != nil {
		t.Fatalf("Run() error = %v (report %+v)", err, r)
	}
	t.Logf("report: %+v", *r)
	if !r.Watched || r.Failed != 0 || r.PollsPerTurn != 0 || r.PollMs != 0 {
		t.Errorf("report = %+v, want watched, none failed, no polls", *r)
	}
	if r.LLMCallsPerTurn != 3 || r.ArtifactsPerTurn != 2 {
		t.Errorf("per turn: %v LLM calls, %v artifacts; want 3 and 2", r.LLMCallsPerTurn, r.ArtifactsPerTurn)
	}
	if !(0 < r.P50Ms && r.P50Ms <= r.ClientP50Ms && r.P99Ms <= r.ClientP99Ms) {
		t.Errorf("record p50 %v, p99 %v; seen p50 %v, p99 %v: want 0 < record ≤ seen", r.P50Ms, r.P99Ms, r.ClientP50Ms, r.ClientP99Ms)
	}
	if r.AfterTurns != after || !(0 < r.AfterP50Ms && r.AfterP50Ms <= r.AfterClientP50Ms) {
		t.Errorf("after the burst: %d turns, p50 %v ms, seen %v ms; want %d turns, 0 < p50 ≤ seen", r.AfterTurns, r.AfterP50Ms, r.AfterClientP50Ms, after)
	}
	if got, want := model.completions.Load(), int64(3*(turns+warmup+after)); got != want {
		t.Errorf("the model served %d completions, want %d", got, want)
	}
}

// Turns that fail are counted, and a run where all fail is an error.
func TestRunCountsFailedTurns(t *testing.T) {
	t.Parallel()
	srv := oneTurnAPI(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{"status":"failed","reply":"the model is down","steps":[]}`))
	})
	r, err := Run(t.Context(), Options{BaseURL: srv.URL, Token: "t", Turns: 4, Concurrency: 2, Poll: time.Millisecond})
	if err == nil || r == nil || r.Failed != 4 || !strings.Contains(r.FirstError, "ended failed: the model is down") {
		t.Fatalf("Run() = %+v, %v; want 4 failed turns and an error", r, err)
	}
}

// A poll answered 503 (the store did not answer in time) is retried and
// counted, as the web page retries it; the turn still counts.
func TestRunRetriesUnavailablePolls(t *testing.T) {
	t.Parallel()
	var polls atomic.Int64
	srv := oneTurnAPI(t, func(w http.ResponseWriter, r *http.Request) {
		if polls.Add(1)%2 == 1 {
			w.Header().Set("Retry-After", "2")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"error":{"code":"store_unavailable"}}`))
			return
		}
		end := time.Now().UTC().Format(time.RFC3339Nano)
		fmt.Fprintf(w, `{"status":"succeeded","llm_calls":3,"artifacts":[{"artifact_id":"a"}],"steps":[{"tool":"llm","ended_at":%q}]}`, end)
	})
	r, err := Run(t.Context(), Options{BaseURL: srv.URL, Token: "t", Turns: 3, Concurrency: 1, Poll: time.Millisecond})
	if err != nil || r.Failed != 0 || r.Unavailable != 3 || r.PollsPerTurn != 2 || r.P50Ms <= 0 {
		t.Fatalf("Run() = %+v, %v; want 3 turns, 3 unavailable polls, 2 polls a turn", r, err)
	}
}

func TestQuantileAsThePeers(t *testing.T) {
	t.Parallel()
	ms := func(xs ...int) []time.Duration {
		var out []time.Duration
		for _, x := range xs {
			out = append(out, time.Duration(x)*time.Millisecond)
		}
		return out
	}
	tests := []struct {
		in   []time.Duration
		q    float64
		want float64
	}{
		{ms(5, 1, 3, 2, 4), 0.5, 3},
		{ms(1, 2, 3, 4), 0.5, 3}, // index ⌊0.5·4⌋ = 2, as times[Math.floor(p*n)]
		{ms(1, 2, 3, 4), 0.99, 4},
		{ms(7), 0.99, 7},
	}
	for _, tt := range tests {
		if got := quantile(tt.in, tt.q); got != tt.want {
			t.Errorf("quantile(%v, %v) = %v, want %v", tt.in, tt.q, got, tt.want)
		}
	}
}

// With the stack's process ids, the report gives the CPU time they spent
// during the timed rounds per turn, each and summed, and the driver's
// own: here one process is the stack and the driver, and each turn's
// poll burns 20 ms of CPU in it.
func TestRunReportsCPUPerTurn(t *testing.T) {
	srv := oneTurnAPI(t, func(w http.ResponseWriter, r *http.Request) {
		for start := time.Now(); time.Since(start) < 20*time.Millisecond; {
		}
		end := time.Now().UTC().Format(time.RFC3339Nano)
		fmt.Fprintf(w, `{"status":"succeeded","llm_calls":3,"steps":[{"tool":"llm","ended_at":%q}]}`, end)
	})
	const turns = 10
	r, err := Run(t.Context(), Options{BaseURL: srv.URL, Token: "t", Turns: turns, Concurrency: 1, Poll: time.Millisecond, PIDs: []int{os.Getpid(), os.Getpid()}})
	if err != nil {
		t.Fatal(err)
	}
	each := r.PIDCPUMsPerTurn
	if len(each) != 2 || each[0] < 10 || each[0] > 500 || each[1] < each[0]-10 || r.CPUMsPerTurn != round2(each[0]+each[1]) {
		t.Errorf("CPU per turn %v ms, each %v; want two of 10–500 ms, summed", r.CPUMsPerTurn, each)
	}
	if r.DriverCPUMsPerTurn < 10 || r.DriverCPUMsPerTurn > 500 {
		t.Errorf("the driver's CPU per turn = %v ms, want 10–500 (it is the stack too)", r.DriverCPUMsPerTurn)
	}
}

func TestStatCPU(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		stat string
		want int64
	}{
		{"4242 (clientagent) S 1 4242 4242 0 -1 4194560 123 0 0 0 150 37 0 0 20 0 9 0 100 0 0", 187},
		{"7 (a) b (c)) R 1 7 7 0 -1 0 0 0 0 0 5 6 0 0 20 0 1 0 1 0 0", 11}, // a command with spaces and parentheses
	} {
		if got, err := statCPU(tt.stat); err != nil || got != tt.want {
			t.Errorf("statCPU(%q) = %d, %v; want %d", tt.stat, got, err, tt.want)
		}
	}
	if _, err := statCPU("garbage"); err == nil {
		t.Error("statCPU(garbage) succeeded")
	}
}

// oneTurnAPI serves the API of one conversation c_1 with one turn t_1,
// whose view turn serves.
func oneTurnAPI(t *testing.T, turn http.HandlerFunc) *httptest.Server {
	api := http.NewServeMux()
	api.HandleFunc("POST /v1/conversations", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"conversation_id":"c_1"}`))
	})
	api.HandleFunc("POST /v1/conversations/c_1/messages", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusAccepted)
		_, _ = w.Write([]byte(`{"turn_id":"t_1","status":"running"}`))
	})
	api.HandleFunc("GET /v1/conversations/c_1/turns/t_1", turn)
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	return srv
}

// With the store's counts, the report gives the commands, the scripts
// and the scripts' server time per timed turn, from what the server
// counted between the timed rounds' start and end (`INFO commandstats`
// as redis-server 7 and Valkey print it; the INFO that reads it is not
// counted).
func TestRunReportsTheStoresWorkPerTurn(t *testing.T) {
	srv := oneTurnAPI(t, func(w http.ResponseWriter, r *http.Request) {
		end := time.Now().UTC().Format(time.RFC3339Nano)
		fmt.Fprintf(w, `{"status":"succeeded","llm_calls":3,"steps":[{"tool":"llm","ended_at":%q}]}`, end)
	})
	const turns = 4
	var reads int
	stats := func(context.Context) (string, error) {
		reads++
		n := 1 + (reads-1)*turns // each turn: n evalsha of 50 µs, 3n hset, an evalsha_ro of 20 µs
		return fmt.Sprintf("# Commandstats\r\ncmdstat_evalsha:calls=%d,usec=%d,usec_per_call=50.00,rejected_calls=0,failed_calls=0\r\n"+
			"cmdstat_hset:calls=%d,usec=%d,usec_per_call=1.00,rejected_calls=0,failed_calls=0\r\n"+
			"cmdstat_evalsha_ro:calls=%d,usec=%d,usec_per_call=20.00,rejected_calls=0,failed_calls=0\r\n"+
			"cmdstat_info:calls=%d,usec=%d,usec_per_call=9.00,rejected_calls=0,failed_calls=0\r\n",
			5*n, 250*n, 15*n, 15*n, n, 20*n, reads*1000, reads*9000), nil
	}
	r, err := Run(t.Context(), Options{BaseURL: srv.URL, Token: "t", Turns: turns, Concurrency: 1, Poll: time.Millisecond, StoreStats: stats})
	if err != nil {
		t.Fatal(err)
	}
	if reads != 2 {
		t.Errorf("the store's counts were read %d times, want 2 (before and after the timed rounds)", reads)
	}
	if r.StoreCommandsPerTurn != 21 || r.StoreScriptsPerTurn != 6 || r.StoreScriptUsPerTurn != 270 {
		t.Errorf("store per turn: %v commands, %v scripts, %v µs; want 21, 6, 270", r.StoreCommandsPerTurn, r.StoreScriptsPerTurn, r.StoreScriptUsPerTurn)
	}
	failing := func(context.Context) (string, error) { return "", errors.New("no store") }
	if _, err := Run(t.Context(), Options{BaseURL: srv.URL, Token: "t", Turns: 1, Concurrency: 1, Poll: time.Millisecond, StoreStats: failing}); err == nil {
		t.Error("Run with a store that does not answer = nil error, want its error")
	}
}
