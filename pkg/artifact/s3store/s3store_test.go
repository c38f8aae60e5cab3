package s3store

import (
	"context"
	"fmt"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/clientagent/clientagent/pkg/artifact"
	"github.com/clientagent/clientagent/pkg/artifact/artifacttest"
)

// countingAPI passes calls to the real client and counts list pages.
type countingAPI struct {
	API
	lists int
}

func (c *countingAPI) ListObjectsV2(ctx context.Context, in *s3.ListObjectsV2Input, opts ...func(*s3.Options)) (*s3.ListObjectsV2Output, error) {
	c.lists++
	return c.API.ListObjectsV2(ctx, in, opts...)
}

// newFakeS3 starts an in-process S3-compatible server and returns a real
// SDK client pointed at it.
func newFakeS3(t *testing.T, bucket string) *s3.Client {
	t.Helper()
	backend := s3mem.New()
	if err := backend.CreateBucket(bucket); err != nil {
		t.Fatalf("CreateBucket() error = %v", err)
	}
	srv := httptest.NewServer(gofakes3.New(backend).Server())
	t.Cleanup(srv.Close)
	return s3.New(s3.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(srv.URL),
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", ""),
	})
}

func TestConformance(t *testing.T) {
	t.Parallel()
	artifacttest.Run(t, New(newFakeS3(t, "artifacts"), "artifacts", "env/dev/"))
}

func TestKeysAndPaging(t *testing.T) {
	t.Parallel()
	client := newFakeS3(t, "b")
	counted := &countingAPI{API: client}
	s := NewWithAPI(counted, s3.NewPresignClient(client), "b", "p/")
	ctx := t.Context()
	// More than one ListObjectsV2 page of a small size forces paging.
	s.pageSize = 10
	for i := range 25 {
		if _, err := s.Put(ctx, "c1", fmt.Sprintf("a%02d", i), "text/plain", strings.NewReader("x")); err != nil {
			t.Fatalf("Put() error = %v", err)
		}
	}
	if _, err := s.Put(ctx, "c10", "a00", "text/plain", strings.NewReader("keep")); err != nil {
		t.Fatalf("Put() error = %v", err)
	}
	out, err := client.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String("b"), Prefix: aws.String("p/c1/")})
	if err != nil {
		t.Fatalf("ListObjectsV2() error = %v", err)
	}
	if len(out.Contents) != 25 || *out.Contents[0].Key != "p/c1/a00" {
		t.Fatalf("keys under p/c1/ = %d (first %v), want 25 starting p/c1/a00", len(out.Contents), out.Contents[0].Key)
	}
	if err := s.DeleteConversation(ctx, "c1"); err != nil {
		t.Fatalf("DeleteConversation() error = %v", err)
	}
	if counted.lists != 3 {
		t.Errorf("DeleteConversation made %d ListObjectsV2 calls, want 3 pages of 10", counted.lists)
	}
	all, err := client.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String("b")})
	if err != nil {
		t.Fatalf("ListObjectsV2() error = %v", err)
	}
	// c10 shares the "c1" prefix text but not the "c1/" folder.
	if len(all.Contents) != 1 || *all.Contents[0].Key != "p/c10/a00" {
		var keys []string
		for _, o := range all.Contents {
			keys = append(keys, *o.Key)
		}
		t.Errorf("keys after DeleteConversation(c1) = %v, want [p/c10/a00]", keys)
	}
}

// Issue 27, point 8: a presigned link downloads bytes whatever the
// object's type, since S3 cannot send a sandboxing CSP: an SVG opened from
// it must not render as a page.
func TestPresignedLinksDownload(t *testing.T) {
	t.Parallel()
	client := s3.New(s3.Options{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("AKID", "secret", "")})
	s := NewWithAPI(client, s3.NewPresignClient(client), "b", "p/")
	link, err := s.URL(t.Context(), "c1", "a1", 5*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(link)
	q := u.Query()
	if q.Get("response-content-disposition") != "attachment" || q.Get("response-content-type") != "application/octet-stream" {
		t.Errorf("link %s: want response-content-disposition=attachment and response-content-type=application/octet-stream", link)
	}
	if !strings.Contains(q.Get("X-Amz-SignedHeaders"), "host") || q.Get("X-Amz-Signature") == "" {
		t.Errorf("link %s is not signed", link)
	}
}

func TestPassiveTypes(t *testing.T) {
	for mt, want := range map[string]bool{"image/png": true, "IMAGE/JPEG": true, "text/plain; charset=utf-8": true,
		"image/svg+xml": false, "text/html": false, "application/xhtml+xml": false, "application/pdf": false, "": false} {
		if got := artifact.Passive(mt); got != want {
			t.Errorf("Passive(%q) = %v, want %v", mt, got, want)
		}
	}
	if d := artifact.Disposition("a.svg", "image/svg+xml"); d != `attachment; filename=a.svg` {
		t.Errorf("Disposition(svg) = %q", d)
	}
}
