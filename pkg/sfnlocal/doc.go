// Package sfnlocal is a local AWS Step Functions engine: it loads ASL state
// machines written in JSONata mode and runs them with AWS's semantics,
// invoking Lambda functions as in-process Go handlers, so the turn state
// machine (statemachine/turn.asl.json) runs in one process for `make run`
// and in tests.
//
// It implements what our definitions use: Task (lambda:invoke,
// lambda:invoke.waitForTaskToken and states:startExecution.sync:2),
// STANDARD and EXPRESS state machines, Choice, inline Map, Pass, Succeed and
// Fail; Arguments, Output, Assign, Retry, Catch, TimeoutSeconds and
// HeartbeatSeconds; task tokens; idempotent starts; AWS event histories;
// persistence of executions (Resume after a restart); and the Step
// Functions JSON 1.0 HTTP protocol for the aws-sdk-go-v2 sfn client. As on
// AWS, an execution's history holds at most MaxHistoryEvents events: a
// machine that loops forever fails there (States.Runtime) instead of
// running until the process runs out of memory.
//
// It must not pretend: any state type, field or resource it does not
// implement is rejected when the state machine is created, naming the state
// and field, and JSONPath machines are rejected; every JSONata expression
// is compiled then, once. It checks no credentials or signatures, so its
// HTTP endpoint is for loopback use only.
//
// # Persistence
//
// With a Persister, an execution is saved when it starts, before a Task or
// Map that follows another task's result, when a task waits on a token or
// to retry, and when it ends; never for a Choice or Pass state alone. A
// RedisPersister writes what a save adds (the position and the new history
// events) and the definition once per process, under its hash. It is a
// Claimer: a STANDARD execution's start is one round trip, a script that
// stores the first save only if no execution of that name is stored, so
// StartExecution learns that the name is free (or taken by an execution
// that ended before a restart) and saves the start together, before the
// first state runs. With another Persister the engine reads first, then
// saves while the first states run.
//
// Delivery after a restart is at-least-once: a resumed execution runs from
// its last save, so a task that was running, or whose result came after
// that save, runs again, and so do the Choice and Pass states that follow
// it (they give the same outcome from the same input and variables). A Map
// in flight restarts from its input. A task waiting on a token waits again
// on the same token; one waiting to retry retries at the same time with
// the same counts.
//
// The engine keeps the running executions in memory and the newest
// KeepEnded ended ones; older ones are read back from the Persister, which
// keeps an ended execution for its retention (DefaultRetention unless set;
// an EXPIRE in Valkey) so DescribeExecution and GetExecutionHistory answer
// for it.
//
// # EXPRESS machines and startExecution.sync:2
//
// An EXPRESS machine (CreateStateMachineOfType) runs at most five minutes
// (ExpressMaxSeconds, its default TimeoutSeconds), may not wait for a task
// token nor run a .sync task, and is never persisted: delivery is
// at-least-once, and after a restart the resumed parent's .sync task
// starts a new child. A startExecution.sync:2 task returns the child's
// description with Input and Output parsed; a child that fails, times out
// or is stopped fails the task with States.TaskFailed, the description as
// the cause. Stopping or timing out a parent stops its running children.
// The engine keeps each child's history with its parent in memory
// (FullHistory splices it in), where AWS sends an EXPRESS history to
// CloudWatch Logs only.
//
// # Invocation errors
//
// A handler's error is named after its Go type, as aws-lambda-go names it
// (a messages.InvokeResponse_Error keeps its Type). The engine's own faults
// while invoking carry the names Lambda gives them:
//
//	function not registered                    Lambda.ResourceNotFoundException
//	handler panics, or returns non-JSON        Lambda.Unknown (an unhandled function error)
//	invocation outlasts Options.InvokeTimeout  Lambda.ClientExecutionTimeoutException
//	Task TimeoutSeconds passes                 States.Timeout
//	Task HeartbeatSeconds passes               States.HeartbeatTimeout
//
// Lambda.ServiceException, Lambda.AWSLambdaException,
// Lambda.SdkClientException and Lambda.TooManyRequestsException come from
// the Lambda service, the network to it and its concurrency quota, which an
// in-process call does not have: the engine never raises them, but a
// handler returning a messages.InvokeResponse_Error of that Type fails with
// that name, which is how a test exercises a Retry written for them.
package sfnlocal
