// Deployment settings of the chat page. This file is meant to be replaced
// when the static files are deployed in front of another API origin
// (for example the AWS HTTP API); nothing else needs to change.
export const config = {
  // apiBase is prepended to every API path ("/v1/..."). Empty means the
  // page's own origin, which is how the local stack serves it.
  apiBase: "",
  // eventsBase is prepended to the event stream's path
  // ("/v1/conversations/{cid}/events"). Empty means apiBase, which is right
  // for the local stack. The AWS stack delivers live events through AppSync
  // Events instead, which GET /v1/info names (docs/deploy.md, "Live events
  // on AWS"): leave it empty there. Set it only for an SSE stream served on
  // another origin, whose CORS allows the page's origin and the
  // Authorization and Last-Event-ID headers.
  eventsBase: "",
  // pollIntervalMs is how often a running turn is polled when the event
  // stream is unavailable.
  pollIntervalMs: 500,
  // livePollIntervalMs is how often a running turn is re-read while the
  // conversation's event stream is up (the stream says when to read it;
  // this is only a safety net).
  livePollIntervalMs: 10000,
  // waitPollIntervalMs is how often a turn waiting for a form or an
  // approval is re-read (it can expire or be answered in another tab).
  waitPollIntervalMs: 5000,
  // tokenStorageKey is the localStorage key that remembers the token.
  tokenStorageKey: "clientagent.token",
};
