package eval

import (
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/clientagent/clientagent/pkg/schemaerr"
)

// Check returns the expectations of e that what turn n did (tr) does not
// meet, each with what was wanted and what was got.
func Check(n int, e Expect, tr TurnResult) []Failure {
	var out []Failure
	fail := func(exp, want, got, detail string) {
		out = append(out, Failure{Turn: n, Expectation: exp, Want: want, Got: got, Detail: detail})
	}
	if e.Status != "" && tr.Status != e.Status {
		fail("status", e.Status, tr.Status, shorten(tr.Reply, 160))
	}
	tools := make([]string, 0, len(tr.Calls))
	for _, c := range tr.Calls {
		tools = append(tools, c.Tool)
	}
	if e.Tools != nil {
		order := e.ToolsOrder
		if order == "" {
			order = OrderSequence
		}
		if !toolsMatch(order, e.Tools, tools) {
			fail("tools ("+order+")", list(e.Tools), list(tools), "")
		}
	}
	for _, t := range e.NotCalled {
		if slices.Contains(tools, t) {
			fail("not_called", t+" not called", list(tools), "")
		}
	}
	for _, ce := range e.Calls {
		out = append(out, checkCalls(n, ce, tr.Calls)...)
	}
	for _, s := range e.ReplyContains {
		if !strings.Contains(tr.Reply, s) {
			fail("reply_contains", strconv.Quote(s), strconv.Quote(shorten(tr.Reply, 200)), "")
		}
	}
	for _, re := range e.ReplyMatches {
		if !regexp.MustCompile(re).MatchString(tr.Reply) { // compiled once by validate
			fail("reply_matches", "/"+re+"/", strconv.Quote(shorten(tr.Reply, 200)), "")
		}
	}
	for _, a := range e.Artifacts {
		got := 0
		for _, r := range tr.Artifacts {
			if r.MimeType == a.MimeType {
				got++
			}
		}
		switch {
		case a.Count != nil && got != *a.Count:
			fail("artifacts "+a.MimeType, strconv.Itoa(*a.Count), strconv.Itoa(got), artifactTypes(tr.Artifacts))
		case a.AtLeast != nil && got < *a.AtLeast:
			fail("artifacts "+a.MimeType, "at least "+strconv.Itoa(*a.AtLeast), strconv.Itoa(got), artifactTypes(tr.Artifacts))
		}
	}
	if e.MaxLLMCalls != nil && tr.LLMCalls > *e.MaxLLMCalls {
		fail("max_llm_calls", "at most "+strconv.Itoa(*e.MaxLLMCalls), strconv.Itoa(tr.LLMCalls), "")
	}
	if e.MaxTokens != nil && tr.Tokens > *e.MaxTokens {
		fail("max_tokens", "at most "+strconv.Itoa(*e.MaxTokens), strconv.Itoa(tr.Tokens), "")
	}
	if e.MaxCostUSD != nil && tr.CostUSD > *e.MaxCostUSD {
		fail("max_cost_usd", fmt.Sprintf("at most $%g", *e.MaxCostUSD), fmt.Sprintf("$%g", tr.CostUSD), "")
	}
	return out
}

func toolsMatch(order string, want, got []string) bool {
	switch order {
	case OrderSet:
		return slices.Equal(distinct(want), distinct(got))
	case OrderIncludes:
		for _, t := range want {
			if !slices.Contains(got, t) {
				return false
			}
		}
		return true
	}
	return slices.Equal(want, got)
}

func distinct(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return slices.Compact(out)
}

