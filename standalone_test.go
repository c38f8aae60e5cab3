package clientagent

import (
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// The repository stands alone (docs/design.md §12): its code and docs cite
// files inside it — docs/design.md, docs/architecture.md, the OpenAPI
// file — never documents someone who clones it cannot open.
func TestNoReferenceLeavesTheRepository(t *testing.T) {
	out, err := exec.Command("git", "ls-files").Output()
	if err != nil {
		t.Skipf("git ls-files: %v (the check reads the tracked files)", err)
	}
	// The names are spelled with a class ([e], [N], …) so that this file
	// does not itself read as a citation of them.
	outside := regexp.MustCompile(`\bsp[e]c §|\bDESIG[N](\.md)?\b|\bAP[I]\.md\b|\bCONVENTION[S](\.md)?\b|\bsee[d]s?[ /_-]?0\d\d|\.\./share[d]\b`)
	wrapped := regexp.MustCompile(`\b(sp[e]c|DESIG[N]|see[d])[ \t]*\n[ \t]*(//|#|\*)?[ \t]*(§|0\d\d)`)
	skip := []string{"node_modules/", "testdata/fuzz/", "web/vendor/", "go.sum", "package-lock.json"}
	var found []string
	for _, f := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if slicesHasPrefix(skip, f) {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			continue // listed but not checked out (sparse, deleted in the tree)
		}
		for i, line := range strings.Split(string(b), "\n") {
			if m := outside.FindString(line); m != "" {
				found = append(found, f+":"+strconv.Itoa(i+1)+": "+m)
			}
		}
		// A reference a comment wraps across lines ("spec" / "// §3.4").
		for _, m := range wrapped.FindAllIndex(b, -1) {
			found = append(found, f+":"+strconv.Itoa(1+strings.Count(string(b[:m[0]]), "\n"))+": "+strings.Join(strings.Fields(string(b[m[0]:m[1]])), " "))
		}
	}
	// Every section of docs/design.md that is cited exists.
	design, err := os.ReadFile("docs/design.md")
	if err != nil {
		t.Fatal(err)
	}
	sections := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^#{2,3} (\d+(?:\.\d+[a-z]?)?)[. ]`).FindAllStringSubmatch(string(design), -1) {
		sections[m[1]] = true
	}
	cited := regexp.MustCompile(`docs/design\.md §(\d+(?:\.\d+[a-z]?)?)`)
	for _, f := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if slicesHasPrefix(skip, f) {
			continue
		}
		b, _ := os.ReadFile(f)
		for _, m := range cited.FindAllStringSubmatch(string(b), -1) {
			if !sections[m[1]] {
				found = append(found, f+": cites docs/design.md §"+m[1]+", which it does not have")
			}
		}
	}
	if len(found) > 0 {
		t.Errorf("%d references to documents outside the repository, e.g.:\n%s", len(found), strings.Join(found[:min(len(found), 30)], "\n"))
	}
}

func slicesHasPrefix(prefixes []string, f string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(f, p) || strings.Contains(f, "/"+p) {
			return true
		}
	}
	return false
}
