// Package bench drives turns through the HTTP API for the comparison with
// the peer frameworks (`clientagent bench`, `make bench-peers`,
// docs/benchmarks.md): N turns, C at a time, each in a new conversation,
// timed from the POST of its message to its end, as its record tells it
// and as the client saw it: the turn.ended event on the conversation's
// event stream, opened before the POST and closed at turn.ended the way
// the web page does (or, with Watch off, a poll of the turn). It only speaks the API
// (and reads the stack's memory from /proc); it starts nothing.
package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/clientagent/clientagent/pkg/wire"
)

// Options configures a run. BaseURL, Token, Turns and Concurrency are required.
type Options struct {
	// BaseURL is the API's base URL (the part before /v1/).
	BaseURL string
	// Token is a bearer token of the API.
	Token string
	// Turns is how many timed turns to run; Concurrency how many at once.
	Turns, Concurrency int
	// Warmup turns run one at a time before the timed ones (the peers run 5).
	Warmup int
	// Watch times each turn the way the page sees it: the conversation's
	// event stream is opened before the POST and closed at the turn's
	// turn.ended, and the turn's view is read once after. Without it the
	// view is polled every Poll (default 5 ms) until the turn has ended.
	Watch bool
	Poll  time.Duration
	// After runs this many more turns one at a time once the timed rounds
	// are done, on the same stack (the c=1 figure after a burst).
	After int
	// Text is the user message (default the Popelnase request).
	Text string
	// PIDs are the stack's processes (the stack, a Valkey server of its
	// own), whose memory and CPU time the report gives; none: not reported.
	PIDs []int
	// TurnTimeout bounds one turn, its polls included (default 30 s).
	TurnTimeout time.Duration
	// Client is the HTTP client (default one keeping 2×Concurrency idle
	// connections, so no turn dials).
	Client *http.Client
	// StoreStats, when set, returns the stack's Valkey server's `INFO
	// commandstats`, read before and after the timed rounds for the
	// store's work per turn; nil: not reported.
	StoreStats func(context.Context) (string, error)
}

// DefaultText is the reference turn of docs/benchmarks.md.
const DefaultText = "Create a PNG image with the word Popelnase"