// checkCalls checks every call of ce.Tool, or its Nth.
func checkCalls(n int, ce CallExpect, calls []Call) []Failure {
	name := "calls " + ce.Tool
	var of []Call
	for _, c := range calls {
		if c.Tool == ce.Tool {
			of = append(of, c)
		}
	}
	if ce.Nth > 0 {
		name = fmt.Sprintf("calls %s #%d", ce.Tool, ce.Nth)
		if ce.Nth > len(of) {
			return []Failure{{Turn: n, Expectation: name, Want: fmt.Sprintf("at least %d calls", ce.Nth), Got: strconv.Itoa(len(of))}}
		}
		of = of[ce.Nth-1 : ce.Nth]
	}
	if len(of) == 0 {
		return []Failure{{Turn: n, Expectation: name, Want: "a call", Got: "none"}}
	}
	var out []Failure
	for _, c := range of {
		if ce.Status != "" && c.Status != ce.Status {
			out = append(out, Failure{Turn: n, Expectation: name + " status", Want: ce.Status, Got: c.Status, Detail: c.CallID})
		}
		if ce.Arguments == nil {
			continue
		}
		if c.Arguments == nil {
			out = append(out, Failure{Turn: n, Expectation: name + " arguments", Want: "arguments to check", Got: "none shown by the API",
				Detail: "the API shows a call's arguments only for a succeeded skill call or an approval (docs/evals.md)"})
			continue
		}
		if f, ok := checkArguments(*ce.Arguments, c.Arguments); !ok {
			f.Turn, f.Expectation = n, name+" arguments "+f.Expectation
			out = append(out, f)
		}
	}
	return out
}

// checkArguments compares args with a; Expectation of the failure is the
// way (exact, subset, schema).
func checkArguments(a ArgumentsExpect, args map[string]any) (Failure, bool) {
	got := normalize(args)
	switch {
	case a.Exact != nil:
		if !reflect.DeepEqual(normalize(a.Exact), got) {
			return Failure{Expectation: "exact", Want: compactJSON(a.Exact), Got: compactJSON(args)}, false
		}
	case a.Subset != nil:
		if path, ok := subset(normalize(a.Subset), got, ""); !ok {
			return Failure{Expectation: "subset", Want: compactJSON(a.Subset), Got: compactJSON(args), Detail: "differs at " + path}, false
		}
	case a.schema != nil:
		if err := a.schema.Validate(got); err != nil {
			detail := err.Error()
			if vs := schemaerr.Violations(err); vs != nil {
				detail = describeViolations(vs)
			}
			return Failure{Expectation: "schema", Want: "arguments valid against the schema", Got: compactJSON(args), Detail: detail}, false
		}
	}
	return Failure{}, true
}

// subset reports whether every key of want is in got with the same value
// (objects compared as subsets again), and else the first path that differs.
func subset(want, got any, path string) (string, bool) {
	wm, ok := want.(map[string]any)
	if !ok {
		return orRoot(path), reflect.DeepEqual(want, got)
	}
	gm, ok := got.(map[string]any)
	if !ok {
		return orRoot(path), false
	}
	for k, wv := range wm {
		gv, ok := gm[k]
		if !ok {
			return path + "/" + k, false
		}
		if p, ok := subset(wv, gv, path+"/"+k); !ok {
			return p, false
		}
	}
	return "", true
}

func orRoot(p string) string {
	if p == "" {
		return "/"
	}
	return p
}

// normalize turns a value into its plain JSON form (numbers as float64), so
// 6 from YAML and 6 from the API compare equal.
func normalize(v any) any {
	b, err := json.Marshal(v)
	if err != nil {
		return v
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		return v
	}
	return out
}

func compactJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

func list(s []string) string { return "[" + strings.Join(s, ", ") + "]" }

func artifactTypes(arts []ArtifactRef) string {
	if len(arts) == 0 {
		return "no artifacts"
	}
	var types []string
	for _, a := range arts {
		types = append(types, a.MimeType)
	}
	return "produced " + strings.Join(types, ", ")
}

func shorten(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// describeViolations names the innermost violations of a schema check by
// their JSON pointers, as the scenario file names paths.
func describeViolations(vs []schemaerr.Violation) string {
	msgs := make([]string, 0, len(vs))
	for _, v := range vs {
		loc := v.Pointer
		if loc == "" {
			loc = "/"
		}
		msgs = append(msgs, loc+": "+v.Message)
	}
	return strings.Join(msgs, "; ")
}
