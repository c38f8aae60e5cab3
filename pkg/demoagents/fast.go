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
	"iter"
	"net/http"
	"path"
	"strings"
	"sync"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2asrv"
)

// FastHandler serves the demo specialists for load runs of the platform
// (docs/benchmarks.md): the same agent paths and cards as Handler (skill
// ids, schemas, the schema extension), reached over real A2A JSON-RPC
// (a2a-go's server side decodes each request and encodes each answer), but
// each skill answers at once with a tiny artifact and keeps nothing: no
// task store, no publication ledger, and input files are not fetched. A
// fast agent never asks for input, so no task is ever continued.
//
// The answer is made in the request (fastAgent), as a load run's
// specialist would be a plain function: not by a2a-go's task executor,
// whose event queue and goroutines per task were a specialist's cost, not
// the platform's, in what the load runs measure.
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
		rpc := a2asrv.NewJSONRPCHandler(&fastAgent{skill: sk, run: run})
		mux.Handle("POST "+sk.path, rpc)
		mux.Handle("POST "+sk.path+"/{$}", rpc)
		mux.Handle(sk.path+a2asrv.WellKnownAgentCardPath, cardHandler(base, sk))
	}
	handleGuardian(mux, base, guardianWord(Options{}))
	return mux
}

// fastAgent is a fast specialist's A2A request handler: message/send (and
// message/stream, as one event) answers with the finished task, made in
// the request. It keeps no task, so every other method finds none.
type fastAgent struct {
	skill *skill
	run   func(*callInput) *callOutput
}

var _ a2asrv.RequestHandler = (*fastAgent)(nil)

// OnSendMessage runs the skill on the message's arguments. A message that
// continues a task names one this agent never kept.
func (f *fastAgent) OnSendMessage(_ context.Context, p *a2a.MessageSendParams) (a2a.SendMessageResult, error) {
	if p == nil || p.Message == nil {
		return nil, a2a.ErrInvalidParams
	}
	if p.Message.TaskID != "" {
		return nil, a2a.ErrTaskNotFound
	}
	contextID := p.Message.ContextID
	if contextID == "" {
		contextID = a2a.NewContextID()
	}
	return f.task(&a2asrv.RequestContext{Message: p.Message, TaskID: a2a.NewTaskID(), ContextID: contextID, Metadata: p.Metadata}), nil
}

// OnSendMessageStream is OnSendMessage's task as the stream's one event.
func (f *fastAgent) OnSendMessageStream(ctx context.Context, p *a2a.MessageSendParams) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		res, err := f.OnSendMessage(ctx, p)
		if err != nil {
			yield(nil, err)
			return
		}
		yield(res.(*a2a.Task), nil)
	}
}

func (f *fastAgent) OnGetTask(context.Context, *a2a.TaskQueryParams) (*a2a.Task, error) {
	return nil, a2a.ErrTaskNotFound
}

func (f *fastAgent) OnCancelTask(context.Context, *a2a.TaskIDParams) (*a2a.Task, error) {
	return nil, a2a.ErrTaskNotFound
}

func (f *fastAgent) OnResubscribeToTask(context.Context, *a2a.TaskIDParams) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) { yield(nil, a2a.ErrTaskNotFound) }
}

func (f *fastAgent) OnGetTaskPushConfig(context.Context, *a2a.GetTaskPushConfigParams) (*a2a.TaskPushConfig, error) {
	return nil, a2a.ErrPushNotificationNotSupported
}

func (f *fastAgent) OnListTaskPushConfig(context.Context, *a2a.ListTaskPushConfigParams) ([]*a2a.TaskPushConfig, error) {
	return nil, a2a.ErrPushNotificationNotSupported
}

func (f *fastAgent) OnSetTaskPushConfig(context.Context, *a2a.TaskPushConfig) (*a2a.TaskPushConfig, error) {
	return nil, a2a.ErrPushNotificationNotSupported
}

func (f *fastAgent) OnDeleteTaskPushConfig(context.Context, *a2a.DeleteTaskPushConfigParams) error {
	return a2a.ErrPushNotificationNotSupported
}

func (f *fastAgent) OnGetExtendedAgentCard(context.Context) (*a2a.AgentCard, error) {
	return nil, a2a.ErrAuthenticatedExtendedCardNotConfigured
}

// task checks the arguments against the skill's schema, as the demo agent
// does, and returns the finished task (failed on arguments the schema
// refuses), with the message in its history.
func (f *fastAgent) task(reqCtx *a2asrv.RequestContext) *a2a.Task {
	task := &a2a.Task{ID: reqCtx.TaskID, ContextID: reqCtx.ContextID, History: []*a2a.Message{reqCtx.Message}}
	in, err := (&executor{skill: f.skill}).input(reqCtx)
	if err != nil {
		msg := "internal error in " + f.skill.id
		var ue *userError
		if errors.As(err, &ue) {
			msg = ue.msg
		}
		task.Status = a2a.TaskStatus{State: a2a.TaskStateFailed, Message: a2a.NewMessageForTask(a2a.MessageRoleAgent, reqCtx, a2a.TextPart{Text: msg})}
		return task
	}
	out := f.run(in)
	for _, file := range out.files {
		task.Artifacts = append(task.Artifacts, &a2a.Artifact{
			ID: a2a.NewArtifactID(), Name: file.name, Description: file.description,
			Parts: a2a.ContentParts{a2a.FilePart{File: a2a.FileBytes{
				FileMeta: a2a.FileMeta{Name: file.name, MimeType: file.mimeType},
				Bytes:    base64.StdEncoding.EncodeToString(file.data),
			}}},
		})
	}
	parts := a2a.ContentParts{a2a.TextPart{Text: out.summary}}
	if out.data != nil {
		parts = append(parts, a2a.DataPart{Data: out.data})
	}
	task.Status = a2a.TaskStatus{State: a2a.TaskStateCompleted, Message: a2a.NewMessageForTask(a2a.MessageRoleAgent, reqCtx, parts...)}
	return task
}

// tinyPNG is a 1×1 white PNG, encoded at its first use: encoding it at
// init allocated 0.85 MB (the compressor's tables) in every cold start.
var tinyPNG = sync.OnceValue(func() []byte {
	img := image.NewGray(image.Rect(0, 0, 1, 1))
	img.Pix[0] = 0xff
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		panic(err)
	}
	return b.Bytes()
})

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
		files:   []outputFile{{name: name, mimeType: "image/png", description: "PNG rendering of " + src, data: tinyPNG()}},
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