// Report is a run's figures, printed as one JSON line like the peers'.
// Latencies are milliseconds; quantiles are taken as the peers take them
// (the value at index ⌊q·n⌋ of the sorted times).
type Report struct {
	Peer        string `json:"peer"`
	Turns       int    `json:"turns"`
	Concurrency int    `json:"concurrency"`
	// P50Ms and P99Ms time a turn from the POST of its message to its end
	// as its record tells it (the Turn's ended_at when the API gives one,
	// else the end of its last step, the final LLM call), so the poll
	// interval is not in them.
	P50Ms float64 `json:"p50_ms"`
	P99Ms float64 `json:"p99_ms"`
	// TurnsPerS is Turns over the wall time of the timed rounds, each
	// turn's conversation creation and the polls that saw it end included.
	TurnsPerS float64 `json:"turns_per_s"`
	// RSSMB and PeakRSSMB are the stack processes' VmRSS and VmHWM after
	// the run, summed, in MB (10^6 bytes, as the peers count); 0 without
	// a PID.
	RSSMB     float64 `json:"rss_mb"`
	PeakRSSMB float64 `json:"peak_rss_mb"`
	// CPUMsPerTurn is the CPU time (user and system) the stack's
	// processes spent during the timed rounds, per timed turn, summed;
	// PIDCPUMsPerTurn is each process's, in the order of Options.PIDs.
	// On a host whose cores the load fills, throughput follows the CPU a
	// turn costs, and CPU time drifts far less with the host's state than
	// wall time does. DriverCPUMsPerTurn is the driver's own (this
	// process), which a peer run in process does not spend.
	CPUMsPerTurn       float64   `json:"cpu_ms_per_turn,omitempty"`
	PIDCPUMsPerTurn    []float64 `json:"pid_cpu_ms_per_turn,omitempty"`
	DriverCPUMsPerTurn float64   `json:"driver_cpu_ms_per_turn,omitempty"`
	// ClientP50Ms and ClientP99Ms time a turn until the client saw it
	// end: its turn.ended event when Watched, else a poll (every PollMs).
	ClientP50Ms float64 `json:"client_p50_ms"`
	ClientP99Ms float64 `json:"client_p99_ms"`
	Watched     bool    `json:"watched"`
	PollMs      float64 `json:"poll_ms,omitempty"`
	// AfterP50Ms and AfterClientP50Ms are the p50s of the After turns run
	// one at a time after the timed rounds; AfterTurns how many.
	AfterTurns       int     `json:"after_turns,omitempty"`
	AfterP50Ms       float64 `json:"after_p50_ms,omitempty"`
	AfterClientP50Ms float64 `json:"after_client_p50_ms,omitempty"`
	// PollsPerTurn, LLMCallsPerTurn and ArtifactsPerTurn are means over
	// the timed turns that succeeded.
	PollsPerTurn     float64 `json:"polls_per_turn"`
	LLMCallsPerTurn  float64 `json:"llm_calls_per_turn"`
	ArtifactsPerTurn float64 `json:"artifacts_per_turn"`
	// Unavailable counts polls the API answered 503 (its store did not
	// answer in time), which the driver retries as the web page does.
	Unavailable int `json:"unavailable_polls"`
	// Reconnects counts event streams the server ended before the
	// turn's turn.ended, which the driver opened again after the last id
	// it read, as the page does.
	Reconnects int `json:"stream_reconnects"`
	// StoreCommandsPerTurn is how many commands the stack's Valkey ran
	// per timed turn, a script's own commands counted with it;
	// StoreScriptsPerTurn how many of them were scripts (EVAL, EVALSHA,
	// FCALL and their read-only forms), and StoreScriptUsPerTurn the
	// server's time running them, their commands included: what the
	// store spends of a turn beyond its network, from the server's own
	// count (Options.StoreStats; 0 without it).
	StoreCommandsPerTurn float64 `json:"store_commands_per_turn,omitempty"`
	StoreScriptsPerTurn  float64 `json:"store_scripts_per_turn,omitempty"`
	StoreScriptUsPerTurn float64 `json:"store_script_us_per_turn,omitempty"`
	// Failed counts timed turns that did not succeed; FirstError says why
	// the first of them failed.
	Failed     int    `json:"failed"`
	FirstError string `json:"first_error,omitempty"`
}

// sample is one finished turn.
type sample struct {
	record, client     time.Duration
	polls, unavailable int
	reconnects         int
	view               wire.Turn
	err                error
}

