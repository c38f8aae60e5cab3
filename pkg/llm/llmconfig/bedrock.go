package llmconfig

import (
	"errors"
	"time"

	"github.com/clientagent/clientagent/pkg/llm"
)

func newBedrock(model string, flavours map[llm.Flavour]string, attempts int, timeout time.Duration) (llm.Provider, string, error) {
	return nil, "", errors.New("llm config: bedrock provider not built yet")
}
