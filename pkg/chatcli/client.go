package chatcli

import (
	"github.com/clientagent/clientagent/pkg/apiclient"
	"github.com/clientagent/clientagent/pkg/wire"
)

// The API's vocabulary (pkg/wire) under the names this client has always
// used.
const (
	StatusRunning          = wire.StatusRunning
	StatusAwaitingInput    = wire.StatusAwaitingInput
	StatusAwaitingApproval = wire.StatusAwaitingApproval
	StatusSucceeded        = wire.StatusSucceeded
	StatusFailed           = wire.StatusFailed
	StatusExpired          = wire.StatusExpired
	StatusSuperseded       = wire.StatusSuperseded
	StatusCancelled        = wire.StatusCancelled
	StatusBlocked          = wire.StatusBlocked
)

type (
	Turn         = wire.Turn
	Form         = wire.Form
	FormCall     = wire.FormCall
	FormField    = wire.FormField
	Approval     = wire.Approval
	ApprovalCall = wire.ApprovalCall
	ArtifactRef  = wire.ArtifactRef
	Step         = wire.Step
	Event        = wire.Event
	Input        = wire.Input
	Decision     = wire.Decision
	Workflow     = wire.Workflow
	Client       = apiclient.Client
	APIError     = apiclient.APIError
)

// IsClientError reports whether err is a 4xx answer of the API.
func IsClientError(err error) bool { return apiclient.IsClientError(err) }

// Unavailable returns the 503 answer err carries, or nil.
func Unavailable(err error) *APIError { return apiclient.Unavailable(err) }
