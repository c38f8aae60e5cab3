package awssign

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Answer is the status, headers and body of a service's answer.
type Answer struct {
	Status int
	Header http.Header
	Body   []byte
}

// StatusText is the answer's status as an error code for an answer that
// names none: "503 Service Unavailable".
func (a Answer) StatusText() string { return strconv.Itoa(a.Status) + " " + http.StatusText(a.Status) }

// ServiceError is an error answer's code and message as the AWS JSON and
// REST-JSON protocols send them: the code from X-Amzn-ErrorType (before its
// ':'), else from the body's __type (after its '#'), else the status
// (StatusText); the message from the body's message or Message.
func (a Answer) ServiceError() (code, message string) {
	var b struct {
		Type     string `json:"__type"`
		Message  string `json:"message"`
		MessageU string `json:"Message"`
	}
	_ = json.Unmarshal(a.Body, &b)
	code, _, _ = strings.Cut(a.Header.Get("X-Amzn-ErrorType"), ":")
	if code == "" {
		code = b.Type[strings.LastIndexByte(b.Type, '#')+1:]
	}
	if code == "" {
		code = a.StatusText()
	}
	return code, b.Message + b.MessageU
}

// Send sends the request build makes over client (which signs it) up to
// attempts times (0: 3), as the AWS SDKs' standard retryer would: again
// after a transport error, a 429 or a 5xx, or an answer retry says is worth
// another attempt (a throttling error a service sends as a 400), waiting
// 100 ms, then 200 ms, … and never past ctx. It returns the last answer; an
// error only when no answer came. A body is read up to 1 MB.
func Send(ctx context.Context, client *http.Client, build func(context.Context) (*http.Request, error), attempts int, retry func(Answer) bool) (Answer, error) {
	a, _, err := exchange(ctx, client, build, attempts, retry, false)
	return a, err
}

// Open is Send for an answer that streams: an answer of status 200 ends
// the attempts unread, its body returned for the caller to read and close
// (the Answer has its status and headers only). Any other answer is read
// and tried again as Send does; then the body is nil.
func Open(ctx context.Context, client *http.Client, build func(context.Context) (*http.Request, error), attempts int, retry func(Answer) bool) (Answer, io.ReadCloser, error) {
	return exchange(ctx, client, build, attempts, retry, true)
}

func exchange(ctx context.Context, client *http.Client, build func(context.Context) (*http.Request, error), attempts int, retry func(Answer) bool, stream bool) (Answer, io.ReadCloser, error) {
	if attempts <= 0 {
		attempts = 3
	}
	for attempt := 1; ; attempt++ {
		a, body, err := send(ctx, client, build, stream)
		if body != nil {
			return a, body, nil
		}
		again := err != nil || a.Status == http.StatusTooManyRequests || a.Status >= 500 || (retry != nil && a.Status != http.StatusOK && retry(a))
		if !again || attempt >= attempts || ctx.Err() != nil {
			return a, nil, err
		}
		select {
		case <-ctx.Done():
			return a, nil, err
		case <-time.After(time.Duration(1<<(attempt-1)) * 100 * time.Millisecond):
		}
	}
}

// send makes one attempt. With stream, a 200 answer's body comes back
// unread.
func send(ctx context.Context, client *http.Client, build func(context.Context) (*http.Request, error), stream bool) (Answer, io.ReadCloser, error) {
	req, err := build(ctx)
	if err != nil {
		return Answer{}, nil, err
	}
	res, err := client.Do(req)
	if err != nil {
		return Answer{}, nil, err
	}
	if stream && res.StatusCode == http.StatusOK {
		return Answer{Status: res.StatusCode, Header: res.Header}, res.Body, nil
	}
	defer res.Body.Close()
	b, err := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	if err != nil {
		return Answer{}, nil, fmt.Errorf("read the answer: %w", err)
	}
	return Answer{Status: res.StatusCode, Header: res.Header, Body: b}, nil, nil
}
