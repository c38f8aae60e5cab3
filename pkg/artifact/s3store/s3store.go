// Package s3store keeps artifacts in an S3 bucket under
// <prefix><cid>/<id>, with the content type as the object's Content-Type,
// and hands out presigned GET URLs. It must not create buckets or hold
// credentials: the *s3.Client it is given carries both region and
// identity.
package s3store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"

	"github.com/clientagent/clientagent/pkg/artifact"
)

// API is the part of the S3 client the store uses; *s3.Client has it.
type API interface {
	PutObject(ctx context.Context, in *s3.PutObjectInput, opts ...func(*s3.Options)) (*s3.PutObjectOutput, error)
	GetObject(ctx context.Context, in *s3.GetObjectInput, opts ...func(*s3.Options)) (*s3.GetObjectOutput, error)
	ListObjectsV2(ctx context.Context, in *s3.ListObjectsV2Input, opts ...func(*s3.Options)) (*s3.ListObjectsV2Output, error)
	DeleteObjects(ctx context.Context, in *s3.DeleteObjectsInput, opts ...func(*s3.Options)) (*s3.DeleteObjectsOutput, error)
}

// Presigner makes presigned GET requests; *s3.PresignClient has it.
type Presigner interface {
	PresignGetObject(ctx context.Context, in *s3.GetObjectInput, opts ...func(*s3.PresignOptions)) (*v4.PresignedHTTPRequest, error)
}

// MaxObjectBytes bounds one Put. Bodies are buffered so the SDK can sign
// and checksum them; artifacts are images and documents, not media.
const MaxObjectBytes = 100 << 20

// ErrTooLarge is returned by Put for a body over MaxObjectBytes.
var ErrTooLarge = artifact.ErrTooLarge

// Store is an artifact.Store on S3.
type Store struct {
	api     API
	presign Presigner
	bucket  string
	prefix  string
	timeout time.Duration
	// pageSize is ListObjectsV2's MaxKeys; 0 means the service default (1000).
	pageSize int32
}

var _ artifact.Store = (*Store)(nil)

// New returns a Store using client for bucket; keys start with prefix
// (e.g. "artifacts/", may be empty).
func New(client *s3.Client, bucket, prefix string) *Store {
	return NewWithAPI(client, s3.NewPresignClient(client), bucket, prefix)
}

// NewWithAPI returns a Store on any implementation of the S3 calls.
func NewWithAPI(api API, presign Presigner, bucket, prefix string) *Store {
	return &Store{api: api, presign: presign, bucket: bucket, prefix: prefix, timeout: 30 * time.Second}
}

func (s *Store) key(cid, id string) string { return s.prefix + cid + "/" + id }

