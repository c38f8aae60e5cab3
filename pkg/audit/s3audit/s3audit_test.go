package s3audit

import (
	"encoding/json"
	"io"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/google/go-cmp/cmp"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/clientagent/clientagent/pkg/audit"
)

var sample = audit.Event{
	At: time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC), Conversation: "c_1", Turn: "t_1", User: "dev",
	Kind: audit.KindApproved, CallID: "call/1", Tool: "publish_artifact", ArgumentsHash: "abc", Note: "ok",
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
	log := Log{API: client, Bucket: "audit", Prefix: "dev/"}
	call := sample
	call.Kind, call.Status, call.Note = audit.KindCall, "succeeded", ""
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
	var got audit.Event
	_ = json.Unmarshal(b, &got)
	if diff := cmp.Diff(call, got); diff != "" {
		t.Errorf("stored call event (-want +got):\n%s", diff)
	}
}
