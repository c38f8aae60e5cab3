package telemetry

import (
	"net/http"
	"net/url"
	"regexp"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/clientagent/clientagent/pkg/awssign"
)

// XRayService is the SigV4 signing name of X-Ray's OTLP endpoint
// (https://xray.<region>.amazonaws.com/v1/traces, amazonaws.com.cn in the
// China regions), which authorizes a request as xray:PutTraceSegments.
const XRayService = "xray"

var xrayHost = regexp.MustCompile(`^xray\.([a-z0-9-]+)\.amazonaws\.com(\.cn)?$`)

// XRayRegion is the region of an X-Ray OTLP endpoint URL; ok is false for
// any other endpoint, whose requests are not signed.
func XRayRegion(endpoint string) (region string, ok bool) {
	u, err := url.Parse(endpoint)
	if err != nil || u.Scheme != "https" {
		return "", false
	}
	m := xrayHost.FindStringSubmatch(u.Hostname())
	if m == nil {
		return "", false
	}
	return m[1], true
}

// SigV4Client is an HTTP client signing each request with AWS Signature V4
// for service in region, with creds (pkg/awssign): the OTLP exporter's
// client for X-Ray's OTLP endpoint.
func SigV4Client(creds aws.CredentialsProvider, region, service string) *http.Client {
	return &http.Client{Timeout: 10 * time.Second, Transport: awssign.NewTransport(nil, creds, region, service)}
}