// Put uploads body under cid/id with Content-Type mimeType.
func (s *Store) Put(ctx context.Context, cid, id, mimeType string, body io.Reader) (int64, error) {
	if err := artifact.CheckNames(cid, id); err != nil {
		return 0, err
	}
	b, err := io.ReadAll(io.LimitReader(body, MaxObjectBytes+1))
	if err != nil {
		return 0, fmt.Errorf("read artifact %s/%s: %w", cid, id, err)
	}
	if len(b) > MaxObjectBytes {
		return 0, fmt.Errorf("put artifact %s/%s: %w", cid, id, ErrTooLarge)
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	_, err = s.api.PutObject(ctx, &s3.PutObjectInput{
		Bucket:        &s.bucket,
		Key:           ptr(s.key(cid, id)),
		Body:          bytes.NewReader(b),
		ContentLength: ptr(int64(len(b))),
		ContentType:   &mimeType,
	})
	if err != nil {
		return 0, fmt.Errorf("put artifact %s/%s: %w", cid, id, err)
	}
	return int64(len(b)), nil
}

// Get opens cid/id; artifact.ErrNotFound if absent. The body is read under
// the caller's context, not the store's timeout.
func (s *Store) Get(ctx context.Context, cid, id string) (io.ReadCloser, string, error) {
	if err := artifact.CheckNames(cid, id); err != nil {
		return nil, "", err
	}
	out, err := s.api.GetObject(ctx, &s3.GetObjectInput{Bucket: &s.bucket, Key: ptr(s.key(cid, id))})
	if isNotFound(err) {
		return nil, "", fmt.Errorf("get artifact %s/%s: %w", cid, id, artifact.ErrNotFound)
	}
	if err != nil {
		return nil, "", fmt.Errorf("get artifact %s/%s: %w", cid, id, err)
	}
	mt := "application/octet-stream"
	if out.ContentType != nil && *out.ContentType != "" {
		mt = *out.ContentType
	}
	return out.Body, mt, nil
}

func isNotFound(err error) bool {
	if err == nil {
		return false
	}
	var nsk *types.NoSuchKey
	if errors.As(err, &nsk) {
		return true
	}
	var api smithy.APIError
	if errors.As(err, &api) {
		switch api.ErrorCode() {
		case "NoSuchKey", "NotFound", "NoSuchBucket":
			return true
		}
	}
	return false
}

// URL presigns a GET of cid/id valid for ttl.
func (s *Store) URL(ctx context.Context, cid, id string, ttl time.Duration) (string, error) {
	if err := artifact.CheckNames(cid, id); err != nil {
		return "", err
	}
	// The link downloads bytes, whatever the object's type: S3 cannot send
	// a sandboxing CSP, so an SVG or HTML object opened from the link must
	// not render as a page of the bucket's origin. The page re-types what
	// it fetches from the catalog's type to show an image.
	req, err := s.presign.PresignGetObject(ctx, &s3.GetObjectInput{Bucket: &s.bucket, Key: ptr(s.key(cid, id)),
		ResponseContentDisposition: ptr("attachment"), ResponseContentType: ptr("application/octet-stream")},
		s3.WithPresignExpires(ttl))
	if err != nil {
		return "", fmt.Errorf("presign artifact %s/%s: %w", cid, id, err)
	}
	return req.URL, nil
}

// Delete deletes cid/id (S3 answers a missing key as deleted).
func (s *Store) Delete(ctx context.Context, cid, id string) error {
	if err := artifact.CheckNames(cid, id); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	out, err := s.api.DeleteObjects(ctx, &s3.DeleteObjectsInput{Bucket: &s.bucket,
		Delete: &types.Delete{Objects: []types.ObjectIdentifier{{Key: ptr(s.key(cid, id))}}, Quiet: ptr(true)}})
	if err != nil {
		return fmt.Errorf("delete artifact %s/%s: %w", cid, id, err)
	}
	if len(out.Errors) > 0 {
		return fmt.Errorf("delete artifact %s/%s: %s", cid, id, deref(out.Errors[0].Message))
	}
	return nil
}

// DeleteConversation deletes every object under <prefix><cid>/, a page of
// up to 1000 keys at a time.
func (s *Store) DeleteConversation(ctx context.Context, cid string) error {
	if err := artifact.CheckNames(cid); err != nil {
		return err
	}
	prefix := s.prefix + cid + "/"
	var token *string
	for {
		cctx, cancel := context.WithTimeout(ctx, s.timeout)
		in := &s3.ListObjectsV2Input{Bucket: &s.bucket, Prefix: &prefix, ContinuationToken: token}
		if s.pageSize > 0 {
			in.MaxKeys = &s.pageSize
		}
		page, err := s.api.ListObjectsV2(cctx, in)
		cancel()
		if err != nil {
			return fmt.Errorf("list conversation %s artifacts: %w", cid, err)
		}
		if len(page.Contents) > 0 {
			ids := make([]types.ObjectIdentifier, 0, len(page.Contents))
			for _, o := range page.Contents {
				ids = append(ids, types.ObjectIdentifier{Key: o.Key})
			}
			cctx, cancel := context.WithTimeout(ctx, s.timeout)
			out, err := s.api.DeleteObjects(cctx, &s3.DeleteObjectsInput{Bucket: &s.bucket, Delete: &types.Delete{Objects: ids, Quiet: ptr(true)}})
			cancel()
			if err != nil {
				return fmt.Errorf("delete conversation %s artifacts: %w", cid, err)
			}
			if len(out.Errors) > 0 {
				e := out.Errors[0]
				return fmt.Errorf("delete conversation %s artifacts: %d failed, first %s: %s", cid, len(out.Errors), deref(e.Key), deref(e.Message))
			}
		}
		if page.IsTruncated == nil || !*page.IsTruncated || page.NextContinuationToken == nil {
			return nil
		}
		token = page.NextContinuationToken
	}
}

func ptr[T any](v T) *T { return &v }

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
