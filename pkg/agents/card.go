package agents

import (
	"encoding/json"
	"net/url"
	"strconv"
	"strings"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/clientagent/clientagent/pkg/catalog"
)

// PlainInputSchema is the input schema of a skill whose card carries no
// schema extension (docs/design.md §5): the model writes one string, sent as text.
var PlainInputSchema = json.RawMessage(`{"type":"object","properties":{"input":{"type":"string","description":"The complete request for this skill in plain language, including every detail it needs."}},"required":["input"]}`)

// ParseAgentList splits a comma-separated list of agent base URLs (the
// CLIENTAGENT_AGENTS setting): blanks are dropped, trailing slashes removed
// and duplicates kept once, in first-seen order.
func ParseAgentList(s string) []string {
	var out []string
	seen := map[string]bool{}
	for _, f := range strings.Split(s, ",") {
		u := normalizeBaseURL(f)
		if u == "" || seen[u] {
			continue
		}
		seen[u] = true
		out = append(out, u)
	}
	return out
}

func normalizeBaseURL(s string) string {
	return strings.TrimRight(strings.TrimSpace(s), "/")
}

// CapabilitiesFromCard returns one capability per skill of card, fetched
// from baseURL. A skill described in our extension (catalog.ExtensionURI,
// params.skills.<skill_id>) gets its input schema, approval flag, usage
// notes and user-input fields; a skill without one, or whose entry has no
// input_schema, is Plain: its schema is PlainInputSchema and it is sent text.
// Tool names are sanitized but not yet unique across agents (see
// uniqueTools).
func CapabilitiesFromCard(card *a2a.AgentCard, baseURL string) []catalog.Capability {
	if card == nil {
		return nil
	}
	exts := skillExtensions(card)
	endpoint, transport := agentEndpoint(card, baseURL)
	if transport == string(a2a.TransportProtocolJSONRPC) {
		transport = "" // the default
	}
	caps := make([]catalog.Capability, 0, len(card.Skills))
	for _, sk := range card.Skills {
		c := catalog.Capability{
			Tool:        catalog.SanitizeToolName(sk.ID),
			SkillID:     sk.ID,
			Agent:       card.Name,
			AgentURL:    endpoint,
			Transport:   transport,
			Description: skillDescription(sk),
		}
		if ext, ok := exts[sk.ID]; ok {
			c.SkillExtension = ext
		}
		if len(c.InputSchema) == 0 {
			c.InputSchema = PlainInputSchema
			c.Plain = true
		}
		caps = append(caps, c)
	}
	return caps
}

// skillExtensions decodes params.skills of our extension. An entry that does
// not decode is skipped: the skill then falls back to plain text, which any
// agent understands, rather than vanishing from the catalog.
func skillExtensions(card *a2a.AgentCard) map[string]catalog.SkillExtension {
	out := map[string]catalog.SkillExtension{}
	for _, e := range card.Capabilities.Extensions {
		if e.URI != catalog.ExtensionURI {
			continue
		}
		skills, ok := e.Params["skills"].(map[string]any)
		if !ok {
			continue
		}
		for id, v := range skills {
			b, err := json.Marshal(v)
			if err != nil {
				continue
			}
			var se catalog.SkillExtension
			if err := json.Unmarshal(b, &se); err != nil {
				continue
			}
			if s := strings.TrimSpace(string(se.InputSchema)); s == "null" || s == "" {
				se.InputSchema = nil
			}
			out[id] = se
		}
	}
	return out
}

func skillDescription(sk a2a.AgentSkill) string {
	d := strings.TrimSpace(sk.Description)
	if d == "" {
		d = strings.TrimSpace(sk.Name)
	}
	if len(sk.Examples) > 0 {
		d += "\nExamples: " + strings.Join(sk.Examples, "; ")
	}
	return d
}

// agentEndpoint picks the card's interface and its transport: JSON-RPC
// wherever the card offers it (our first transport: its errors keep the
// agent's own text), else gRPC. A JSON-RPC URL that is empty means the
// base URL; a relative one is resolved against it (a gateway may publish
// "/a2a/agent"). A gRPC URL is a target (host:port, or http:// for a
// connection without TLS).
func agentEndpoint(card *a2a.AgentCard, baseURL string) (endpoint, transport string) {
	jsonrpc, grpcURL := "", ""
	haveJSONRPC, haveGRPC := false, false
	switch card.PreferredTransport {
	case "", a2a.TransportProtocolJSONRPC:
		jsonrpc, haveJSONRPC = card.URL, true
	case a2a.TransportProtocolGRPC:
		grpcURL, haveGRPC = card.URL, true
	}
	for _, ai := range card.AdditionalInterfaces {
		switch {
		case ai.Transport == a2a.TransportProtocolJSONRPC && !haveJSONRPC:
			jsonrpc, haveJSONRPC = ai.URL, true
		case ai.Transport == a2a.TransportProtocolGRPC && !haveGRPC:
			grpcURL, haveGRPC = ai.URL, true
		}
	}
	switch {
	case !haveJSONRPC && haveGRPC && strings.TrimSpace(grpcURL) != "":
		return strings.TrimSpace(grpcURL), string(a2a.TransportProtocolGRPC)
	case !haveJSONRPC:
		// A transport we do not speak (HTTP+JSON) and no alternative: try
		// its URL with JSON-RPC, the transport every A2A server is urged to offer.
		jsonrpc = card.URL
	}
	return resolveEndpoint(jsonrpc, baseURL), string(a2a.TransportProtocolJSONRPC)
}

// resolveEndpoint resolves a card's JSON-RPC URL against the base URL.
func resolveEndpoint(raw, baseURL string) string {
	raw = strings.TrimSpace(raw)
	if raw == "" {
		return baseURL
	}
	u, err := url.Parse(raw)
	if err != nil {
		return baseURL
	}
	if u.IsAbs() && u.Host != "" {
		return raw
	}
	base, err := url.Parse(baseURL + "/")
	if err != nil {
		return baseURL
	}
	return strings.TrimRight(base.ResolveReference(u).String(), "/")
}

// uniqueTools makes tool names unique in place: the first capability keeps
// its name and later ones are suffixed _2, _3, … (deterministic because
// caps come in configured agent order, then card order).
func uniqueTools(caps []catalog.Capability) {
	used := map[string]bool{}
	for i := range caps {
		name := caps[i].Tool
		if used[name] {
			for n := 2; ; n++ {
				suffix := "_" + strconv.Itoa(n)
				base := name
				if len(base)+len(suffix) > 64 {
					base = base[:64-len(suffix)]
				}
				if cand := base + suffix; !used[cand] {
					name = cand
					break
				}
			}
		}
		used[name] = true
		caps[i].Tool = name
	}
}
