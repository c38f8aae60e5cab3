package sfnlocal

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// Issue 29: the task result is written out once, the payload spliced in,
// not decoded, re-encoded and decoded again; it must still be the JSON of
// the value the next state reads, in json.Marshal's key order.
func TestLambdaResultIsTheJSONOfItsValue(t *testing.T) {
	for _, payload := range []string{
		`{"a":1,"b":[true,null,"x"],"c":{"d":1.5}}`,
		"{\n  \"next\": \"tools\",\n  \"n\": 12345678901\n}",
		`"text \u003cb\u003e \u0026 more"`, // as json.Marshal writes a handler's output
		`null`,
	} {
		out, v := lambdaResult(json.RawMessage(payload))
		var back any
		if err := json.Unmarshal([]byte(out), &back); err != nil {
			t.Fatalf("%s: output %s is not JSON: %v", payload, out, err)
		}
		if !reflect.DeepEqual(back, any(v)) {
			t.Errorf("%s: output decodes to %v, the value is %v", payload, back, v)
		}
		if want := mustJSON(v); !strings.Contains(payload, "\n") && out != want {
			t.Errorf("%s: output\n%s\nwant json.Marshal's\n%s", payload, out, want)
		}
	}
}
