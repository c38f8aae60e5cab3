package a2astore

import (
	"encoding/base64"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/alicebob/miniredis/v2"
	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"
)

func newStore(t *testing.T, opts Options) (*TaskStore, *miniredis.Miniredis) {
	t.Helper()
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	return New(rdb, opts), mr
}

func task(id string, state a2a.TaskState) *a2a.Task {
	msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.DataPart{Data: map[string]any{"holes": float64(24)}},
		a2a.FilePart{File: a2a.FileURI{FileMeta: a2a.FileMeta{Name: "in.svg", MimeType: "image/svg+xml"}, URI: "http://x/in.svg"}})
	msg.ID = "call_1"
	msg.TaskID = a2a.TaskID(id)
	msg.ContextID = "ctx_1"
	return &a2a.Task{
		ID:        a2a.TaskID(id),
		ContextID: "ctx_1",
		Status: a2a.TaskStatus{State: state, Message: &a2a.Message{
			ID: "m2", Role: a2a.MessageRoleAgent, Parts: a2a.ContentParts{a2a.TextPart{Text: "status"}},
		}},
		History: []*a2a.Message{msg},
		Artifacts: []*a2a.Artifact{{
			ID: "a1", Name: "out.png",
			Parts: a2a.ContentParts{a2a.FilePart{File: a2a.FileBytes{
				FileMeta: a2a.FileMeta{Name: "out.png", MimeType: "image/png"},
				Bytes:    base64.StdEncoding.EncodeToString([]byte("png bytes")),
			}}},
		}},
		Metadata: map[string]any{"k": "v"},
	}
}

func TestRoundTrip(t *testing.T) {
	t.Parallel()
	s, mr := newStore(t, Options{})
	want := task("t1", a2a.TaskStateInputRequired)
	if err := s.Save(t.Context(), want); err != nil {
		t.Fatalf("Save() error = %v", err)
	}
	got, err := s.Get(t.Context(), "t1")
	if err != nil {
		t.Fatalf("Get() error = %v", err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Get() mismatch (-want +got):\n%s", diff)
	}
	if !mr.Exists("a2atask:{t1}") {
		t.Errorf("keys = %v, want a2atask:{t1}", mr.Keys())
	}

	// Get returns a copy: changing it does not change the store.
	got.Status.State = a2a.TaskStateWorking
	again, err := s.Get(t.Context(), "t1")
	if err != nil {
		t.Fatalf("Get() error = %v", err)
	}
	if again.Status.State != a2a.TaskStateInputRequired {
		t.Errorf("Get() state = %s, want %s", again.Status.State, a2a.TaskStateInputRequired)
	}
}

func TestGetMissing(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t, Options{})
	if _, err := s.Get(t.Context(), "nope"); !errors.Is(err, a2a.ErrTaskNotFound) {
		t.Errorf("Get(missing) error = %v, want ErrTaskNotFound", err)
	}
}

func TestSaveInvalid(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t, Options{})
	if err := s.Save(t.Context(), &a2a.Task{}); !errors.Is(err, a2a.ErrInvalidParams) {
		t.Errorf("Save(no id) error = %v, want ErrInvalidParams", err)
	}
}

func TestTTL(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		opts  Options
		state a2a.TaskState
		want  time.Duration
	}{
		{"default, waiting", Options{}, a2a.TaskStateInputRequired, 24 * time.Hour},
		{"default, finished", Options{}, a2a.TaskStateCompleted, 24 * time.Hour},
		{"custom, waiting", Options{TTL: time.Hour, TerminalTTL: 10 * time.Minute}, a2a.TaskStateWorking, time.Hour},
		{"custom, finished", Options{TTL: time.Hour, TerminalTTL: 10 * time.Minute}, a2a.TaskStateFailed, 10 * time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, mr := newStore(t, tt.opts)
			if err := s.Save(t.Context(), task("t", tt.state)); err != nil {
				t.Fatalf("Save() error = %v", err)
			}
			if got := mr.TTL("a2atask:{t}"); got != tt.want {
				t.Errorf("TTL() = %v, want %v", got, tt.want)
			}
			mr.FastForward(tt.want + time.Second)
			if _, err := s.Get(t.Context(), "t"); !errors.Is(err, a2a.ErrTaskNotFound) {
				t.Errorf("Get() after TTL error = %v, want ErrTaskNotFound", err)
			}
		})
	}
}

