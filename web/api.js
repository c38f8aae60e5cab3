// API client for the clientagent HTTP API (docs/api/openapi.yaml). It only
// speaks HTTP; it never touches the DOM.

/**
 * APIError is a failed call: status 0 means the network failed. retryAfter
 * is the answer's Retry-After in seconds (0 when absent); a 503
 * (store_unavailable, store_full) says how long to wait before trying again.
 */
export class APIError extends Error {
  constructor(status, code, message, retryAfter = 0) {
    super(message);
    this.name = "APIError";
    this.status = status;
    this.code = code;
    this.retryAfter = retryAfter;
  }

  /** unavailable is true for a 503: the service will answer again shortly. */
  get unavailable() {
    return this.status === 503;
  }
}

/** retryAfterSeconds reads a Retry-After header: delay seconds or an HTTP date. */
export function retryAfterSeconds(header) {
  if (!header) return 0;
  const v = header.trim();
  if (/^\d+$/.test(v)) return Number(v);
  const at = Date.parse(v);
  return Number.isFinite(at) ? Math.max(0, Math.ceil((at - Date.now()) / 1000)) : 0;
}

export class API {
  /**
   * @param {string} base prefix of every path ("" = same origin)
   * @param {() => string} token returns the bearer token
   * @param {string} [eventsBase] prefix of the event stream's path; empty
   *   means base (on AWS the stream has a URL of its own)
   */
  constructor(base, token, eventsBase = "") {
    this.base = base.replace(/\/+$/, "");
    this.eventsBase = eventsBase ? eventsBase.replace(/\/+$/, "") : this.base;
    this.token = token;
  }

  async request(method, path, { json, body, contentType, raw } = {}) {
    const headers = { Authorization: `Bearer ${this.token()}` };
    if (json !== undefined) {
      headers["Content-Type"] = "application/json";
      body = JSON.stringify(json);
    } else if (contentType) {
      headers["Content-Type"] = contentType;
    }
    let res;
    try {
      res = await fetch(this.base + path, { method, headers, body });
    } catch (err) {
      throw new APIError(0, "network", `Network error on ${method} ${path}: ${err.message}`);
    }
    if (!res.ok) {
      let code = `http_${res.status}`;
      let message = `${method} ${path} failed with HTTP ${res.status}`;
      try {
        const data = await res.json();
        if (data && data.error) {
          code = data.error.code || code;
          message = data.error.message || message;
        } else if (data && typeof data.message === "string") {
          // API Gateway's own answer (e.g. a body over Lambda's payload limit).
          message = `${data.message} (HTTP ${res.status})`;
        }
      } catch {
        // Not JSON (a proxy's error page): keep the generic message.
      }
      throw new APIError(res.status, code, message, retryAfterSeconds(res.headers.get("Retry-After")));
    }
    if (raw) return res;
    if (res.status === 204) return null;
    const text = await res.text();
    return text ? JSON.parse(text) : null;
  }

  listConversations(q = "") {
    return this.request("GET", q ? `/v1/conversations?q=${encodeURIComponent(q)}` : "/v1/conversations");
  }
  /** createConversation starts a conversation; without a title the server takes the first message's. */
  createConversation(title) {
    return this.request("POST", "/v1/conversations", { json: title ? { title } : {} });
  }
  /** renameConversation sets a conversation's title; the answer is {conversation_id, title, updated_at, status}. */
  renameConversation(cid, title) {
    return this.request("PATCH", `/v1/conversations/${enc(cid)}`, { json: { title } });
  }
  getConversation(cid) {
    return this.request("GET", `/v1/conversations/${enc(cid)}`);
  }
  deleteConversation(cid) {
    return this.request("DELETE", `/v1/conversations/${enc(cid)}`);
  }
  /** uploadArtifact sends a File's bytes; the answer is {artifact_id, name, mime_type}. */
  uploadArtifact(cid, file) {
    return this.request("POST", `/v1/conversations/${enc(cid)}/artifacts?name=${enc(file.name)}`, {
      body: file,
      contentType: file.type || "application/octet-stream",
    });
  }
  sendMessage(cid, text, files, supersedes) {
    const json = { text };
    if (files && files.length) json.files = files;
    if (supersedes) json.supersedes = supersedes; // edit and resend, or regenerate, the last message
    return this.request("POST", `/v1/conversations/${enc(cid)}/messages`, { json });
  }
  /** startWorkflow selects a workflow explicitly (docs/design.md §3.4); missing inputs come back as the turn's form. */
  startWorkflow(cid, id, inputs, files) {
    const json = { text: "", workflow: { id, inputs } };
    if (files && files.length) json.files = files;
    return this.request("POST", `/v1/conversations/${enc(cid)}/messages`, { json });
  }
  getCatalog() {
    return this.request("GET", "/v1/catalog");
  }
  /** getInfo says where the deployment keeps conversations (GET /v1/info). */
  getInfo() {
    return this.request("GET", "/v1/info");
  }

