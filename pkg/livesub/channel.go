// Package livesub is the subscriber's side of a deployment's AppSync Events
// delivery of live events (docs/deploy.md, "Live events on AWS"): the
// channel of a conversation and the WebSocket protocol that subscribes to
// it. The API's clients (pkg/apiclient) use it, so it imports nothing of the
// project; the publishing side is pkg/livepub.
package livesub

import "strings"

// isSegment: s is what AppSync Events allows in a channel path segment,
// 1 to 50 of A-Z, a-z, 0-9 and '-'. (A loop, not a regular expression: the
// functions that link this package compile nothing at their cold start.)
func isSegment(s string) bool {
	if len(s) < 1 || len(s) > 50 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// Channel is the channel of the live events of conversation cid, owned by
// owner: /<namespace>/<owner>/<cid segment>. Its user segment is the
// owner's JWT sub itself, so the namespace's onSubscribe handler can refuse
// anyone whose sub differs without a lookup. ok is false when owner is not
// a valid segment (1-50 of A-Z, a-z, 0-9 and '-'; Cognito's subs are
// UUIDs) or cid has no segment (ConversationSegment): such a conversation
// has no channel, and its events are only in the log.
func Channel(namespace, owner, cid string) (string, bool) {
	c, ok := ConversationSegment(cid)
	if !ok || !isSegment(owner) || !isSegment(namespace) {
		return "", false
	}
	return "/" + namespace + "/" + owner + "/" + c, true
}

// ConversationSegment is cid as a channel segment: its '_' become '-'
// (conversation ids are c_<hex>, and a segment allows no '_'). An id that
// already has a '-' has none, so the mapping stays one to one. Clients
// apply the same rule (web/api.js).
func ConversationSegment(cid string) (string, bool) {
	if strings.Contains(cid, "-") {
		return "", false
	}
	c := strings.ReplaceAll(cid, "_", "-")
	return c, isSegment(c)
}

// ValidSegment reports whether s may be one segment of a channel path.
func ValidSegment(s string) bool { return isSegment(s) }

// UserSegment is the last segment of a user's own channel, beside their
// conversations' (which are c-<hex>, so the two never meet).
const UserSegment = "user"

// UserChannel is the channel of owner's own events (the conversation list's
// changes: created, renamed, deleted, a turn's status):
// /<namespace>/<owner>/user, under the same owner-only rule.
func UserChannel(namespace, owner string) (string, bool) {
	if !isSegment(owner) || !isSegment(namespace) {
		return "", false
	}
	return "/" + namespace + "/" + owner + "/" + UserSegment, true
}
