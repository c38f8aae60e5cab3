package sfnlocal

import (
	"encoding/json"
	"time"
)

// HistoryEvent is one event of an execution's history, with the Step
// Functions event type names and the JSON field names of the
// GetExecutionHistory wire format. PreviousEventID is simply the event
// before it (AWS threads Map iterations more finely; counts are the same).
type HistoryEvent struct {
	ID              int64     `json:"id"`
	PreviousEventID int64     `json:"previousEventId"`
	Timestamp       time.Time `json:"-"`
	Type            string    `json:"type"`

	ExecutionStartedEventDetails   *ExecutionDetails `json:"executionStartedEventDetails,omitempty"`
	ExecutionSucceededEventDetails *ExecutionDetails `json:"executionSucceededEventDetails,omitempty"`
	ExecutionFailedEventDetails    *ExecutionDetails `json:"executionFailedEventDetails,omitempty"`
	ExecutionAbortedEventDetails   *ExecutionDetails `json:"executionAbortedEventDetails,omitempty"`
	ExecutionTimedOutEventDetails  *ExecutionDetails `json:"executionTimedOutEventDetails,omitempty"`

	StateEnteredEventDetails *StateDetails `json:"stateEnteredEventDetails,omitempty"`
	StateExitedEventDetails  *StateDetails `json:"stateExitedEventDetails,omitempty"`

	TaskScheduledEventDetails *TaskDetails `json:"taskScheduledEventDetails,omitempty"`
	TaskStartedEventDetails   *TaskDetails `json:"taskStartedEventDetails,omitempty"`
	TaskSubmittedEventDetails *TaskDetails `json:"taskSubmittedEventDetails,omitempty"`
	TaskSucceededEventDetails *TaskDetails `json:"taskSucceededEventDetails,omitempty"`
	TaskFailedEventDetails    *TaskDetails `json:"taskFailedEventDetails,omitempty"`
	TaskTimedOutEventDetails  *TaskDetails `json:"taskTimedOutEventDetails,omitempty"`

	MapStateStartedEventDetails       *MapStartedDetails   `json:"mapStateStartedEventDetails,omitempty"`
	MapIterationStartedEventDetails   *MapIterationDetails `json:"mapIterationStartedEventDetails,omitempty"`
	MapIterationSucceededEventDetails *MapIterationDetails `json:"mapIterationSucceededEventDetails,omitempty"`
	MapIterationFailedEventDetails    *MapIterationDetails `json:"mapIterationFailedEventDetails,omitempty"`
	MapIterationAbortedEventDetails   *MapIterationDetails `json:"mapIterationAbortedEventDetails,omitempty"`
}

// historyEventWire adds the timestamp as epoch seconds, as the JSON 1.0
// protocol sends timestamps.
type historyEventWire struct {
	Timestamp float64 `json:"timestamp"`
	*historyEventAlias
}

type historyEventAlias HistoryEvent

// MarshalJSON writes the event in the Step Functions wire format.
func (h HistoryEvent) MarshalJSON() ([]byte, error) {
	a := historyEventAlias(h)
	return json.Marshal(historyEventWire{Timestamp: epoch(h.Timestamp), historyEventAlias: &a})
}

// UnmarshalJSON reads the wire format back (used by persistence).
func (h *HistoryEvent) UnmarshalJSON(b []byte) error {
	var w historyEventWire
	w.historyEventAlias = (*historyEventAlias)(h)
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	h.Timestamp = fromEpoch(w.Timestamp)
	return nil
}

func epoch(t time.Time) float64 {
	if t.IsZero() {
		return 0
	}
	return float64(t.UnixNano()) / 1e9
}

func fromEpoch(f float64) time.Time {
	if f == 0 {
		return time.Time{}
	}
	return time.Unix(0, int64(f*1e9)).UTC()
}

// ExecutionDetails are the details of the Execution* events.
type ExecutionDetails struct {
	Input   string `json:"input,omitempty"`
	Output  string `json:"output,omitempty"`
	Error   string `json:"error,omitempty"`
	Cause   string `json:"cause,omitempty"`
	RoleArn string `json:"roleArn,omitempty"`
}

// StateDetails are the details of the *StateEntered and *StateExited events.
type StateDetails struct {
	Name   string `json:"name"`
	Input  string `json:"input,omitempty"`
	Output string `json:"output,omitempty"`
}

// TaskDetails are the details of the Task* events.
type TaskDetails struct {
	ResourceType       string `json:"resourceType"`
	Resource           string `json:"resource"`
	Region             string `json:"region,omitempty"`
	Parameters         string `json:"parameters,omitempty"`
	TimeoutInSeconds   int64  `json:"timeoutInSeconds,omitempty"`
	HeartbeatInSeconds int64  `json:"heartbeatInSeconds,omitempty"`
	Output             string `json:"output,omitempty"`
	Error              string `json:"error,omitempty"`
	Cause              string `json:"cause,omitempty"`
}

// MapStartedDetails are the details of MapStateStarted.
type MapStartedDetails struct {
	Length int `json:"length"`
}

// MapIterationDetails are the details of the MapIteration* events.
type MapIterationDetails struct {
	Name  string `json:"name"`
	Index int    `json:"index"`
}