// Run runs opts.Warmup turns one at a time, then opts.Turns turns in
// rounds of opts.Concurrency started together, each round starting when
// the previous one has ended (as the peers' drivers do). It fails only if
// the run cannot go on (bad options, a warm-up turn or every timed turn
// failed); a turn that fails is counted in the report. A poll answered
// 503 is retried at the next tick.
func Run(ctx context.Context, opts Options) (*Report, error) {
	if opts.BaseURL == "" || opts.Token == "" || opts.Turns < 1 || opts.Concurrency < 1 {
		return nil, errors.New("bench: a base URL, a token, turns ≥ 1 and concurrency ≥ 1 are required")
	}
	if opts.Poll <= 0 {
		opts.Poll = 5 * time.Millisecond
	}
	if opts.Text == "" {
		opts.Text = DefaultText
	}
	if opts.TurnTimeout <= 0 {
		opts.TurnTimeout = 30 * time.Second
	}
	if opts.Client == nil {
		opts.Client = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 2 * opts.Concurrency, IdleConnTimeout: time.Minute}}
	}
	d := &driver{opts: opts, base: strings.TrimRight(opts.BaseURL, "/")}
	for range opts.Warmup {
		if s := d.turn(ctx); s.err != nil {
			return nil, fmt.Errorf("warm-up turn: %w", s.err)
		}
	}
	samples := make([]sample, 0, opts.Turns)
	store0, err := storeStats(ctx, opts.StoreStats)
	if err != nil {
		return nil, err
	}
	cpu0, err := cpuTimes(opts.PIDs)
	if err != nil {
		return nil, err
	}
	driver0 := selfCPU()
	start := time.Now()
	for len(samples) < opts.Turns {
		n := min(opts.Concurrency, opts.Turns-len(samples))
		round := make([]sample, n)
		var wg sync.WaitGroup
		for i := range round {
			wg.Go(func() { round[i] = d.turn(ctx) })
		}
		wg.Wait()
		samples = append(samples, round...)
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
	wall := time.Since(start)
	driver1 := selfCPU()
	cpu1, err := cpuTimes(opts.PIDs)
	if err != nil {
		return nil, err
	}
	store1, err := storeStats(ctx, opts.StoreStats)
	if err != nil {
		return nil, err
	}
	r := summarize(samples, wall)
	if opts.StoreStats != nil {
		work := store1.minus(store0)
		n := float64(len(samples))
		r.StoreCommandsPerTurn = round1(float64(work.commands) / n)
		r.StoreScriptsPerTurn = round2(float64(work.scripts) / n)
		r.StoreScriptUsPerTurn = round1(float64(work.scriptUs) / n)
	}
	perTurn := func(d time.Duration) float64 { return round2(float64(d.Microseconds()) / 1000 / float64(len(samples))) }
	for i := range cpu1 {
		r.PIDCPUMsPerTurn = append(r.PIDCPUMsPerTurn, perTurn(cpu1[i]-cpu0[i]))
		r.CPUMsPerTurn = round2(r.CPUMsPerTurn + r.PIDCPUMsPerTurn[i])
	}
	r.DriverCPUMsPerTurn = perTurn(driver1 - driver0)
	r.Peer, r.Concurrency, r.Watched = "clientagent", opts.Concurrency, opts.Watch
	if !opts.Watch {
		r.PollMs = ms(opts.Poll)
	}
	if r.Failed == len(samples) {
		return r, fmt.Errorf("bench: every turn failed; the first: %s", r.FirstError)
	}
	if opts.After > 0 {
		var after []sample
		for range opts.After {
			after = append(after, d.turn(ctx))
		}
		a := summarize(after, time.Second)
		r.AfterTurns, r.AfterP50Ms, r.AfterClientP50Ms = len(after)-a.Failed, a.P50Ms, a.ClientP50Ms
	}
	for _, pid := range opts.PIDs {
		rss, hwm, err := memory(pid)
		if err != nil {
			return r, err
		}
		r.RSSMB, r.PeakRSSMB = round1(r.RSSMB+rss), round1(r.PeakRSSMB+hwm)
	}
	return r, nil
}

// summarize computes the report's figures from the timed turns.
func summarize(samples []sample, wall time.Duration) *Report {
	r := &Report{Turns: len(samples), TurnsPerS: round1(float64(len(samples)) / wall.Seconds())}
	var rec, cli []time.Duration
	var polls, calls, arts int
	for _, s := range samples {
		r.Unavailable += s.unavailable
		r.Reconnects += s.reconnects
		if s.err != nil {
			if r.Failed == 0 {
				r.FirstError = s.err.Error()
			}
			r.Failed++
			continue
		}
		rec, cli = append(rec, s.record), append(cli, s.client)
		polls += s.polls
		calls += s.view.LLMCalls
		arts += len(s.view.Artifacts)
	}
	if len(rec) == 0 {
		return r
	}
	r.P50Ms, r.P99Ms = quantile(rec, 0.5), quantile(rec, 0.99)
	r.ClientP50Ms, r.ClientP99Ms = quantile(cli, 0.5), quantile(cli, 0.99)
	n := float64(len(rec))
	r.PollsPerTurn, r.LLMCallsPerTurn, r.ArtifactsPerTurn = round2(float64(polls)/n), round2(float64(calls)/n), round2(float64(arts)/n)
	return r
}

