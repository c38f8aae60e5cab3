// Package s3audit is the audit log (pkg/audit) in an S3 bucket, apart from
// the package so that only the functions that write the audit log link
// the S3 SDK (the way pkg/artifact/s3store is apart from pkg/artifact).
// It must not read events back.
package s3audit

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/clientagent/clientagent/pkg/audit"
)

var _ audit.Log = Log{}

// PutAPI is the one S3 call the log makes.
type PutAPI interface {
	PutObject(ctx context.Context, in *s3.PutObjectInput, opts ...func(*s3.Options)) (*s3.PutObjectOutput, error)
}

// Log is an audit.Log in an S3 bucket (AWS): one object per event under
// Prefix. The bucket is meant to be versioned and never expire (infra/).
type Log struct {
	API    PutAPI
	Bucket string
	Prefix string
}

// Record puts each event's object.
func (s Log) Record(ctx context.Context, events ...audit.Event) error {
	var errs []error
	for _, e := range events {
		b, err := json.Marshal(e)
		if err != nil {
			return fmt.Errorf("audit %s: %w", e.Name(), err)
		}
		_, err = s.API.PutObject(ctx, &s3.PutObjectInput{
			Bucket:      aws.String(s.Bucket),
			Key:         aws.String(s.Prefix + e.Name()),
			Body:        bytes.NewReader(b),
			ContentType: aws.String("application/json"),
		})
		if err != nil {
			errs = append(errs, fmt.Errorf("audit %s: %w", e.Name(), err))
		}
	}
	return errors.Join(errs...)
}
