package demoagents

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
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

// Ledger records publications, in memory and optionally appended to a
// JSONL file. It is safe for concurrent use. A call id is published at
// most once: a retried call gets the earlier publication back.
type Ledger struct {
	mu   sync.Mutex
	list []Publication
	file *os.File
}

// NewMemoryLedger returns an empty in-memory Ledger.
func NewMemoryLedger() *Ledger { return &Ledger{} }

// NewLedger returns a Ledger backed by the JSONL file at path: existing
// lines are loaded, new publications appended. The caller closes it.
func NewLedger(path string) (*Ledger, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open ledger %s: %w", path, err)
	}
	l := &Ledger{file: f}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if len(sc.Bytes()) == 0 {
			continue
		}
		var p Publication
		if err := json.Unmarshal(sc.Bytes(), &p); err != nil {
			f.Close()
			return nil, fmt.Errorf("read ledger %s: %w", path, err)
		}
		l.list = append(l.list, p)
	}
	if err := sc.Err(); err != nil {
		f.Close()
		return nil, fmt.Errorf("read ledger %s: %w", path, err)
	}
	return l, nil
}

// Close closes the ledger's file, if any.
func (l *Ledger) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.file == nil {
		return nil
	}
	err := l.file.Close()
	l.file = nil
	return err
}

// errAlreadyPublished marks a retried call id.
var errAlreadyPublished = errors.New("already published")

// record stores p unless its call id was recorded before, in which case it
// returns the earlier publication and errAlreadyPublished.
func (l *Ledger) record(p Publication) (Publication, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if p.CallID != "" {
		for _, old := range l.list {
			if old.CallID == p.CallID {
				return old, errAlreadyPublished
			}
		}
	}
	if l.file != nil {
		b, err := json.Marshal(p)
		if err != nil {
			return p, fmt.Errorf("encode publication: %w", err)
		}
		if _, err := l.file.Write(append(b, '\n')); err != nil {
			return p, fmt.Errorf("append publication: %w", err)
		}
	}
	l.list = append(l.list, p)
	return p, nil
}

// List returns a copy of all publications in the order they were made.
func (l *Ledger) List() []Publication {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Publication{}, l.list...)
}

// Len returns how many publications were made.
func (l *Ledger) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.list)
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
	p, err := ledger.record(Publication{
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
