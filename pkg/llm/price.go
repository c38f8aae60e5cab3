package llm

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"strings"
)

// Price is what a model charges per million tokens, in US dollars: fresh
// input, input read from the prompt cache, input written to it (Bedrock;
// zero means the fresh input price) and output.
type Price struct {
	Input       float64 `json:"input"`
	CachedInput float64 `json:"cached_input"`
	CacheWrite  float64 `json:"cache_write,omitempty"`
	Output      float64 `json:"output"`
}

// CostMicros is what usage u costs at price p, in millionths of a US
// dollar: cached reads at the cached rate, cache writes at the write rate,
// the rest of the input at the input rate.
func (p Price) CostMicros(u Usage) int64 {
	write := p.CacheWrite
	if write == 0 {
		write = p.Input
	}
	fresh := max(u.InputTokens-u.CachedInputTokens-u.CacheWriteTokens, 0)
	// $ per 1M tokens × tokens = micro-dollars.
	c := p.Input*float64(fresh) + p.CachedInput*float64(u.CachedInputTokens) +
		write*float64(u.CacheWriteTokens) + p.Output*float64(u.OutputTokens)
	return int64(math.Round(c))
}

// Prices maps a model id, or the start of one, to its price.
type Prices map[string]Price

// DefaultPrices are the list prices (USD per 1M tokens, on-demand, late
// 2025) of the models the stack names and their close relatives. A price
// table in CLIENTAGENT_PRICES replaces or adds entries.
func DefaultPrices() Prices {
	return Prices{
		"gpt-4o":                      {Input: 2.50, CachedInput: 1.25, Output: 10.00},
		"gpt-4o-mini":                 {Input: 0.15, CachedInput: 0.075, Output: 0.60},
		"gpt-4.1":                     {Input: 2.00, CachedInput: 0.50, Output: 8.00},
		"gpt-4.1-mini":                {Input: 0.40, CachedInput: 0.10, Output: 1.60},
		"gpt-4.1-nano":                {Input: 0.10, CachedInput: 0.025, Output: 0.40},
		"gpt-5":                       {Input: 1.25, CachedInput: 0.125, Output: 10.00},
		"gpt-5-mini":                  {Input: 0.25, CachedInput: 0.025, Output: 2.00},
		"gpt-5-nano":                  {Input: 0.05, CachedInput: 0.005, Output: 0.40},
		"amazon.nova-pro":             {Input: 0.80, CachedInput: 0.20, Output: 3.20},
		"amazon.nova-lite":            {Input: 0.06, CachedInput: 0.015, Output: 0.24},
		"amazon.nova-micro":           {Input: 0.035, CachedInput: 0.00875, Output: 0.14},
		"amazon.nova-premier":         {Input: 2.50, CachedInput: 0.625, Output: 12.50},
		"anthropic.claude-3-5-haiku":  {Input: 0.80, CachedInput: 0.08, CacheWrite: 1.00, Output: 4.00},
		"anthropic.claude-3-7-sonnet": {Input: 3.00, CachedInput: 0.30, CacheWrite: 3.75, Output: 15.00},
		"anthropic.claude-sonnet-4":   {Input: 3.00, CachedInput: 0.30, CacheWrite: 3.75, Output: 15.00},
		"anthropic.claude-haiku-4-5":  {Input: 1.00, CachedInput: 0.10, CacheWrite: 1.25, Output: 5.00},
		"anthropic.claude-opus-4":     {Input: 15.00, CachedInput: 1.50, CacheWrite: 18.75, Output: 75.00},
		"scripted":                    {},
	}
}

// Lookup finds model's price: the entry of the model id itself, else of
// the longest entry the id starts with, after dropping a cross-region
// inference prefix ("us.", "eu.", "apac.", "global.").
func (ps Prices) Lookup(model string) (Price, bool) {
	if p, ok := ps[model]; ok {
		return p, true
	}
	id := model
	for _, region := range []string{"us.", "eu.", "apac.", "us-gov.", "jp.", "au.", "global."} {
		if strings.HasPrefix(id, region) {
			id = strings.TrimPrefix(id, region)
			break
		}
	}
	best, found := "", false
	for k := range ps {
		if strings.HasPrefix(id, k) && len(k) > len(best) {
			best, found = k, true
		}
	}
	return ps[best], found
}

// LoadPrices is DefaultPrices with the entries of spec added: spec is
// empty, a JSON object ({"model": {"input": …, "cached_input": …,
// "cache_write": …, "output": …}}), or the path of a file holding one.
func LoadPrices(spec string) (Prices, error) {
	ps := DefaultPrices()
	spec = strings.TrimSpace(spec)
	if spec == "" {
		return ps, nil
	}
	raw := []byte(spec)
	if !strings.HasPrefix(spec, "{") {
		b, err := os.ReadFile(spec)
		if err != nil {
			return nil, fmt.Errorf("price table: %w", err)
		}
		raw = b
	}
	var extra Prices
	if err := json.Unmarshal(raw, &extra); err != nil {
		return nil, fmt.Errorf("price table: %w", err)
	}
	for k, p := range extra {
		if p.Input < 0 || p.CachedInput < 0 || p.CacheWrite < 0 || p.Output < 0 {
			return nil, fmt.Errorf("price table: %s: negative price", k)
		}
		ps[k] = p
	}
	return ps, nil
}
