package audit

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/google/go-cmp/cmp"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
)

var sample = Event{
	At: time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC), Conversation: "c_1", Turn: "t_1", User: "dev",
	Kind: KindApproved, CallID: "call/1", Tool: "publish_artifact", ArgumentsHash: "abc", Note: "ok",
}

func TestName(t *testing.T) {
	t.Parallel()
	if got, want := sample.Name(), "c_1/t_1/call_1-approved-abc.json"; got != want {
		t.Errorf("Name() = %q, want %q (no path separators from ids)", got, want)
	}
}

// A retried step records the same event again: one file, not two.
func TestDirIsIdempotent(t *testing.T) {
	t.Parallel()
	d := Dir{Path: t.TempDir()}
	for range 2 {
		if err := d.Record(t.Context(), sample); err != nil {
			t.Fatal(err)
		}
	}
	var files []string
	_ = filepath.WalkDir(d.Path, func(p string, e os.DirEntry, _ error) error {
		if !e.IsDir() {
			files = append(files, p)
		}
		return nil
	})
	if len(files) != 1 {
		t.Fatalf("files = %v, want one", files)
	}
	b, _ := os.ReadFile(files[0])
	var got Event
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(sample, got); diff != "" {
		t.Errorf("stored event (-want +got):\n%s", diff)
	}
}

// The S3 log against an in-process S3-compatible server, through the real SDK.
func TestS3(t *testing.T) {
	t.Parallel()
	backend := s3mem.New()
	if err := backend.CreateBucket("audit"); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gofakes3.New(backend).Server())
	t.Cleanup(srv.Close)
	client := s3.New(s3.Options{Region: "us-east-1", BaseEndpoint: aws.String(srv.URL), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider("AKID", "secret", "")})
	log := S3{API: client, Bucket: "audit", Prefix: "dev/"}
	call := sample
	call.Kind, call.Status, call.Note = KindCall, "succeeded", ""
	if err := log.Record(t.Context(), sample, call, sample); err != nil {
		t.Fatal(err)
	}
	out, err := client.ListObjectsV2(t.Context(), &s3.ListObjectsV2Input{Bucket: aws.String("audit"), Prefix: aws.String("dev/")})
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, o := range out.Contents {
		keys = append(keys, *o.Key)
	}
	if diff := cmp.Diff([]string{"dev/c_1/t_1/call_1-approved-abc.json", "dev/c_1/t_1/call_1-call-abc.json"}, keys); diff != "" {
		t.Errorf("keys (-want +got):\n%s", diff)
	}
	obj, err := client.GetObject(t.Context(), &s3.GetObjectInput{Bucket: aws.String("audit"), Key: aws.String(keys[1])})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(obj.Body)
	var got Event
	_ = json.Unmarshal(b, &got)
	if diff := cmp.Diff(call, got); diff != "" {
		t.Errorf("stored call event (-want +got):\n%s", diff)
	}
}

// Directories are created when an event's write finds them missing: for a
// new turn, and again after the directory was removed.
func TestDirCreatesMissingDirectories(t *testing.T) {
	t.Parallel()
	d := Dir{Path: filepath.Join(t.TempDir(), "audit")}
	second := sample
	second.Turn, second.CallID = "t_2", "call_2"
	for _, e := range []Event{sample, second} {
		if err := d.Record(t.Context(), e); err != nil {
			t.Fatalf("Record(%s) = %v", e.Name(), err)
		}
	}
	if err := os.RemoveAll(filepath.Join(d.Path, "c_1")); err != nil {
		t.Fatal(err)
	}
	again := sample
	again.Kind = KindCall
	if err := d.Record(t.Context(), again); err != nil {
		t.Fatalf("Record after the directory was removed = %v", err)
	}
	if _, err := os.Stat(filepath.Join(d.Path, filepath.FromSlash(again.Name()))); err != nil {
		t.Errorf("event file after the directory was removed: %v", err)
	}
}

// BenchmarkDirRecord is the cost of one event in a turn's existing directory.
func BenchmarkDirRecord(b *testing.B) {
	d := Dir{Path: b.TempDir()}
	e := sample
	for i := 0; b.Loop(); i++ {
		e.CallID = fmt.Sprintf("call_%d", i%32)
		if err := d.Record(b.Context(), e); err != nil {
			b.Fatal(err)
		}
	}
}