  /**
   * delivery is how this deployment delivers live events (GET /v1/info's
   * events, read once): {delivery: "sse"} (GET …/events) or {delivery:
   * "appsync", realtime_url, host, channel_prefix} (an AppSync Events
   * WebSocket). A deployment that does not say is "sse".
   */
  delivery() {
    if (!this._delivery) {
      this._delivery = this.getInfo().then(
        (info) => (info && info.events) || { delivery: "sse" },
        (err) => {
          this._delivery = null;
          // An API without the route has only its own event stream.
          if (err instanceof APIError && err.status === 404) return { delivery: "sse" };
          throw err;
        },
      );
    }
    return this._delivery;
  }

  /**
   * streamAppSync follows the conversation's AppSync Events channel
   * (channel_prefix + the conversation id with "_" as "-") over the
   * WebSocket protocol of AppSync Events: subprotocols aws-appsync-event-ws
   * and header-<base64url {host, Authorization}>, connection_init →
   * connection_ack, subscribe → subscribe_success, then data and ka. Its
   * contract is streamEvents': onOpen once subscribed, onEvent({data}) per
   * event (no id: a resubscription re-reads the turns instead), true when
   * the connection ends (no keep-alive in time, or closed by the server),
   * an APIError when refused.
   */
  streamAppSync(cid, ev, { signal, onOpen, onEvent }) {
    const auth = { host: ev.host, Authorization: this.token() };
    const header = btoa(JSON.stringify(auth)).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
    const channel = ev.channel_prefix + cid.replace(/_/g, "-");
    return new Promise((resolve, reject) => {
      let ws;
      try {
        ws = new WebSocket(ev.realtime_url, ["aws-appsync-event-ws", `header-${header}`]);
      } catch (err) {
        reject(new APIError(0, "network", `Cannot open the live events WebSocket: ${err.message}`));
        return;
      }
      let timer = 0;
      let timeoutMs = 300000;
      let done = false;
      const finish = (err) => {
        if (done) return;
        done = true;
        clearTimeout(timer);
        try {
          ws.close();
        } catch {
          // Already closed.
        }
        if (err) reject(err);
        else resolve(true);
      };
      const alive = () => {
        clearTimeout(timer);
        timer = setTimeout(() => finish(null), timeoutMs);
      };
      signal?.addEventListener("abort", () => finish(null));
      ws.onopen = () => {
        alive();
        ws.send(JSON.stringify({ type: "connection_init" }));
      };
      ws.onerror = () => finish(new APIError(0, "network", "The live events WebSocket failed."));
      ws.onclose = () => finish(null);
      ws.onmessage = (m) => {
        let msg;
        try {
          msg = JSON.parse(m.data);
        } catch {
          return;
        }
        alive();
        switch (msg.type) {
          case "connection_ack":
            if (msg.connectionTimeoutMs > 0) timeoutMs = msg.connectionTimeoutMs;
            alive();
            ws.send(JSON.stringify({ type: "subscribe", id: `s${Date.now().toString(36)}`, channel, authorization: auth }));
            break;
          case "subscribe_success":
            onOpen?.();
            break;
          case "data":
            try {
              onEvent({ id: "", data: JSON.parse(msg.event) });
            } catch {
              // Not an event this page reads.
            }
            break;
          case "connection_error":
          case "subscribe_error":
          case "error": {
            const why = (msg.errors && msg.errors[0]) || {};
            const status = why.errorType === "UnauthorizedException" ? 401 : 0;
            finish(new APIError(status, msg.type, `Live events refused: ${why.message || msg.type}`));
            break;
          }
        }
      };
    });
  }
  getTurn(cid, tid) {
    return this.request("GET", `/v1/conversations/${enc(cid)}/turns/${enc(tid)}`);
  }
  /**
   * sendInput answers a waiting turn: {answers} for a form, or
   * {approval: {id, decision, note?, arguments?}} for an approval (the id is
   * the one the turn showed; arguments are the user's edits per call id).
   */
  sendInput(cid, tid, input) {
    return this.request("POST", `/v1/conversations/${enc(cid)}/turns/${enc(tid)}/input`, { json: input });
  }
  /** cancelTurn stops a running or waiting turn: the answer is the Turn (cancelled); 409 when it has ended. */
  cancelTurn(cid, tid) {
    return this.request("POST", `/v1/conversations/${enc(cid)}/turns/${enc(tid)}/cancel`, { json: {} });
  }

