// Package mcptest is an MCP server written with the go-sdk for tests of
// MCP skills: it serves streamable HTTP from an httptest server, with tools
// that answer, fail (isError), return an image, are destructive, elicit
// input, and hang until the server goes down; tools can be added while it
// runs (notifications/tools/list_changed). It is for tests only.
package mcptest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// PNG is the image the "image" tool returns: 2×2 red pixels.
var PNG = func() []byte {
	img := image.NewRGBA(image.Rect(0, 0, 2, 2))
	for x := range 2 {
		for y := range 2 {
			img.Set(x, y, color.RGBA{R: 255, A: 255})
		}
	}
	var b bytes.Buffer
	_ = png.Encode(&b, img)
	return b.Bytes()
}()

// Server is a running test server.
type Server struct {
	// URL is the streamable HTTP endpoint.
	URL string
	// MCP is the server itself (tests add tools to it).
	MCP *sdk.Server

	srv     *httptest.Server
	mu      sync.Mutex
	hanging chan struct{} // closed when a "hang" call has started
	calls   map[string]int

	down     chan struct{} // closed by Down: a hanging call returns
	downOnce sync.Once
}

// Start serves the test server until the test ends.
func Start(t testing.TB) *Server {
	t.Helper()
	s := &Server{hanging: make(chan struct{}), down: make(chan struct{}), calls: map[string]int{}}
	s.MCP = sdk.NewServer(&sdk.Implementation{Name: "gotest", Version: "1"}, nil)
	s.addTools()
	s.srv = httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s.MCP }, nil))
	s.URL = s.srv.URL + "/mcp"
	t.Cleanup(s.close)
	return s
}

// Down stops the server at once, cutting the sessions and calls in flight;
// from now on it refuses connections.
func (s *Server) Down() {
	s.downOnce.Do(func() {
		close(s.down) // a hanging call ends
		for ss := range s.MCP.Sessions() {
			_ = ss.Close()
		}
		_ = s.srv.Listener.Close() // new connections are refused
		s.srv.CloseClientConnections()
	})
}

// close stops the server for good. httptest's Close waits for every
// handler, and a streamable-HTTP handler may wait on its session; the wait
// is bounded so a test never hangs on it.
func (s *Server) close() {
	s.Down()
	done := make(chan struct{})
	go func() { s.srv.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
	}
}

// Hanging is closed once a call of the "hang" tool has started.
func (s *Server) Hanging() <-chan struct{} { return s.hanging }

// Calls is how many calls of tool reached the server's handler.
func (s *Server) Calls(tool string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[tool]
}

func (s *Server) count(tool string) {
	s.mu.Lock()
	s.calls[tool]++
	s.mu.Unlock()
}

// AddTool adds a tool "name" that answers its text argument back; every
// connected session is told its tool list changed.
func (s *Server) AddTool(name, description string) {
	s.MCP.AddTool(&sdk.Tool{Name: name, Description: description, InputSchema: textSchema}, func(_ context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		s.count(name)
		return text(name + ": " + arg(req, "text")), nil
	})
}

var (
	textSchema  = json.RawMessage(`{"type":"object","properties":{"text":{"type":"string","description":"Any text."}},"required":["text"]}`)
	emptySchema = json.RawMessage(`{"type":"object","properties":{}}`)
	yes         = true
)

func (s *Server) addTools() {
	s.MCP.AddTool(&sdk.Tool{Name: "echo", Title: "Echo", Description: "Answers the text back.", InputSchema: textSchema,
		Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true}}, func(_ context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		s.count("echo")
		r := text("echo: " + arg(req, "text"))
		r.StructuredContent = map[string]any{"echoed": arg(req, "text"), "length": len(arg(req, "text"))}
		return r, nil
	})
	s.MCP.AddTool(&sdk.Tool{Name: "fail", Description: "Always fails.", InputSchema: emptySchema}, func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		s.count("fail")
		r := text("the widget is broken")
		r.IsError = true
		return r, nil
	})
	s.MCP.AddTool(&sdk.Tool{Name: "image", Description: "Draws a red square.", InputSchema: emptySchema}, func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		s.count("image")
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "a red square"}, &sdk.ImageContent{Data: PNG, MIMEType: "image/png"}}}, nil
	})
	s.MCP.AddTool(&sdk.Tool{Name: "delete_file", Description: "Deletes a file.", InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`),
		Annotations: &sdk.ToolAnnotations{DestructiveHint: &yes}}, func(_ context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		s.count("delete_file")
		return text("deleted " + arg(req, "path")), nil
	})
	s.MCP.AddTool(&sdk.Tool{Name: "order", Description: "Orders an item; asks the user why and how many.", InputSchema: json.RawMessage(`{"type":"object","properties":{"item":{"type":"string"}},"required":["item"]}`)},
		func(_ context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			s.count("order")
			resp, ok := req.Params.InputResponses["why"].(*sdk.ElicitResult)
			if !ok {
				// Multi round-trip (the SDK turns it into elicitation/create for older clients).
				return &sdk.CallToolResult{InputRequests: sdk.InputRequestMap{"why": &sdk.ElicitParams{
					Message: "Why do you need " + arg(req, "item") + "?",
					RequestedSchema: json.RawMessage(`{"type":"object","properties":{
						"reason":{"type":"string","title":"Reason","description":"Why you need it"},
						"count":{"type":"integer","description":"How many","minimum":1},
						"item":{"type":"string","description":"Another item to add"}},"required":["reason"]}`),
				}}}, nil
			}
			if resp.Action != "accept" {
				return text("order " + resp.Action + "d"), nil
			}
			return text(fmt.Sprintf("ordered %v %s because %v (also %v)", resp.Content["count"], arg(req, "item"), resp.Content["reason"], resp.Content["item"])), nil
		})
	s.MCP.AddTool(&sdk.Tool{Name: "hang", Description: "Never answers.", InputSchema: emptySchema}, func(ctx context.Context, _ *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		s.count("hang")
		s.mu.Lock()
		select {
		case <-s.hanging:
		default:
			close(s.hanging)
		}
		s.mu.Unlock()
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-s.down:
			return nil, errors.New("the server went down")
		}
	})
}

func text(s string) *sdk.CallToolResult {
	return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: s}}}
}

func arg(req *sdk.CallToolRequest, name string) string {
	var args map[string]any
	_ = json.Unmarshal(req.Params.Arguments, &args)
	s, _ := args[name].(string)
	return s
}
