package devstack

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/clientagent/clientagent/pkg/platform"
)

// raw sends body as is (no JSON encoding) with content type ctype.
func (c *client) raw(method, path, ctype string, body []byte) (int, http.Header, []byte) {
	c.t.Helper()
	req, _ := http.NewRequest(method, c.base+path, bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+c.token)
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b
}

// Issue 24, point 7: odd bodies through the real API. Each is refused with
// 400 and a code and a message written for a person (no Go type names),
// or accepted as the OpenAPI file documents; a refused one changes nothing
// (the approval still waits, nothing is published).
func TestInputHygiene(t *testing.T) {
	t.Parallel()
	st, c := stack(t, publishModel())
	cid := c.newConversation()
	tid := c.send(cid, "Make a Hello SVG and publish it to web")
	v := c.wait(cid, tid)
	if v.Status != "awaiting_approval" || v.Approval == nil {
		t.Fatalf("turn = %s, want awaiting_approval", v.Status)
	}
	apID := v.Approval.ID
	conv := "/v1/conversations/" + cid
	input := conv + "/turns/" + tid + "/input"
	const json = "application/json"
	tests := []struct {
		name, method, path, ctype, body string
		status                          int
		code, says                      string
	}{
		{"NUL in a title", "POST", "/v1/conversations", json, `{"title":"a\u0000b"}`, 400, "invalid_text", "NUL (U+0000)"},
		{"ESC in a title", "POST", "/v1/conversations", json, `{"title":"\u001b[31mred"}`, 400, "invalid_text", "ESC (U+001B)"},
		{"right-to-left override in a title", "POST", "/v1/conversations", json, `{"title":"invoice\u202Etxt.exe"}`, 400, "invalid_text", "right-to-left override"},
		{"C1 control in a title", "POST", "/v1/conversations", json, `{"title":"a\u0085b"}`, 400, "invalid_text", "U+0085"},
		{"tab and line break in a title", "POST", "/v1/conversations", json, `{"title":"a\tb\nc"}`, 201, "", ""},
		{"an emoji as a surrogate pair", "POST", "/v1/conversations", json, `{"title":"\ud83d\ude00"}`, 201, "", ""},
		{"BEL in a message", "POST", conv + "/messages", json, `{"text":"ding\u0007"}`, 400, "invalid_text", "BEL"},
		{"isolate in a message", "POST", conv + "/messages", json, `{"text":"a\u2067b"}`, 400, "invalid_text", "right-to-left isolate"},
		{"ESC in a rename", "PATCH", conv, json, `{"title":"x\u001by"}`, 400, "invalid_text", "ESC"},
		{"override in an approval note", "POST", input, json, `{"approval":{"id":"` + apID + `","decision":"approve","note":"ok\u202E"}}`, 400, "invalid_text", "override"},
		{"invalid UTF-8", "POST", "/v1/conversations", json, "{\"title\":\"caf\xe9\"}", 400, "invalid_json", "not valid UTF-8"},
		{"a lone high surrogate", "POST", "/v1/conversations", json, `{"title":"\ud800"}`, 400, "invalid_json", `\ud800`},
		{"a lone low surrogate in a message", "POST", conv + "/messages", json, `{"text":"x\udc00y"}`, 400, "invalid_json", "surrogate"},
		{"a high surrogate before a letter", "POST", conv + "/messages", json, `{"text":"\ud800\u0041"}`, 400, "invalid_json", "surrogate"},
		{"a null title", "POST", "/v1/conversations", json, `{"title":null}`, 400, "invalid_json", `"title" must not be null`},
		{"a null rename", "PATCH", conv, json, `{"title":null}`, 400, "invalid_json", "null"},
		{"a duplicate key", "POST", "/v1/conversations", json, `{"title":"a","title":"b"}`, 400, "invalid_json", `"title" appears twice`},
		{"a duplicate nested key", "POST", conv + "/messages", json, `{"text":"","workflow":{"id":"publish_word","id":"word_to_png"}}`, 400, "invalid_json", `"workflow.id" appears twice`},
		{"a number for text", "POST", conv + "/messages", json, `{"text":5}`, 400, "invalid_json", `"text" must be a string, not a number`},
		{"a string for files", "POST", conv + "/messages", json, `{"text":"hi","files":"a1"}`, 400, "invalid_json", `"files" must be an array, not a string`},
		{"an array body", "POST", conv + "/messages", json, `[1]`, 400, "invalid_json", "must be an object, not an array"},
		{"a field in another case", "POST", conv + "/messages", json, `{"Text":"hi"}`, 400, "invalid_json", `unknown field "Text"`},
		{"answers and approval", "POST", input, json, `{"answers":{"call_x":{"a":1}},"approval":{"id":"` + apID + `","decision":"approve"}}`, 400, "invalid_input", "not both"},
		{"empty answers and an approval", "POST", input, json, `{"answers":{},"approval":{"id":"` + apID + `","decision":"approve"}}`, 400, "invalid_input", "not both"},
		{"a null approval", "POST", input, json, `{"approval":null}`, 400, "invalid_json", "null"},
		{"a path as the upload's type", "POST", conv + "/artifacts?name=a.txt", "../../etc/passwd", "x", 400, "invalid_media_type", "media type"},
		{"a type without a subtype", "POST", conv + "/artifacts?name=a.txt", "text", "x", 400, "invalid_media_type", "media type"},
		{"a bidi override in a file name", "POST", conv + "/artifacts?name=a%E2%80%AEtxt.exe", "text/plain", "x", 400, "invalid_name", "right-to-left override"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, _, body := c.raw(tc.method, tc.path, tc.ctype, []byte(tc.body))
			if code != tc.status {
				t.Fatalf("%s %s %q = %d %s, want %d", tc.method, tc.path, tc.body, code, body, tc.status)
			}
			if tc.code == "" {
				return
			}
			var e struct {
				Error struct{ Code, Message string }
			}
			if err := jsonUnmarshal(body, &e); err != nil {
				t.Fatalf("error body %s: %v", body, err)
			}
			if e.Error.Code != tc.code || !strings.Contains(e.Error.Message, tc.says) {
				t.Errorf("error = %s %q, want %s saying %q", e.Error.Code, e.Error.Message, tc.code, tc.says)
			}
			for _, goish := range []string{"Go ", "struct", "messageBody", "inputBody", "map[", "json:", "interface"} {
				if strings.Contains(e.Error.Message, goish) {
					t.Errorf("message %q shows the server's internals (%q)", e.Error.Message, goish)
				}
			}
		})
	}
	if v := c.turn(cid, tid); v.Status != "awaiting_approval" || v.Approval == nil || v.Approval.ID != apID {
		t.Errorf("after the refused bodies the turn is %s, want it still awaiting the same approval", v.Status)
	}
	if n := len(st.Publications.List()); n != 0 {
		t.Errorf("publications = %d after refused answers, want 0", n)
	}

	// A valid media type is stored in canonical form and served back so.
	code, _, body := c.raw("POST", conv+"/artifacts?name=n.txt", "TEXT/Plain;Charset=UTF-8", []byte("hello"))
	var up struct {
		ID       string `json:"artifact_id"`
		MimeType string `json:"mime_type"`
	}
	if code != 201 || jsonUnmarshal(body, &up) != nil || up.MimeType != "text/plain; charset=UTF-8" {
		t.Fatalf("upload with TEXT/Plain;Charset=UTF-8 = %d %s, want 201 with mime_type text/plain; charset=UTF-8", code, body)
	}
	if code, h, _ := c.raw("GET", conv+"/artifacts/"+up.ID, "", nil); code != 200 || h.Get("Content-Type") != "text/plain; charset=UTF-8" {
		t.Errorf("GET the upload = %d with Content-Type %q, want 200 text/plain; charset=UTF-8", code, h.Get("Content-Type"))
	}
}

