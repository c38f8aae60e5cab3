// Deployment settings of the chat page. This file is meant to be replaced
// when the static files are deployed in front of another API origin
// (for example the AWS HTTP API); nothing else needs to change.
export const config = {
  // apiBase is prepended to every API path ("/v1/..."). Empty means the
  // page's own origin, which is how the local stack serves it.
  apiBase: "",
  // pollIntervalMs is how often a running turn is polled.
  pollIntervalMs: 500,
  // waitPollIntervalMs is how often a turn waiting for a form or an
  // approval is re-read (it can expire or be answered in another tab).
  waitPollIntervalMs: 5000,
  // tokenStorageKey is the localStorage key that remembers the token.
  tokenStorageKey: "clientagent.token",
};