  /**
   * streamEvents reads the conversation's Server-Sent Events (GET
   * …/events, on eventsBase) until the server ends the stream (it returns
   * true then) or signal aborts it. It uses fetch, not EventSource, because the API wants
   * the bearer token in a header. onOpen runs once the server has answered
   * 200; onEvent gets every event's parsed data with its id. A refused
   * answer throws an APIError; a broken connection throws too.
   */
  async streamEvents(cid, { lastEventId, signal, onOpen, onEvent }) {
    // cid null: the user's own stream of their conversation list (GET /v1/events).
    const path = cid === null ? "/v1/events" : `/v1/conversations/${enc(cid)}/events`;
    const headers = { Authorization: `Bearer ${this.token()}`, Accept: "text/event-stream" };
    if (lastEventId) headers["Last-Event-ID"] = lastEventId;
    let res;
    try {
      res = await fetch(this.eventsBase + path, { headers, signal, cache: "no-store" });
    } catch (err) {
      throw new APIError(0, "network", `Network error on GET ${path}: ${err.message}`);
    }
    if (!res.ok || !res.body || !(res.headers.get("Content-Type") || "").startsWith("text/event-stream")) {
      try {
        await res.body?.cancel();
      } catch {
        // Nothing to release.
      }
      throw new APIError(res.status, `http_${res.status}`, `GET ${path} answered HTTP ${res.status}`, retryAfterSeconds(res.headers.get("Retry-After")));
    }
    onOpen?.();
    const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
    const parser = new SSEParser(onEvent);
    for (;;) {
      const { value, done } = await reader.read();
      if (done) {
        parser.end();
        return true;
      }
      parser.push(value);
    }
  }

  /**
   * artifactBlob fetches an artifact's bytes: it asks the API for the
   * artifact's link (?redirect=false, with the bearer token) and fetches the
   * link without it. Following the API's 302 instead would send
   * "Origin: null" to the bucket, which its CORS rule refuses.
   */
  async artifactBlob(cid, aid, mimeType) {
    const link = await this.request("GET", `/v1/conversations/${enc(cid)}/artifacts/${enc(aid)}?redirect=false`);
    if (!link || !link.url) throw new APIError(0, "no_link", `The artifact ${aid} has no download link.`);
    let res;
    try {
      res = await fetch(new URL(link.url, location.href), { credentials: "omit", referrerPolicy: "no-referrer" });
    } catch (err) {
      throw new APIError(0, "network", `Network error while downloading the artifact: ${err.message}`);
    }
    if (!res.ok) throw new APIError(res.status, `http_${res.status}`, `Downloading the artifact failed with HTTP ${res.status}.`);
    const blob = await res.blob();
    // Trust the catalog's type so an <img> of an SVG works even when the
    // bytes come back as application/octet-stream (e.g. from a bucket).
    return mimeType ? new Blob([blob], { type: mimeType }) : blob;
  }
}

/**
 * SSEParser splits a text/event-stream into events (the WHATWG rules that
 * matter here: "field: value" lines, multi-line data joined with "\n",
 * comment lines starting with ":", a blank line dispatching). onEvent gets
 * {id, event, data} with data parsed as JSON; an event whose data is not
 * JSON is skipped.
 */
export class SSEParser {
  constructor(onEvent) {
    this.onEvent = onEvent;
    this.buf = "";
    this.reset();
  }

  reset() {
    this.id = "";
    this.event = "";
    this.data = [];
  }

  push(text) {
    this.buf += text;
    let i;
    while ((i = this.buf.search(/\r\n|\r|\n/)) >= 0) {
      const line = this.buf.slice(0, i);
      const nl = this.buf[i] === "\r" && this.buf[i + 1] === "\n" ? 2 : 1;
      // A lone \r at the end of a chunk may be the first half of \r\n.
      if (this.buf[i] === "\r" && i + 1 === this.buf.length) break;
      this.buf = this.buf.slice(i + nl);
      this.line(line);
    }
  }

  end() {
    if (this.buf) this.line(this.buf);
    this.buf = "";
    this.line("");
  }

  line(line) {
    if (line === "") {
      if (this.data.length) {
        let data;
        try {
          data = JSON.parse(this.data.join("\n"));
        } catch {
          data = null;
        }
        if (data && typeof data === "object") this.onEvent({ id: this.id, event: this.event || data.type || "message", data });
      }
      this.event = "";
      this.data = [];
      return;
    }
    if (line.startsWith(":")) return; // a comment: the heartbeat
    const c = line.indexOf(":");
    const field = c < 0 ? line : line.slice(0, c);
    let value = c < 0 ? "" : line.slice(c + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "id") this.id = value;
    else if (field === "event") this.event = value;
    else if (field === "data") this.data.push(value);
  }
}

function enc(s) {
  return encodeURIComponent(s);
}
