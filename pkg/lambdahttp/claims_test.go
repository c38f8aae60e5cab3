package lambdahttp_test

import (
	"encoding/json"
	"net/http"
	"os"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/clientagent/clientagent/pkg/auth"
	"github.com/clientagent/clientagent/pkg/lambdahttp"
)

// docs/api/openapi.yaml "Auth": on AWS the function reads `sub` from the JWT authorizer's
// context; a request without it is unauthenticated.
func TestGatewaySubjectFromEvent(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("testdata/jwt-post-json.request.json")
	if err != nil {
		t.Fatal(err)
	}
	var withJWT events.APIGatewayV2HTTPRequest
	if err := json.Unmarshal(b, &withJWT); err != nil {
		t.Fatal(err)
	}
	withoutJWT := withJWT
	withoutJWT.RequestContext.Authorizer = nil

	gw := auth.Gateway{Claims: lambdahttp.JWTClaims}
	for _, tc := range []struct {
		name string
		ev   events.APIGatewayV2HTTPRequest
		want string
		ok   bool
	}{
		{"jwt authorizer", withJWT, "user-42", true},
		{"no authorizer", withoutJWT, "", false},
	} {
		var got string
		var gotErr error
		h := lambdahttp.New(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			got, gotErr = gw.Subject(r)
		}))
		if _, err := h.Handle(t.Context(), tc.ev); err != nil {
			t.Fatal(err)
		}
		if got != tc.want || (gotErr == nil) != tc.ok {
			t.Errorf("%s: Subject() = %q, %v; want %q ok=%v", tc.name, got, gotErr, tc.want, tc.ok)
		}
	}
}