// quantile is the peers' quantile: the sorted value at index ⌊q·n⌋.
func quantile(ds []time.Duration, q float64) float64 {
	s := slices.Clone(ds)
	slices.Sort(s)
	return ms(s[min(len(s)-1, int(math.Floor(q*float64(len(s)))))])
}

func ms(d time.Duration) float64 { return round2(float64(d.Microseconds()) / 1000) }
func round1(x float64) float64   { return math.Round(x*10) / 10 }
func round2(x float64) float64   { return math.Round(x*100) / 100 }

type driver struct {
	opts Options
	base string
}

// turn runs one turn in a new conversation.
func (d *driver) turn(ctx context.Context) sample {
	ctx, cancel := context.WithTimeout(ctx, d.opts.TurnTimeout)
	defer cancel()
	var conv struct {
		ID string `json:"conversation_id"`
	}
	if err := d.do(ctx, http.MethodPost, "/v1/conversations", map[string]string{}, http.StatusCreated, &conv); err != nil {
		return sample{err: err}
	}
	var posted struct {
		TurnID string `json:"turn_id"`
	}
	t0 := time.Now()
	s := sample{}
	if d.opts.Watch {
		// The stream is open (its headers read) before the POST, as the
		// page opens it; it ends at this turn's turn.ended.
		st, err := d.watch(ctx, conv.ID)
		if err != nil {
			return sample{err: err}
		}
		defer st.stop()
		t0 = time.Now()
		if err := d.do(ctx, http.MethodPost, "/v1/conversations/"+conv.ID+"/messages", map[string]string{"text": d.opts.Text}, http.StatusAccepted, &posted); err != nil {
			return sample{err: err}
		}
		err = st.ended(posted.TurnID)
		s.reconnects = st.reconnects
		if err != nil {
			return sample{err: fmt.Errorf("turn %s: %w", posted.TurnID, err), reconnects: s.reconnects}
		}
		s.client = time.Since(t0)
		st.stop() // the page closes its stream at turn.ended
		if err := d.do(ctx, http.MethodGet, "/v1/conversations/"+conv.ID+"/turns/"+posted.TurnID, nil, http.StatusOK, &s.view); err != nil {
			return sample{err: err}
		}
		return d.finish(s, posted.TurnID, t0)
	}
	if err := d.do(ctx, http.MethodPost, "/v1/conversations/"+conv.ID+"/messages", map[string]string{"text": d.opts.Text}, http.StatusAccepted, &posted); err != nil {
		return sample{err: err}
	}
	tick := time.NewTicker(d.opts.Poll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return sample{err: fmt.Errorf("turn %s: still %q after %d polls: %w", posted.TurnID, s.view.Status, s.polls, ctx.Err()), unavailable: s.unavailable}
		case <-tick.C:
		}
		s.polls++
		s.view = wire.Turn{}
		err := d.do(ctx, http.MethodGet, "/v1/conversations/"+conv.ID+"/turns/"+posted.TurnID, nil, http.StatusOK, &s.view)
		var se *statusError
		if errors.As(err, &se) && se.status == http.StatusServiceUnavailable {
			s.unavailable++
			s.view.Status = "running"
			continue
		}
		if err != nil {
			return sample{err: err, unavailable: s.unavailable}
		}
		if s.view.Status != "running" {
			break
		}
	}
	s.client = time.Since(t0)
	return d.finish(s, posted.TurnID, t0)
}

// finish checks the ended turn's view and times it from its record.
func (d *driver) finish(s sample, tid string, t0 time.Time) sample {
	if s.view.Status != "succeeded" {
		return sample{err: fmt.Errorf("turn %s ended %s: %s", tid, s.view.Status, s.view.Reply)}
	}
	// ended_at, when the API gives it, is when the turn ended (its last
	// write); without it the end of its last step stands in.
	end, _ := time.Parse(time.RFC3339Nano, s.view.EndedAt)
	for _, st := range s.view.Steps {
		if st.EndedAt.After(end) {
			end = st.EndedAt
		}
	}
	if end.IsZero() {
		return sample{err: fmt.Errorf("turn %s: no step has an end time", tid)}
	}
	// t0's wall clock, not its monotonic reading: end comes from the
	// stack's clock, which on one host is the same wall clock.
	s.record = end.Sub(t0.Round(0))
	return s
}

