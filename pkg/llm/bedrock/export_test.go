package bedrock

import (
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"

	"github.com/clientagent/clientagent/pkg/llm"
)

// MapOutput is mapOutput, for the fuzz target.
func MapOutput(out *bedrockruntime.ConverseOutput) (*llm.Response, error) { return mapOutput(out) }
