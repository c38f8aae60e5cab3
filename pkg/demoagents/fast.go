package demoagents

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"html"
	"image"
	"image/png"
	"net/http"
	"path"
	"strings"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2asrv"
	"github.com/a2aproject/a2a-go/a2asrv/eventqueue"
)

// FastHandler serves the demo specialists for load runs of the platform
// (docs/benchmarks.md): the same agent paths and cards as Handler (skill
// ids, schemas, the schema extension), reached over real A2A JSON-RPC, but
// each skill answers at once with a tiny artifact and keeps nothing: no task store (a2a-go's in-memory one
// would keep every task of the process), no publication ledger, and input
// files are not fetched. A fast agent never asks for input, so no task is
// ever continued.
func FastHandler(publicBaseURL string) http.Handler {
	base := strings.TrimRight(publicBaseURL, "/")
	fast := map[string]func(*callInput) *callOutput{
		"create_svg_artifact": fastSVG,
		"convert_svg_to_png":  fastPNG,
		"design_valve_flange": fastFlange,
		"publish_artifact":    fastPublish,
	}
	mux := http.NewServeMux()
	for _, sk := range skills(Options{Publications: NewMemoryLedger()}) {
		run, ok := fast[sk.id]
		if !ok {
			panic("demoagents: no fast version of skill " + sk.id)
		}
		rpc := a2asrv.NewJSONRPCHandler(a2asrv.NewHandler(&fastExecutor{skill: sk, run: run}, a2asrv.WithTaskStore(noTasks{})))
		mux.Handle("POST "+sk.path, rpc)
		mux.Handle("POST "+sk.path+"/{$}", rpc)
		mux.Handle(sk.path+a2asrv.WellKnownAgentCardPath, cardHandler(base, sk))
	}
	handleGuardian(mux, base, guardianWord(Options{}))
	return mux
}

// noTasks is a task store that keeps nothing: the fast agents finish every
// task in the request that starts it.
type noTasks struct{}

var _ a2asrv.TaskStore = noTasks{}

func (noTasks) Save(context.Context, *a2a.Task) error { return nil }
func (noTasks) Get(context.Context, a2a.TaskID) (*a2a.Task, error) {
	return nil, a2a.ErrTaskNotFound
}

// fastExecutor answers a call with one event: the completed (or failed)
// task with its artifacts.
type fastExecutor struct {
	skill *skill
	run   func(*callInput) *callOutput
}

var _ a2asrv.AgentExecutor = (*fastExecutor)(nil)

// Execute checks the arguments against the skill's schema, as the demo
// agent does, and writes the finished task.
func (e *fastExecutor) Execute(ctx context.Context, reqCtx *a2asrv.RequestContext, q eventqueue.Queue) error {
	task := &a2a.Task{ID: reqCtx.TaskID, ContextID: reqCtx.ContextID}
	in, err := (&executor{skill: e.skill}).input(reqCtx)
	if err != nil {
		msg := "internal error in " + e.skill.id
		var ue *userError
		if errors.As(err, &ue) {
			msg = ue.msg
		}
		task.Status = a2a.TaskStatus{State: a2a.TaskStateFailed, Message: a2a.NewMessageForTask(a2a.MessageRoleAgent, reqCtx, a2a.TextPart{Text: msg})}
		return q.Write(ctx, task)
	}
	out := e.run(in)
	for _, f := range out.files {
		task.Artifacts = append(task.Artifacts, &a2a.Artifact{
			ID: a2a.NewArtifactID(), Name: f.name, Description: f.description,
			Parts: a2a.ContentParts{a2a.FilePart{File: a2a.FileBytes{
				FileMeta: a2a.FileMeta{Name: f.name, MimeType: f.mimeType},
				Bytes:    base64.StdEncoding.EncodeToString(f.data),
			}}},
		})
	}
	parts := a2a.ContentParts{a2a.TextPart{Text: out.summary}}
	if out.data != nil {
		parts = append(parts, a2a.DataPart{Data: out.data})
	}
	task.Status = a2a.TaskStatus{State: a2a.TaskStateCompleted, Message: a2a.NewMessageForTask(a2a.MessageRoleAgent, reqCtx, parts...)}
	return q.Write(ctx, task)
}

// Cancel marks the task canceled; a fast task is over before a cancel
// could reach it.
func (e *fastExecutor) Cancel(ctx context.Context, reqCtx *a2asrv.RequestContext, q eventqueue.Queue) error {
	ev := a2a.NewStatusUpdateEvent(reqCtx, a2a.TaskStateCanceled, nil)
	ev.Final = true
	return q.Write(ctx, ev)
}

// tinyPNG is a 1×1 white PNG, encoded once.
var tinyPNG = func() []byte {
	img := image.NewGray(image.Rect(0, 0, 1, 1))
	img.Pix[0] = 0xff
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		panic(err)
	}
	return b.Bytes()
}()

func tinySVG(title string) []byte {
	return []byte(`<svg xmlns="http://www.w3.org/2000/svg" width="8" height="8"><title>` + html.EscapeString(title) + `</title></svg>`)
}

func fastSVG(in *callInput) *callOutput {
	word := strings.TrimSpace(argString(in.args, "word"))
	name := fileStem(word) + ".svg"
	return &callOutput{
		summary: fmt.Sprintf("Created %s: the word %q (fast agent, a placeholder image).", name, word),
		files:   []outputFile{{name: name, mimeType: "image/svg+xml", description: fmt.Sprintf("SVG image of the word %q", word), data: tinySVG(word)}},
		data:    map[string]any{"word": word, "format": "svg"},
	}
}

// fastPNG names its output after the input file it was sent, without
// fetching it.
func fastPNG(in *callInput) *callOutput {
	id := argString(in.args, "artifact_id")
	src := id
	if len(in.files) > 0 {
		if n := fileMeta(in.files[0]).Name; n != "" {
			src = n
		}
	}
	name := fileStem(strings.TrimSuffix(src, path.Ext(src))) + ".png"
	return &callOutput{
		summary: fmt.Sprintf("Converted %s to %s (1x1 pixels, fast agent).", src, name),
		files:   []outputFile{{name: name, mimeType: "image/png", description: "PNG rendering of " + src, data: tinyPNG}},
		data:    map[string]any{"source_artifact_id": id, "width": 1, "height": 1, "format": "png"},
	}
}

func fastFlange(in *callInput) *callOutput {
	holes, _ := argNumber(in.args, "holes")
	od, _ := argNumber(in.args, "outer_diameter_mm")
	name := fmt.Sprintf("flange_%dx%s_%s.svg", int(holes), num(od), argString(in.args, "material"))
	return &callOutput{
		summary: "Designed " + name + " (fast agent, a placeholder drawing).",
		files:   []outputFile{{name: name, mimeType: "image/svg+xml", description: "flange drawing", data: tinySVG(name)}},
	}
}

// fastPublish publishes nothing and records nothing.
func fastPublish(in *callInput) *callOutput {
	id, channel := argString(in.args, "artifact_id"), argString(in.args, "channel")
	return &callOutput{
		summary: fmt.Sprintf("Published %s to the %s channel (fast agent: nothing was published).", id, channel),
		data:    map[string]any{"artifact_id": id, "channel": channel, "call_id": in.messageID, "task_id": in.taskID},
	}
}