// stream is a conversation's event stream as the page reads it: opened
// before the POST, read until the turn's turn.ended, opened again after
// the last id it read when the server ends it first (as EventSource does).
type stream struct {
	d          *driver
	ctx        context.Context
	cancel     context.CancelFunc
	conv, last string
	body       io.ReadCloser
	reconnects int
}

// watch opens conv's event stream (its headers read).
func (d *driver) watch(ctx context.Context, conv string) (*stream, error) {
	st := &stream{d: d, conv: conv}
	st.ctx, st.cancel = context.WithCancel(ctx)
	if err := st.open(); err != nil {
		st.cancel()
		return nil, err
	}
	return st, nil
}

func (st *stream) open() error {
	req, err := http.NewRequestWithContext(st.ctx, http.MethodGet, st.d.base+"/v1/conversations/"+st.conv+"/events", nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+st.d.opts.Token)
	req.Header.Set("Accept", "text/event-stream")
	if st.last != "" {
		req.Header.Set("Last-Event-ID", st.last)
	}
	resp, err := st.d.opts.Client.Do(req)
	if err != nil {
		return fmt.Errorf("GET events: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return &statusError{"GET events", resp.StatusCode, http.StatusOK, b}
	}
	st.body = resp.Body
	return nil
}

// ended reads the stream until turn tid's turn.ended.
func (st *stream) ended(tid string) error {
	for {
		sc := bufio.NewScanner(st.body)
		// The buffer grows to the longest line: most events are short, and
		// a stream per turn should not cost the driver 64 KB each.
		sc.Buffer(make([]byte, 0, 4<<10), 4<<20)
		var id, typ, data string
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if id != "" {
					st.last = id
				}
				if typ == "turn.ended" {
					var ev struct {
						TurnID string `json:"turn_id"`
					}
					if json.Unmarshal([]byte(data), &ev) == nil && ev.TurnID == tid {
						return nil
					}
				}
				id, typ, data = "", "", ""
			case strings.HasPrefix(line, "id: "):
				id = line[len("id: "):]
			case strings.HasPrefix(line, "event: "):
				typ = line[len("event: "):]
			case strings.HasPrefix(line, "data: "):
				data = line[len("data: "):]
			}
		}
		st.body.Close()
		if err := st.ctx.Err(); err != nil {
			return fmt.Errorf("no turn.ended: %w", err)
		}
		// The server ended the stream first: the page reconnects.
		st.reconnects++
		if err := st.open(); err != nil {
			return fmt.Errorf("event stream ended before turn.ended, and again: %w", err)
		}
	}
}

// stop closes the stream (idempotent).
func (st *stream) stop() {
	st.cancel()
	if st.body != nil {
		st.body.Close()
	}
}

// do sends one API request with a JSON body (nil: none) and decodes the
// JSON answer into out when the status is want.
func (d *driver) do(ctx context.Context, method, path string, body any, want int, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, d.base+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+d.opts.Token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := d.opts.Client.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("%s %s: read the answer: %w", method, path, err)
	}
	if resp.StatusCode != want {
		return &statusError{fmt.Sprintf("%s %s", method, path), resp.StatusCode, want, b}
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("%s %s: decode %.300q: %w", method, path, b, err)
	}
	return nil
}

// statusError is an API answer with another status than the one wanted.
type statusError struct {
	req          string
	status, want int
	body         []byte
}

func (e *statusError) Error() string {
	return fmt.Sprintf("%s = %d, want %d: %.300s", e.req, e.status, e.want, e.body)
}

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat's CPU times: 100
// on every architecture Linux runs Go on.
const clockTicks = 100

