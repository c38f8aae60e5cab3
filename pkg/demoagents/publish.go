package demoagents

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/clientagent/clientagent/pkg/catalog"
)

// Publication is one irreversible publish_artifact effect.
type Publication struct {
	ID          string    `json:"publication_id"`
	ArtifactID  string    `json:"artifact_id"`
	Name        string    `json:"name"`
	MimeType    string    `json:"mime_type"`
	Size        int       `json:"size"`
	SHA256      string    `json:"sha256"`
	Channel     string    `json:"channel"`
	CallID      string    `json:"call_id"` // the A2A message id, the orchestrator's call id
	TaskID      string    `json:"task_id"`
	PublishedAt time.Time `json:"published_at"`
}

func publishSkill(ledger *Ledger) *skill {
	return &skill{
		path:             PathPublish,
		agentName:        "Publisher",
		agentDescription: "Publishes finished artifacts to external channels.",
		id:               "publish_artifact",
		name:             "Publish an artifact",
		description: "Publishes an existing artifact to a channel: web (public website), print (print shop) or archive (long-term records). " +
			"Input: artifact_id of the file to publish (e.g. an SVG or PNG made earlier) and the channel. Output: a publication record " +
			"(id, channel, checksum), no new file. This is irreversible and needs the user's approval.",
		tags:        []string{"publish", "release"},
		examples:    []string{"Publish the PNG to the web"},
		outputModes: []string{"application/json", "text/plain"},
		ext: catalog.SkillExtension{
			InputSchema: json.RawMessage(`{
  "type": "object",
  "properties": {
    "artifact_id": {"type": "string", "x_artifact_ref": true, "description": "The artifact to publish."},
    "channel": {"type": "string", "enum": ["web", "print", "archive"], "description": "Where to publish it."}
  },
  "required": ["artifact_id", "channel"],
  "additionalProperties": false
}`),
			RequiresApproval: true,
			UsageNotes:       "Irreversible: only when the user asked to publish. The user approves the exact call.",
		},
		run: func(ctx context.Context, in *callInput) (*callOutput, error) { return runPublish(ctx, in, ledger) },
	}
}

func runPublish(ctx context.Context, in *callInput, ledger *Ledger) (*callOutput, error) {
	id := argString(in.args, "artifact_id")
	channel := argString(in.args, "channel")
	f, err := in.fetch(ctx, id)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(f.data)
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	p, err := ledger.record(ctx, Publication{
		ID: "pub_" + hex.EncodeToString(rnd[:]), ArtifactID: id, Name: f.name, MimeType: f.mimeType,
		Size: len(f.data), SHA256: hex.EncodeToString(sum[:]), Channel: channel,
		CallID: in.messageID, TaskID: in.taskID, PublishedAt: time.Now().UTC(),
	})
	note := ""
	if errors.Is(err, errAlreadyPublished) {
		note = " (this call was already published; nothing was published again)"
	} else if err != nil {
		return nil, err
	}
	return &callOutput{
		summary: fmt.Sprintf("Published %s to the %s channel as %s%s.", nonEmpty(p.Name, id), p.Channel, p.ID, note),
		data:    toAny(p).(map[string]any),
	}, nil
}