// Issue 24, point 5: uploads count against the conversation's storage
// quota. One that does not fit is 413 quota_exceeded — refused before
// reading when its Content-Length says so, and when it runs over as it
// streams — and leaves no file on disk; another conversation has its own
// quota, and deleting a conversation gives its bytes back.
func TestUploadQuota(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	_, c := stack(t, nil, func(cfg *Config) {
		cfg.DataDir = dir
		cfg.Files = platform.Files{Quota: 64 << 10}
	})
	cid := c.newConversation()
	path := "/v1/conversations/" + cid + "/artifacts?name=a.bin"
	file := bytes.Repeat([]byte("q"), 40<<10)
	if code, _, body := c.raw("POST", path, "application/octet-stream", file); code != 201 {
		t.Fatalf("first upload = %d %s, want 201", code, body)
	}
	expect413 := func(what string, r io.Reader) {
		t.Helper()
		req, _ := http.NewRequest("POST", c.base+path, r)
		req.Header.Set("Authorization", "Bearer "+c.token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var e struct {
			Error struct{ Code, Message string }
		}
		_ = json.NewDecoder(resp.Body).Decode(&e)
		if resp.StatusCode != 413 || e.Error.Code != "quota_exceeded" || !strings.Contains(e.Error.Message, "24 KiB left") {
			t.Errorf("%s = %d %+v, want 413 quota_exceeded saying 24 KiB are left", what, resp.StatusCode, e.Error)
		}
	}
	expect413("a declared 40 KiB upload over the quota", bytes.NewReader(file))
	// Without a length (chunked), the upload fails as it runs over.
	expect413("a streamed 40 KiB upload over the quota", io.MultiReader(bytes.NewReader(file[:1]), bytes.NewReader(file[1:])))

	files, _ := filepath.Glob(filepath.Join(dir, "artifacts", cid, "*"))
	if len(files) != 1 {
		t.Errorf("files on disk = %v, want the first upload only", files)
	}
	var got struct {
		Artifacts []any `json:"artifacts"`
	}
	if c.do("GET", "/v1/conversations/"+cid, nil, &got); len(got.Artifacts) != 1 {
		t.Errorf("catalog holds %d artifacts, want 1", len(got.Artifacts))
	}
	other := c.newConversation()
	if code, _, body := c.raw("POST", "/v1/conversations/"+other+"/artifacts?name=b.bin", "", file); code != 201 {
		t.Errorf("upload to another conversation = %d %s, want 201", code, body)
	}
	if code := c.do("DELETE", "/v1/conversations/"+cid, nil, nil); code != 204 {
		t.Fatalf("DELETE = %d", code)
	}
	if _, err := os.Stat(filepath.Join(dir, "artifacts", cid)); !os.IsNotExist(err) {
		t.Errorf("the deleted conversation's directory is still there (%v)", err)
	}
}

func jsonUnmarshal(b []byte, v any) error {
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("decode %q: %w", b, err)
	}
	return nil
}
