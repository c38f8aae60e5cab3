// Package sfnlocal is a local AWS Step Functions engine: it loads ASL state
// machines written in JSONata mode and runs them with AWS's semantics,
// invoking Lambda functions as in-process Go handlers, so the turn state
// machine (statemachine/turn.asl.json) runs in one process for `make run`
// and in tests.
//
// It implements what our definitions use: Task (lambda:invoke and
// lambda:invoke.waitForTaskToken), Choice, inline Map, Pass, Succeed and
// Fail; Arguments, Output, Assign, Retry, Catch, TimeoutSeconds and
// HeartbeatSeconds; task tokens; idempotent starts; AWS event histories;
// persistence of running executions (Resume after a restart); and the
// Step Functions JSON 1.0 HTTP protocol for the aws-sdk-go-v2 sfn client.
//
// It must not pretend: any state type, field or resource it does not
// implement is rejected when the state machine is created, naming the state
// and field, and JSONPath machines are rejected. It checks no credentials or
// signatures, so its HTTP endpoint is for loopback use only.
//
// Delivery after a restart is at-least-once: a task that was running when
// the engine closed runs again on Resume, and a Map in flight restarts from
// its input. A task waiting on a token waits again on the same token.
package sfnlocal
