package eval

import (
	"fmt"
	"io"
	"math"
	"slices"
	"text/tabwriter"
)

// Report sums up the runs of an eval: per scenario and overall. It is the
// JSON report of `clientagent eval --json` (docs/evals.md).
type Report struct {
	Model string `json:"model,omitempty"`
	URL   string `json:"url,omitempty"`
	// Runs and Passed count runs (scenarios × repeat); PassRate is
	// Passed/Runs and OK whether it reaches MinPass.
	Runs      int              `json:"runs"`
	Passed    int              `json:"passed"`
	PassRate  float64          `json:"pass_rate"`
	MinPass   float64          `json:"min_pass"`
	OK        bool             `json:"ok"`
	LLMCalls  int              `json:"llm_calls"`
	Tokens    int              `json:"tokens"`
	CostUSD   float64          `json:"cost_usd"`
	Scenarios []ScenarioReport `json:"scenarios"`
}

// ScenarioReport is one scenario over its runs: the pass rate, the mean
// spend per run and the spread of its latency.
type ScenarioReport struct {
	Name        string   `json:"name"`
	File        string   `json:"file,omitempty"`
	Description string   `json:"description,omitempty"`
	Tags        []string `json:"tags,omitempty"`
	Runs        int      `json:"runs"`
	Passed      int      `json:"passed"`
	PassRate    float64  `json:"pass_rate"`
	// LLMCalls, Tokens and CostUSD are means per run.
	LLMCalls float64 `json:"llm_calls"`
	Tokens   float64 `json:"tokens"`
	CostUSD  float64 `json:"cost_usd"`
	Latency  Spread  `json:"latency_ms"`
	// Failures are the distinct reasons of the failed runs, most frequent
	// first.
	Failures []FailureCount `json:"failures,omitempty"`
	Results  []Result       `json:"results"`
}

