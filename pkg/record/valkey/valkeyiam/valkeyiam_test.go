package valkeyiam_test

import (
	"bufio"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/clientagent/clientagent/pkg/record/valkey"
	"github.com/clientagent/clientagent/pkg/record/valkey/valkeyiam"
)

var signedAt = time.Date(2026, 12, 2, 5, 30, 0, 0, time.UTC)

// countingCreds are fixed credentials that count how often they are asked for.
type countingCreds struct {
	n     atomic.Int32
	creds aws.Credentials
}

func (c *countingCreds) Retrieve(context.Context) (aws.Credentials, error) {
	c.n.Add(1)
	return c.creds, nil
}

func fixedCreds() *countingCreds {
	return &countingCreds{creds: aws.Credentials{AccessKeyID: "AKIDEXAMPLE", SecretAccessKey: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", SessionToken: "session/token+1"}}
}

// The token is the presigned connect request without its scheme, and its
// signature is SigV4's over exactly that request, computed here
// independently of the SDK's signer.
func TestTokenFormat(t *testing.T) {
	t.Parallel()
	for _, serverless := range []bool{true, false} {
		src := &valkeyiam.TokenSource{Credentials: fixedCreds(), Region: "eu-west-1", CacheName: "clientagent-prod-1a2b3c4d",
			UserID: "clientagent-prod-api", Serverless: serverless, Now: func() time.Time { return signedAt }}
		tok, err := src.Token(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		host, rawQuery, ok := strings.Cut(tok, "/?")
		if !ok || host != "clientagent-prod-1a2b3c4d" || strings.Contains(tok, "://") {
			t.Fatalf("token = %q, want clientagent-prod-1a2b3c4d/?… without a scheme", tok)
		}
		q, err := url.ParseQuery(rawQuery)
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]string{
			"Action": "connect", "User": "clientagent-prod-api",
			"X-Amz-Algorithm": "AWS4-HMAC-SHA256", "X-Amz-Credential": "AKIDEXAMPLE/20261202/eu-west-1/elasticache/aws4_request",
			"X-Amz-Date": "20261202T053000Z", "X-Amz-Expires": "900", "X-Amz-SignedHeaders": "host",
			"X-Amz-Security-Token": "session/token+1",
		}
		if serverless {
			want["ResourceType"] = "ServerlessCache"
		}
		for k, v := range want {
			if got := q.Get(k); got != v {
				t.Errorf("serverless=%v: %s = %q, want %q", serverless, k, got, v)
			}
		}
		if len(q) != len(want)+1 {
			t.Errorf("serverless=%v: token parameters %v, want %d (and the signature)", serverless, q, len(want)+1)
		}
		q.Del("X-Amz-Signature")
		if got, want := tokenSignature(tok), sigV4(host, q, "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", "eu-west-1", signedAt); got != want {
			t.Errorf("serverless=%v: signature %s, want %s", serverless, got, want)
		}
	}
}

func tokenSignature(tok string) string {
	_, raw, _ := strings.Cut(tok, "?")
	q, _ := url.ParseQuery(raw)
	return q.Get("X-Amz-Signature")
}

// sigV4 is the signature of GET http://host/?q with only the host header
// signed and an empty body (AWS Signature Version 4, query authentication).
func sigV4(host string, q url.Values, secret, region string, at time.Time) string {
	canonicalQuery := strings.ReplaceAll(q.Encode(), "+", "%20")
	canonical := strings.Join([]string{"GET", "/", canonicalQuery, "host:" + host + "\n", "host",
		hex.EncodeToString(sha256Sum(""))}, "\n")
	scope := at.Format("20060102") + "/" + region + "/elasticache/aws4_request"
	toSign := strings.Join([]string{"AWS4-HMAC-SHA256", at.Format("20060102T150405Z"), scope, hex.EncodeToString(sha256Sum(canonical))}, "\n")
	key := []byte("AWS4" + secret)
	for _, part := range []string{at.Format("20060102"), region, "elasticache", "aws4_request"} {
		key = hmacSum(key, part)
	}
	return hex.EncodeToString(hmacSum(key, toSign))
}

func sha256Sum(s string) []byte { h := sha256.Sum256([]byte(s)); return h[:] }

func hmacSum(key []byte, s string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(s))
	return m.Sum(nil)
}

// Auth signs once and hands out the same token until Refresh has passed,
// then signs a new one, well inside the token's 15 minutes.
func TestAuthRefreshesBeforeExpiry(t *testing.T) {
	t.Parallel()
	now := signedAt
	creds := fixedCreds()
	src := &valkeyiam.TokenSource{Credentials: creds, Region: "eu-west-1", CacheName: "c", UserID: "u", Serverless: true,
		Now: func() time.Time { return now }}
	user, first, err := src.Auth(t.Context())
	if err != nil || user != "u" {
		t.Fatalf("Auth() = %q, %v", user, err)
	}
	now = now.Add(valkeyiam.Refresh - time.Second)
	if _, tok, _ := src.Auth(t.Context()); tok != first || creds.n.Load() != 1 {
		t.Errorf("Auth() before Refresh signed again (%d signings)", creds.n.Load())
	}
	now = now.Add(time.Second)
	_, tok, _ := src.Auth(t.Context())
	if tok == first || creds.n.Load() != 2 || !strings.Contains(tok, "X-Amz-Date=20261202T054000Z") {
		t.Errorf("Auth() at Refresh = %q (%d signings), want a token signed then", tok, creds.n.Load())
	}
	if valkeyiam.Refresh >= valkeyiam.Lifetime {
		t.Errorf("Refresh %v, want before the token's lifetime %v", valkeyiam.Refresh, valkeyiam.Lifetime)
	}
}

// With VALKEY_AUTH=iam a client authenticates each new connection as the
// user with an IAM token, not with the URL's password: what reaches the
// server (a fake that records the commands) is that user and a token.
func TestFromEnvAuthenticatesConnections(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY")
	t.Setenv("AWS_REGION", "eu-west-1")
	t.Setenv("AWS_CONFIG_FILE", "/nonexistent")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
	env := map[string]string{valkeyiam.EnvAuth: "iam", valkeyiam.EnvUser: "clientagent-dev-api", valkeyiam.EnvCacheName: "cache"}
	opts, err := valkeyiam.FromEnv(t.Context(), func(k string) string { return env[k] })
	if err != nil || len(opts) != 1 {
		t.Fatalf("FromEnv() = %d options, %v", len(opts), err)
	}
	addr, commands := fakeServer(t)
	c, err := valkey.NewClient("redis://nobody:not-this@"+addr, opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Set(t.Context(), "k", "v", 0).Err(); err != nil {
		t.Fatalf("SET: %v", err)
	}
	var auth []string
	for _, cmd := range commands() {
		switch strings.ToUpper(cmd[0]) {
		case "HELLO":
			for i, a := range cmd {
				if strings.EqualFold(a, "AUTH") && i+2 < len(cmd) {
					auth = cmd[i+1 : i+3]
				}
			}
		case "AUTH":
			auth = cmd[1:]
		}
	}
	if len(auth) != 2 || auth[0] != "clientagent-dev-api" || !strings.HasPrefix(auth[1], "cache/?Action=connect&") ||
		!strings.Contains(auth[1], "User=clientagent-dev-api") || !strings.Contains(auth[1], "X-Amz-Signature=") {
		t.Errorf("the connection authenticated with %q, want the user and an IAM token (commands %q)", auth, commands())
	}

	for name, bad := range map[string]map[string]string{
		"unknown auth":  {valkeyiam.EnvAuth: "password"},
		"no user":       {valkeyiam.EnvAuth: "iam", valkeyiam.EnvCacheName: "cache"},
		"no cache name": {valkeyiam.EnvAuth: "iam", valkeyiam.EnvUser: "u"},
	} {
		if _, err := valkeyiam.FromEnv(t.Context(), func(k string) string { return bad[k] }); err == nil {
			t.Errorf("FromEnv(%s) = nil error", name)
		}
	}
	if opts, err := valkeyiam.FromEnv(t.Context(), func(string) string { return "" }); err != nil || opts != nil {
		t.Errorf("FromEnv(nothing) = %v, %v; want no options", opts, err)
	}
}

// fakeServer answers RESP commands with OK (HELLO with an error, as a
// server without RESP3 does) and records them.
func fakeServer(t *testing.T) (string, func() [][]string) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	var mu sync.Mutex
	var got [][]string
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				r := bufio.NewReader(conn)
				for {
					cmd, err := readCommand(r)
					if err != nil {
						return
					}
					mu.Lock()
					got = append(got, cmd)
					mu.Unlock()
					reply := "+OK\r\n"
					if strings.EqualFold(cmd[0], "HELLO") {
						reply = "-ERR unknown command 'HELLO'\r\n"
					}
					if _, err := conn.Write([]byte(reply)); err != nil {
						return
					}
				}
			}()
		}
	}()
	return l.Addr().String(), func() [][]string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(got)
	}
}

// readCommand reads one RESP array of bulk strings.
func readCommand(r *bufio.Reader) ([]string, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return nil, err
	}
	if !strings.HasPrefix(line, "*") {
		return nil, fmt.Errorf("not an array: %q", line)
	}
	n, err := strconv.Atoi(strings.TrimSpace(line[1:]))
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, n)
	for range n {
		head, err := r.ReadString('\n')
		if err != nil {
			return nil, err
		}
		size, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(head, "$")))
		if err != nil {
			return nil, err
		}
		b := make([]byte, size+2)
		if _, err := io.ReadFull(r, b); err != nil {
			return nil, err
		}
		out = append(out, string(b[:size]))
	}
	return out, nil
}
