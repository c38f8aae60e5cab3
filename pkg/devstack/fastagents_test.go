package devstack

import (
	"bytes"
	"image/png"
	"io"
	"net/http"
	"testing"
)

// StartFast: the Popelnase turn runs through the fast specialists at the
// demo agents' URLs, so its PNG is the fast agent's 1×1 placeholder, not
// the demo's rendering of the word.
func TestStartFastSwapsInTheFastAgents(t *testing.T) {
	t.Parallel()
	st, err := StartFast(t.Context(), Config{Addr: "127.0.0.1:0", DataDir: t.TempDir()})
	if err != nil {
		t.Fatalf("StartFast() error = %v", err)
	}
	t.Cleanup(func() { st.Close() })
	tok, err := st.Token("dev")
	if err != nil {
		t.Fatal(err)
	}
	c := &client{t: t, base: st.URL(), token: tok}
	cid := c.newConversation()
	v := c.wait(cid, c.send(cid, "Create a PNG image with the word Popelnase"))
	if v.Status != "succeeded" || len(v.Artifacts) != 2 || v.Artifacts[1].MimeType != "image/png" {
		t.Fatalf("turn = %s with artifacts %+v (%s), want succeeded with an SVG and a PNG", v.Status, v.Artifacts, v.Reply)
	}
	req, _ := http.NewRequest("GET", st.URL()+"/v1/conversations/"+cid+"/artifacts/"+v.Artifacts[1].ID, nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	img, err := png.Decode(bytes.NewReader(b))
	if resp.StatusCode != http.StatusOK || err != nil {
		t.Fatalf("GET the PNG = %d, decode error %v", resp.StatusCode, err)
	}
	if sz := img.Bounds().Size(); sz.X != 1 || sz.Y != 1 {
		t.Errorf("the PNG is %v pixels, want the fast agent's 1×1", sz)
	}
}