// Spread is the distribution of a figure over runs.
type Spread struct {
	Mean   float64 `json:"mean"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
	StdDev float64 `json:"stddev"`
}

// FailureCount is a failure reason and in how many runs it occurred.
type FailureCount struct {
	Reason string `json:"reason"`
	Runs   int    `json:"runs"`
}

// Summarize builds the report of results for scenarios (results in
// scenario order, as RunAll returns them).
func Summarize(scenarios []*Scenario, results []Result, minPass float64) Report {
	rep := Report{MinPass: minPass, Scenarios: []ScenarioReport{}}
	byName := map[string]int{}
	for _, s := range scenarios {
		byName[s.Name] = len(rep.Scenarios)
		rep.Scenarios = append(rep.Scenarios, ScenarioReport{Name: s.Name, File: s.Path, Description: s.Description, Tags: s.Tags, Results: []Result{}})
	}
	for _, r := range results {
		i, ok := byName[r.Scenario]
		if !ok {
			i = len(rep.Scenarios)
			byName[r.Scenario] = i
			rep.Scenarios = append(rep.Scenarios, ScenarioReport{Name: r.Scenario, File: r.File})
		}
		rep.Scenarios[i].Results = append(rep.Scenarios[i].Results, r)
	}
	for i := range rep.Scenarios {
		sr := &rep.Scenarios[i]
		var lat []float64
		counts := map[string]int{}
		for _, r := range sr.Results {
			sr.Runs++
			if r.Pass {
				sr.Passed++
			}
			sr.LLMCalls += float64(r.LLMCalls)
			sr.Tokens += float64(r.Tokens)
			sr.CostUSD += r.CostUSD
			lat = append(lat, r.LatencyMS)
			seen := map[string]bool{}
			for _, f := range r.Failures {
				if s := f.String(); !seen[s] {
					seen[s] = true
					if counts[s] == 0 {
						sr.Failures = append(sr.Failures, FailureCount{Reason: s})
					}
					counts[s]++
				}
			}
			rep.Runs++
			rep.LLMCalls += r.LLMCalls
			rep.Tokens += r.Tokens
			rep.CostUSD += r.CostUSD
		}
		for j := range sr.Failures {
			sr.Failures[j].Runs = counts[sr.Failures[j].Reason]
		}
		slices.SortStableFunc(sr.Failures, func(a, b FailureCount) int { return b.Runs - a.Runs })
		rep.Passed += sr.Passed
		if sr.Runs > 0 {
			sr.PassRate = float64(sr.Passed) / float64(sr.Runs)
			sr.LLMCalls /= float64(sr.Runs)
			sr.Tokens /= float64(sr.Runs)
			sr.CostUSD /= float64(sr.Runs)
		}
		sr.Latency = spread(lat)
	}
	if rep.Runs > 0 {
		rep.PassRate = float64(rep.Passed) / float64(rep.Runs)
	}
	rep.OK = rep.Runs > 0 && rep.PassRate >= minPass
	return rep
}

func spread(xs []float64) Spread {
	if len(xs) == 0 {
		return Spread{}
	}
	s := Spread{Min: xs[0], Max: xs[0]}
	for _, x := range xs {
		s.Mean += x
		s.Min, s.Max = min(s.Min, x), max(s.Max, x)
	}
	s.Mean /= float64(len(xs))
	for _, x := range xs {
		s.StdDev += (x - s.Mean) * (x - s.Mean)
	}
	s.StdDev = math.Sqrt(s.StdDev / float64(len(xs)))
	return s
}

// WriteTable prints the report as a table, one row per scenario with the
// reasons of its failures under it, and a summary line.
func (rep Report) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	repeated := false
	for _, s := range rep.Scenarios {
		repeated = repeated || s.Runs > 1
	}
	if repeated {
		fmt.Fprintln(tw, "SCENARIO\tRESULT\tPASS\tLLM CALLS\tTOKENS\tCOST USD\tLATENCY ms (mean min–max ±sd)")
	} else {
		fmt.Fprintln(tw, "SCENARIO\tRESULT\tPASS\tLLM CALLS\tTOKENS\tCOST USD\tLATENCY ms")
	}
	for _, s := range rep.Scenarios {
		result := "pass"
		switch {
		case s.Runs == 0:
			result = "-"
		case s.Passed == 0:
			result = "FAIL"
		case s.Passed < s.Runs:
			result = "FLAKY"
		}
		lat := fmt.Sprintf("%.0f", s.Latency.Mean)
		if repeated {
			lat = fmt.Sprintf("%.0f %.0f–%.0f ±%.0f", s.Latency.Mean, s.Latency.Min, s.Latency.Max, s.Latency.StdDev)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d/%d\t%s\t%s\t%.6f\t%s\n", s.Name, result, s.Passed, s.Runs, num(s.LLMCalls), num(s.Tokens), s.CostUSD, lat)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	// The reasons go under the table, so its columns stay aligned.
	for _, s := range rep.Scenarios {
		if len(s.Failures) == 0 {
			continue
		}
		fmt.Fprintf(w, "\n%s failed:\n", s.Name)
		for _, f := range s.Failures {
			reason := "  - " + f.Reason
			if s.Runs > 1 {
				reason += fmt.Sprintf(" [%d of %d runs]", f.Runs, s.Runs)
			}
			fmt.Fprintln(w, reason)
		}
	}
	fmt.Fprintln(w)
	verdict := "ok"
	if !rep.OK {
		verdict = "FAIL"
	}
	_, err := fmt.Fprintf(w, "%s: %d of %d runs passed (%.1f%%, min %.1f%%); %d LLM calls, %d tokens, $%.6f\n",
		verdict, rep.Passed, rep.Runs, 100*rep.PassRate, 100*rep.MinPass, rep.LLMCalls, rep.Tokens, rep.CostUSD)
	return err
}

// num prints a mean per run: whole numbers without decimals.
func num(x float64) string {
	if x == math.Trunc(x) {
		return fmt.Sprintf("%.0f", x)
	}
	return fmt.Sprintf("%.1f", x)
}
