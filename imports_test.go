package clientagent

import (
	"bufio"
	"bytes"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/clientagent/clientagent/"

// pureLayers are the packages docs/architecture.md says touch nothing, in
// the one direction they may import each other: a package imports only
// packages of a lower layer (the API's vocabulary at the bottom, the view
// of a stored turn at the top). The record sits below the catalog: the
// catalog and its batch checks read records, never the other way round.
var pureLayers = [][]string{
	{"pkg/wire", "pkg/schemaerr"},
	{"pkg/artifact", "pkg/llm"},
	{"pkg/record"},
	{"pkg/catalog"},
	{"pkg/catalog/batch"},
	{"pkg/turnview"},
}

// apiClients speak the HTTP API only (docs/architecture.md: "the API"):
// none links the server's packages, directly or through another.
var apiClients = []string{"pkg/apiclient", "pkg/chatcli", "pkg/eval", "pkg/smoke", "cmd/clientagent/internal/bench", "pkg/a2aserver"}

// serverSide are what a client of the API must not link.
var serverSide = []string{"pkg/api", "pkg/turn", "pkg/record", "pkg/sfnlocal", "pkg/platform", "pkg/devstack", "pkg/agents", "pkg/mcp"}

// mustNotImport is, for a package, the project packages it must not
// import itself (docs/architecture.md, "may touch"): the steps reach the
// store, the model, the specialists and the engine through interfaces; the
// adapters know nothing of the steps or the API.
var mustNotImport = map[string][]string{
	"pkg/turn":             {"pkg/api", "pkg/platform", "pkg/devstack", "pkg/sfnlocal", "pkg/record/valkey", "pkg/mcp", "pkg/artifact/s3store", "pkg/artifact/localstore", "pkg/audit/s3audit", "pkg/lambdahttp", "pkg/turn/turnlambda"},
	"pkg/record/valkey":    {"pkg/turn", "pkg/api", "pkg/agents", "pkg/catalog", "pkg/platform"},
	"pkg/artifact/s3store": {"pkg/record", "pkg/turn", "pkg/api"},
	"pkg/audit":            {"pkg/record", "pkg/turn", "pkg/api"},
	"pkg/sfnlocal":         {"pkg/turn", "pkg/api", "pkg/record", "pkg/platform"},
	"pkg/api":              {"pkg/platform", "pkg/devstack", "pkg/sfnlocal", "pkg/record/valkey", "pkg/agents", "pkg/mcp"},
	"pkg/agents":           {"pkg/turn", "pkg/api", "pkg/platform"},
	"pkg/mcp":              {"pkg/turn", "pkg/api", "pkg/platform"},
	"pkg/guardian":         {"pkg/turn", "pkg/api", "pkg/record"},
	"pkg/telemetry":        {"pkg/turn", "pkg/api", "pkg/record"},
	"pkg/tool":             {"pkg/agents", "pkg/mcp", "pkg/workflow", "pkg/turn", "pkg/record/valkey", "pkg/artifact/s3store"},
	"pkg/workflow":         {"pkg/turn", "pkg/api", "pkg/platform", "pkg/agents", "pkg/mcp", "pkg/record/valkey"},
}

// wiringOnly are imported only by the mains and the packages that wire a
// whole stack (docs/architecture.md: "everything, wiring only").
var wiringOnly = map[string][]string{
	"pkg/devstack": {"cmd/clientagent", "pkg/eval/evalcli"},
}

type listed struct {
	imports, deps []string
}

// goList lists every package of the module (not its tests) with its direct
// project imports and every project package it links.
func goList(t *testing.T) map[string]listed {
	t.Helper()
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}}|{{join .Imports \" \"}}|{{join .Deps \" \"}}", "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	own := func(ps string) []string {
		var r []string
		for p := range strings.FieldsSeq(ps) {
			if rest, ok := strings.CutPrefix(p, module); ok {
				r = append(r, rest)
			}
		}
		return r
	}
	pkgs := map[string]listed{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		f := strings.Split(sc.Text(), "|")
		if len(f) != 3 {
			continue
		}
		name := strings.TrimPrefix(strings.TrimPrefix(f[0], module), "github.com/clientagent/clientagent")
		pkgs[name] = listed{imports: own(f[1]), deps: own(f[2])}
	}
	return pkgs
}

// within reports whether p is pkg or one of its subpackages.
func within(p, pkg string) bool { return p == pkg || strings.HasPrefix(p, pkg+"/") }

// The import graph among the project's packages has the directions
// docs/architecture.md gives its packages ("may touch").
func TestImportDirections(t *testing.T) {
	t.Parallel()
	pkgs := goList(t)
	if len(pkgs) < 20 {
		t.Fatalf("go list found %d packages", len(pkgs))
	}
	layer := map[string]int{}
	for i, l := range pureLayers {
		for _, p := range l {
			layer[p] = i
		}
	}
	for p, i := range layer {
		lp, ok := pkgs[p]
		if !ok {
			t.Errorf("%s: no such package (pureLayers is out of date)", p)
			continue
		}
		for _, imp := range lp.imports {
			j, pure := layer[imp]
			switch {
			case !pure:
				t.Errorf("%s imports %s: a package that touches nothing imports only the pure packages below it", p, imp)
			case j >= i:
				t.Errorf("%s imports %s: against the one direction %v", p, imp, pureLayers)
			}
		}
	}
	for _, c := range apiClients {
		lc, ok := pkgs[c]
		if !ok {
			t.Errorf("%s: no such package (apiClients is out of date)", c)
			continue
		}
		for _, d := range lc.deps {
			for _, s := range serverSide {
				if within(d, s) {
					t.Errorf("%s links %s: a client of the API speaks only its vocabulary (pkg/wire)", c, d)
				}
			}
		}
	}
	for p, banned := range mustNotImport {
		lp, ok := pkgs[p]
		if !ok {
			t.Errorf("%s: no such package (mustNotImport is out of date)", p)
			continue
		}
		for _, imp := range lp.imports {
			for _, b := range banned {
				if within(imp, b) {
					t.Errorf("%s imports %s", p, imp)
				}
			}
		}
	}
	for p, lp := range pkgs {
		for w, allowed := range wiringOnly {
			if slices.Contains(lp.imports, w) && !slices.Contains(allowed, p) {
				t.Errorf("%s imports %s, which only %v may import", p, w, allowed)
			}
		}
		// Test helpers (…test packages) are for tests and other helpers only.
		if strings.HasSuffix(p, "test") {
			continue
		}
		for _, imp := range lp.imports {
			if strings.HasSuffix(imp, "test") {
				t.Errorf("%s imports the test helper %s", p, imp)
			}
		}
	}
}