// A save restarts the TTL: a task that keeps being worked on stays.
func TestSaveRefreshesTTL(t *testing.T) {
	t.Parallel()
	s, mr := newStore(t, Options{TTL: time.Hour})
	if err := s.Save(t.Context(), task("t", a2a.TaskStateSubmitted)); err != nil {
		t.Fatalf("Save() error = %v", err)
	}
	mr.FastForward(50 * time.Minute)
	if err := s.Save(t.Context(), task("t", a2a.TaskStateInputRequired)); err != nil {
		t.Fatalf("Save() error = %v", err)
	}
	mr.FastForward(50 * time.Minute)
	if _, err := s.Get(t.Context(), "t"); err != nil {
		t.Errorf("Get() error = %v, want the task", err)
	}
}

func TestTerminalIsFinal(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		stored  a2a.TaskState
		next    a2a.TaskState
		wantErr error
	}{
		{"waiting to working", a2a.TaskStateInputRequired, a2a.TaskStateWorking, nil},
		{"working to completed", a2a.TaskStateWorking, a2a.TaskStateCompleted, nil},
		{"completed to working", a2a.TaskStateCompleted, a2a.TaskStateWorking, ErrTaskFinal},
		{"completed to failed", a2a.TaskStateCompleted, a2a.TaskStateFailed, ErrTaskFinal},
		{"completed to input-required", a2a.TaskStateCompleted, a2a.TaskStateInputRequired, ErrTaskFinal},
		// a2a-go re-saves a canceled task when it is canceled again.
		{"canceled again", a2a.TaskStateCanceled, a2a.TaskStateCanceled, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, _ := newStore(t, Options{})
			if err := s.Save(t.Context(), task("t", tt.stored)); err != nil {
				t.Fatalf("Save(%s) error = %v", tt.stored, err)
			}
			err := s.Save(t.Context(), task("t", tt.next))
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil) != (err == nil) {
				t.Fatalf("Save(%s over %s) error = %v, want %v", tt.next, tt.stored, err, tt.wantErr)
			}
			got, err := s.Get(t.Context(), "t")
			if err != nil {
				t.Fatalf("Get() error = %v", err)
			}
			want := tt.next
			if tt.wantErr != nil {
				want = tt.stored
			}
			if got.Status.State != want {
				t.Errorf("Get() state = %s, want %s", got.Status.State, want)
			}
		})
	}
}

// Two instances racing to finish the same task: exactly one terminal
// state wins and stays.
func TestConcurrentFinish(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t, Options{})
	if err := s.Save(t.Context(), task("t", a2a.TaskStateWorking)); err != nil {
		t.Fatalf("Save() error = %v", err)
	}
	states := []a2a.TaskState{a2a.TaskStateCompleted, a2a.TaskStateFailed, a2a.TaskStateCanceled, a2a.TaskStateRejected}
	var wg sync.WaitGroup
	errs := make([]error, len(states)*5)
	for i := range errs {
		wg.Go(func() { errs[i] = s.Save(t.Context(), task("t", states[i%len(states)])) })
	}
	wg.Wait()
	got, err := s.Get(t.Context(), "t")
	if err != nil {
		t.Fatalf("Get() error = %v", err)
	}
	for i, err := range errs {
		st := states[i%len(states)]
		if st == got.Status.State && err != nil {
			t.Errorf("Save(%s) error = %v, want nil (it won)", st, err)
		}
		if st != got.Status.State && !errors.Is(err, ErrTaskFinal) {
			t.Errorf("Save(%s) error = %v, want ErrTaskFinal (stored %s)", st, err, got.Status.State)
		}
	}
}
