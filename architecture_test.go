package clientagent

import (
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// archRow is one row of docs/architecture.md's package table.
type archRow struct {
	pkgs  []string // the packages it names, subpackages spelled out
	touch string   // its "may touch" column
}

// archTable reads the package table of docs/architecture.md.
func archTable(t *testing.T) []archRow {
	t.Helper()
	b, err := os.ReadFile("docs/architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(b), "\n## Packages\n")
	if !ok {
		t.Fatal(`docs/architecture.md has no "## Packages" section`)
	}
	section, _, _ := strings.Cut(after, "\n## ")
	tick := regexp.MustCompile("`([^`]+)`")
	var rows []archRow
	for line := range strings.SplitSeq(section, "\n") {
		cols := strings.Split(line, "|")
		if len(cols) < 5 || !strings.Contains(cols[1], "`") {
			continue
		}
		first, subs, _ := strings.Cut(cols[1], "(+")
		var r archRow
		for _, m := range tick.FindAllStringSubmatch(first, -1) {
			if strings.HasPrefix(m[1], "pkg/") {
				r.pkgs = append(r.pkgs, m[1])
			}
		}
		if len(r.pkgs) == 0 {
			continue // functions/*, infra/, web/
		}
		for _, m := range tick.FindAllStringSubmatch(subs, -1) {
			r.pkgs = append(r.pkgs, r.pkgs[0]+"/"+m[1])
		}
		r.touch = strings.TrimSpace(cols[len(cols)-2])
		rows = append(rows, r)
	}
	if len(rows) < 20 {
		t.Fatalf("read %d rows of docs/architecture.md's package table", len(rows))
	}
	return rows
}

// touchesIO are imports that reach outside the process (a package, or a
// module's packages): a package the table says touches nothing imports
// none of them.
var touchesIO = []string{"net", "net/http", "os/exec", "github.com/redis/go-redis/v9/...", "github.com/aws/aws-sdk-go-v2/...", "github.com/a2aproject/a2a-go/...", "github.com/modelcontextprotocol/go-sdk/..."}

// docs/architecture.md's package table is true where a test can tell: it
// names only packages that exist, every package of pkg/ is in it (or under
// one it names), and a package it says touches nothing imports nothing
// that reaches outside the process.
func TestArchitectureTable(t *testing.T) {
	t.Parallel()
	rows := archTable(t)
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}}|{{join .Imports \" \"}}", "./pkg/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	imports := map[string][]string{}
	for line := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
		name, imps, _ := strings.Cut(line, "|")
		imports[strings.TrimPrefix(name, module)] = strings.Fields(imps)
	}
	var named []string
	for _, r := range rows {
		named = append(named, r.pkgs...)
		for _, p := range r.pkgs {
			if _, ok := imports[p]; !ok {
				t.Errorf("docs/architecture.md names %s: no such package", p)
			}
		}
		if !strings.HasPrefix(r.touch, "nothing") {
			continue
		}
		for _, p := range r.pkgs {
			for _, imp := range imports[p] {
				for _, io := range touchesIO {
					if mod, ok := strings.CutSuffix(io, "/..."); imp == io || ok && within(imp, mod) {
						t.Errorf("%s imports %s, but docs/architecture.md says it touches %q", p, imp, r.touch)
					}
				}
			}
		}
	}
	for p := range imports {
		if strings.HasSuffix(p, "test") {
			continue // test helpers
		}
		if !slices.ContainsFunc(named, func(n string) bool { return within(p, n) }) {
			t.Errorf("%s is not in docs/architecture.md's package table", p)
		}
	}
}