// cpuTimes reads the CPU time (user and system) each of pids has spent.
func cpuTimes(pids []int) ([]time.Duration, error) {
	var out []time.Duration
	for _, pid := range pids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return nil, fmt.Errorf("read the CPU time of process %d: %w", pid, err)
		}
		ticks, err := statCPU(string(b))
		if err != nil {
			return nil, fmt.Errorf("process %d: %w", pid, err)
		}
		out = append(out, time.Duration(ticks)*time.Second/clockTicks)
	}
	return out, nil
}

// statCPU is utime + stime of a /proc/<pid>/stat line, in clock ticks:
// the 14th and 15th fields, counted after the command, which is in
// parentheses and may hold spaces and parentheses itself.
func statCPU(stat string) (int64, error) {
	i := strings.LastIndexByte(stat, ')')
	f := strings.Fields(stat[i+1:]) // from the 3rd field, the state
	if i < 0 || len(f) < 13 {
		return 0, fmt.Errorf("unexpected /proc stat line %q", stat)
	}
	var ticks int64
	for _, v := range f[11:13] {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("CPU time %q in %q: %w", v, stat, err)
		}
		ticks += n
	}
	return ticks, nil
}

// selfCPU is the CPU time (user and system) this process has spent.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// memory reads the resident and peak resident memory of process pid in MB.
func memory(pid int) (rss, hwm float64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, fmt.Errorf("read the memory of process %d: %w", pid, err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok || (k != "VmRSS" && k != "VmHWM") {
			continue
		}
		kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
		if err != nil {
			return 0, 0, fmt.Errorf("process %d: %s is %q: %w", pid, k, v, err)
		}
		if k == "VmRSS" {
			rss = kb * 1024 / 1e6
		} else {
			hwm = kb * 1024 / 1e6
		}
	}
	if rss == 0 {
		return 0, 0, fmt.Errorf("process %d: no VmRSS in /proc/%d/status", pid, pid)
	}
	return rss, hwm, nil
}

// storeWork is what a Valkey server's `INFO commandstats` counts: every
// command it ran (a script's own commands too), the scripts among them
// and the microseconds it spent running them.
type storeWork struct{ commands, scripts, scriptUs int64 }

func (a storeWork) minus(b storeWork) storeWork {
	return storeWork{a.commands - b.commands, a.scripts - b.scripts, a.scriptUs - b.scriptUs}
}

// scriptCommands are the commands that run a script.
var scriptCommands = map[string]bool{"eval": true, "evalsha": true, "eval_ro": true, "evalsha_ro": true, "fcall": true, "fcall_ro": true}

// storeStats reads the server's counts through stats (nothing when nil).
func storeStats(ctx context.Context, stats func(context.Context) (string, error)) (storeWork, error) {
	if stats == nil {
		return storeWork{}, nil
	}
	info, err := stats(ctx)
	if err != nil {
		return storeWork{}, fmt.Errorf("the store's INFO commandstats: %w", err)
	}
	return parseCommandStats(info), nil
}

// parseCommandStats sums the lines of `INFO commandstats`
// ("cmdstat_evalsha:calls=17,usec=1757,usec_per_call=103.37,…"); the
// INFO commands that read them are not counted.
func parseCommandStats(info string) storeWork {
	var w storeWork
	for line := range strings.Lines(info) {
		name, fields, ok := strings.Cut(strings.TrimSpace(line), ":")
		cmd, isStat := strings.CutPrefix(name, "cmdstat_")
		if !ok || !isStat || cmd == "info" {
			continue
		}
		var calls, usec int64
		for f := range strings.SplitSeq(fields, ",") {
			k, v, _ := strings.Cut(f, "=")
			switch k {
			case "calls":
				calls, _ = strconv.ParseInt(v, 10, 64)
			case "usec":
				usec, _ = strconv.ParseInt(v, 10, 64)
			}
		}
		w.commands += calls
		if scriptCommands[cmd] {
			w.scripts += calls
			w.scriptUs += usec
		}
	}
	return w
}
