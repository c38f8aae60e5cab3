// The clientagent chat page: conversation list, chat, live turn progress,
// typed forms, approvals and artifacts. Plain ES module, no framework, no
// build step and nothing loaded from outside the page's own files (the
// markdown renderer and its sanitizer are vendored under vendor/).
//
// A turn is followed two ways: the conversation's event stream (GET
// …/events, Server-Sent Events) pushes steps and the reply's text as they
// happen, and GET …/turns/{tid} stays the source of truth, read when the
// stream says something changed (a form, an approval, the end). When the
// stream is down the page polls turns as before.
import { config } from "./config.js";
import { API, APIError } from "./api.js";
import { marked } from "./vendor/marked.esm.js";
import DOMPurify from "./vendor/purify.es.js";

const TERMINAL = new Set(["succeeded", "failed", "expired", "superseded", "cancelled", "blocked"]);
const WAITING = new Set(["awaiting_input", "awaiting_approval"]);
const IMAGE_TYPES = new Set(["image/png", "image/jpeg", "image/jpg", "image/svg+xml", "image/gif", "image/webp"]);
// PASSIVE_TYPES may be opened in a tab: a raster image or plain text runs
// nothing. Anything else (an SVG, HTML, XML …) could run script in this
// origin if opened as a document, so it is shown only through <img> (SVG)
// and its links download bytes typed application/octet-stream.
const PASSIVE_TYPES = new Set(["image/png", "image/jpeg", "image/jpg", "image/gif", "image/webp", "text/plain"]);
const STEP_ICONS = {
  succeeded: "✓",
  failed: "✗",
  rejected: "⊘",
  not_executed: "–",
  answered: "✎",
  stopped: "■",
};
// SVG_ICONS are drawn inline: an emoji such as an hourglass or a no-entry
// sign is an empty box where no emoji font is installed (Debian's Chromium).
const SVG_ICONS = {
  running: ["M6 2h12v5l-4 5 4 5v5H6v-5l4-5-4-5z", "M8 4h8v2.3L12 11 8 6.3z"],
  blocked: ["M12 2a10 10 0 1 0 0 20 10 10 0 0 0 0-20zm0 2a8 8 0 1 1 0 16 8 8 0 0 1 0-16z", "M6 10.5h12v3H6z"],
};

/** stepIcon fills el with the icon of a step status: a glyph, or an inline SVG. */
function stepIcon(el, status) {
  const paths = SVG_ICONS[status];
  if (!paths) {
    el.textContent = STEP_ICONS[status] || "•";
    return;
  }
  // The HTML parser puts <svg> in the SVG namespace; the markup is this
  // file's own constants, never data.
  el.innerHTML = `<svg viewBox="0 0 24 24" class="icon icon-${status}" data-icon="${status}">${paths.map((d) => `<path d="${d}" fill="currentColor" fill-rule="evenodd"/>`).join("")}</svg>`;
}
// STALE_APPROVAL is shown when the server refused an answer because the
// approval changed since the page showed it (409 stale_approval).
const STALE_APPROVAL = "The approval changed; please review it again.";
const STATUS_LABELS = {
  running: "Running",
  awaiting_input: "Waiting for your input",
  awaiting_approval: "Waiting for your approval",
  succeeded: "Succeeded",
  failed: "Failed",
  expired: "Expired",
  superseded: "Superseded",
  cancelled: "Stopped",
  blocked: "Blocked",
};
const EMPTY_HINT = "Ask for something, e.g. “Create a PNG image with the word Popelnase”.";
// ART_REF finds artifact ids in a reply, with the "(artifact_id …)" the
// model may wrap them in, so the page can show the artifact instead.
const ART_REF = /\(\s*artifact_id[:=]?\s+(art_[A-Za-z0-9_-]+)\s*\)|\bartifact_id[:=]?\s+(art_[A-Za-z0-9_-]+)|\b(art_[A-Za-z0-9_-]+)/g;

const $ = (id) => document.getElementById(id);
const els = {
  app: $("app"),
  banner: $("banner"),
  bannerText: $("banner-text"),
  tokenPanel: $("token-panel"),
  tokenForm: $("token-form"),
  tokenInput: $("token-input"),
  sidebar: $("sidebar"),
  drawerToggle: $("drawer-toggle"),
  scrim: $("scrim"),
  list: $("conversation-list"),
  title: $("chat-title"),
  messages: $("messages"),
  composerForm: $("composer-form"),
  composer: $("composer"),
  send: $("send"),
  attach: $("attach"),
  fileInput: $("file-input"),
  attachments: $("attachments"),
  warning: $("supersede-warning"),
  workflowList: $("workflow-list"),
  workflowForm: $("workflow-form"),
};

const state = {
  token: readToken(),
  maxText: 16000, // the API's limit on a message (GET /v1/info max_text)
  conversations: [],
  listLoaded: false,
  cid: null,
  // gen changes whenever the open conversation changes, so loops and late
  // answers that belong to the previous one stop touching the page.
  gen: 0,
  views: new Map(), // turn_id → TurnView of the open conversation
  pendingFiles: [], // uploads for the next message: {artifact_id, name, mime_type}
  blobs: new Map(), // "cid/aid" → Promise<object URL>
  artifacts: new Map(), // artifact_id → {artifact_id, name, mime_type, description} of the open conversation
  // live is true while the open conversation's event stream is connected:
  // running turns are then read only when an event says so.
  live: false,
  sub: null, // the open conversation's event subscription
  listEdit: null, // {cid, kind: "rename" | "delete"}: a list row in an inline edit
  skew: null, // ms the API's clock is ahead of the page's (from the events' times), for running bars
};

// An SSE event stream on another origin (a deployment serving
// functions/events without a VPC): config.eventsBase, else apiBase. A
// deployment with AppSync Events says so in GET /v1/info instead.
const api = new API(config.apiBase || "", () => state.token, config.eventsBase || "");

marked.setOptions({ gfm: true, breaks: true });

/** h builds an element: h("div", {class: "x", "data-testid": "y", onclick}, ...children). */
function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on") && typeof v === "function") el.addEventListener(k.slice(2), v);
    else if (k === "class") el.className = v;
    else if (v === true) el.setAttribute(k, "");
    else el.setAttribute(k, String(v));
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

// ---- token -----------------------------------------------------------------

function readToken() {
  const m = location.hash.match(/(?:^#|&)token=([^&]+)/);
  if (m) {
    const token = decodeURIComponent(m[1]);
    localStorage.setItem(config.tokenStorageKey, token);
    // Keep the token out of the address bar, bookmarks and screenshots.
    const rest = location.hash.replace(/(?:^#|&)token=[^&]+/, "").replace(/^&/, "");
    history.replaceState(null, "", location.pathname + location.search + (rest ? `#${rest.replace(/^#/, "")}` : ""));
    return token;
  }
  return localStorage.getItem(config.tokenStorageKey) || "";
}

function askToken() {
  els.app.hidden = true;
  els.tokenPanel.hidden = false;
  els.tokenInput.value = "";
  els.tokenInput.focus();
}

els.tokenForm.addEventListener("submit", (ev) => {
  ev.preventDefault();
  const token = els.tokenInput.value.trim();
  if (!token) return;
  state.token = token;
  localStorage.setItem(config.tokenStorageKey, token);
  // The banner said why a token was asked for (a 401); a new token starts over.
  clearError();
  start();
});

$("change-token").addEventListener("click", () => {
  localStorage.removeItem(config.tokenStorageKey);
  state.token = "";
  unsubscribe();
  askToken();
});

// ---- errors ----------------------------------------------------------------

function showError(err) {
  let msg = err instanceof Error ? err.message : String(err);
  if (err instanceof APIError && err.unavailable) msg = `The service is unavailable; please try again in a moment. (${msg})`;
  els.bannerText.textContent = msg;
  els.banner.hidden = false;
  els.banner.dataset.kind = "error";
  if (err instanceof APIError && err.status === 401) askToken();
}

/** showUnavailable says the service answered 503 and when the page retries. */
function showUnavailable(seconds) {
  els.bannerText.textContent = `The service is unavailable, retrying in ${seconds} s…`;
  els.banner.hidden = false;
  els.banner.dataset.kind = "unavailable";
}

/** clearUnavailable hides the banner if it is showUnavailable's. */
function clearUnavailable() {
  if (els.banner.dataset.kind === "unavailable") clearError();
}

function clearError() {
  els.banner.hidden = true;
  els.bannerText.textContent = "";
  delete els.banner.dataset.kind;
}

$("banner-close").addEventListener("click", clearError);

// ---- routing: #/c/{cid} ----------------------------------------------------

/** routeCid is the conversation the address names (#/c/{cid}), or null. */
function routeCid() {
  const m = location.hash.match(/^#\/c\/([^/?&#]+)/);
  return m ? decodeURIComponent(m[1]) : null;
}

/** setRoute puts the open conversation in the address (a history entry unless replace). */
function setRoute(cid, { replace = false } = {}) {
  const hash = cid ? `#/c/${encodeURIComponent(cid)}` : "#/";
  if (location.hash === hash) return;
  const url = location.pathname + location.search + hash;
  if (replace) history.replaceState(null, "", url);
  else history.pushState(null, "", url);
}

// Back, forward, an edited address or a shared link: open what it names.
window.addEventListener("hashchange", () => {
  if (/(?:^#|&)token=/.test(location.hash)) {
    // A link with a token pasted into an open tab: use it now.
    const token = readToken();
    if (token && token !== state.token) {
      state.token = token;
      clearError();
      // Another token may be another user: what was open is not theirs.
      newChat({ route: false });
      start();
      return;
    }
  }
  if (!state.token || els.app.hidden) return;
  const cid = routeCid();
  if (cid === state.cid) return;
  if (cid) openConversation(cid, { route: false });
  else newChat({ route: false });
});

// ---- drawer (narrow screens) -------------------------------------------------

function setDrawer(open) {
  els.app.classList.toggle("drawer-open", open);
  els.drawerToggle.setAttribute("aria-expanded", String(open));
}

els.drawerToggle.addEventListener("click", () => setDrawer(!els.app.classList.contains("drawer-open")));
els.scrim.addEventListener("click", () => setDrawer(false));
document.addEventListener("keydown", (ev) => {
  if (ev.key === "Escape" && els.app.classList.contains("drawer-open")) setDrawer(false);
});

// ---- conversations ---------------------------------------------------------

// Search: the list shows the conversations whose title or text holds the
// query (GET /v1/conversations?q=), read again as the user types.
state.search = "";
{
  const input = document.getElementById("conversation-search");
  let timer = 0;
  input.addEventListener("input", () => {
    clearTimeout(timer);
    timer = setTimeout(() => {
      state.search = input.value.trim();
      refreshConversations();
    }, 200);
  });
}

async function refreshConversations() {
  try {
    const q = state.search;
    const data = await api.listConversations(q);
    if (q !== state.search) return; // a newer search is on its way
    state.conversations = (data && data.conversations) || [];
    state.listLoaded = true;
    renderConversations();
  } catch (err) {
    showError(err);
  }
}

/**
 * shownConversations leaves out conversations with nothing in them (no
 * title, no turn: status "idle" or none): older clients created one per
 * "New conversation" click.
 */
function shownConversations() {
  return state.conversations.filter((c) => c.title || (c.status && c.status !== "idle") || c.conversation_id === state.cid);
}

function renderConversations() {
  // A refresh while a title is being typed keeps what was typed.
  const typing = els.list.querySelector('[data-testid="rename-input"]');
  const typed = typing ? { value: typing.value, focused: document.activeElement === typing } : null;
  const open = state.conversations.find((c) => c.conversation_id === state.cid);
  if (open && open.title) {
    els.title.textContent = open.title;
    els.title.title = open.title;
  }
  const rows = shownConversations().map((c) => {
    const active = c.conversation_id === state.cid;
    const title = c.title || "Untitled conversation";
    const li = h("li", { class: active ? "conversation active" : "conversation", "data-testid": "conversation", "data-id": c.conversation_id });
    const edit = state.listEdit && state.listEdit.cid === c.conversation_id ? state.listEdit.kind : "";
    if (edit === "rename") {
      li.append(renameForm(c));
      return li;
    }
    if (edit === "delete") {
      li.classList.add("confirming");
      li.append(
        h(
          "div",
          { class: "confirm-delete", role: "group", "aria-label": "Confirm delete" },
          h("span", { class: "confirm-text" }, `Delete “${title}”?`),
          h("button", { type: "button", class: "danger", "data-testid": "confirm-delete", onclick: () => deleteConversation(c.conversation_id) }, "Delete"),
          h("button", { type: "button", class: "link", "data-testid": "cancel-delete", onclick: () => editRow(null) }, "Cancel"),
        ),
      );
      return li;
    }
    li.append(
      h(
        "button",
        { type: "button", class: "conversation-open", "aria-current": active ? "true" : null, onclick: () => openConversation(c.conversation_id) },
        h("span", { class: "conversation-title", "data-testid": "conversation-title", title }, title),
        h("span", { class: "conversation-meta" }, [c.status ? statusLabel(c.status) : "", formatTime(c.updated_at)].filter(Boolean).join(" · ")),
      ),
      h(
        "span",
        { class: "conversation-actions" },
        h("button", { type: "button", class: "link", "data-testid": "rename-conversation", "aria-label": `Rename conversation ${title}`, onclick: () => editRow({ cid: c.conversation_id, kind: "rename" }) }, "Rename"),
        h("button", { type: "button", class: "link conversation-delete", "data-testid": "delete-conversation", "aria-label": `Delete conversation ${title}`, onclick: () => editRow({ cid: c.conversation_id, kind: "delete" }) }, "Delete"),
      ),
    );
    return li;
  });
  els.list.replaceChildren(...rows);
  if (!rows.length && state.listLoaded) els.list.append(h("li", { class: "muted list-empty" }, state.search ? `No conversation holds “${state.search}”.` : "No conversations yet."));
  const input = els.list.querySelector('[data-testid="rename-input"]');
  if (input && typed) {
    input.value = typed.value;
    if (typed.focused) input.focus();
  } else if (input) {
    input.focus();
    input.select();
  }
}

function editRow(edit) {
  state.listEdit = edit;
  renderConversations();
}

function renameForm(c) {
  const input = h("input", { type: "text", "data-testid": "rename-input", "aria-label": "New title", maxlength: "200", required: true });
  input.value = c.title || "";
  const error = h("p", { class: "inline-error", role: "alert", hidden: true });
  const form = h(
    "form",
    { class: "rename-form" },
    input,
    h("button", { type: "submit", "data-testid": "rename-save" }, "Save"),
    h("button", { type: "button", class: "link", onclick: () => editRow(null) }, "Cancel"),
    error,
  );
  input.addEventListener("keydown", (ev) => {
    if (ev.key === "Escape") editRow(null);
  });
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const title = input.value.trim();
    if (!title) return;
    try {
      const res = await api.renameConversation(c.conversation_id, title);
      Object.assign(c, { title: (res && res.title) || title }, res && res.updated_at ? { updated_at: res.updated_at } : {});
      state.listEdit = null;
      if (c.conversation_id === state.cid) els.title.textContent = c.title;
      renderConversations();
    } catch (err) {
      error.textContent = err.message;
      error.hidden = false;
      if (err instanceof APIError && err.status === 401) showError(err);
    }
  });
  return form;
}

async function deleteConversation(cid) {
  try {
    await api.deleteConversation(cid);
    state.listEdit = null;
    state.conversations = state.conversations.filter((c) => c.conversation_id !== cid);
    if (cid === state.cid) newChat({ replace: true });
    renderConversations();
    refreshConversations();
  } catch (err) {
    showError(err);
  }
}

/** newChat empties the chat; the conversation itself is created with its first message. */
function newChat({ route = true, replace = false } = {}) {
  unsubscribe();
  resetChat(null);
  if (route) setRoute(null, { replace });
  setDrawer(false);
  els.composer.focus();
}

/**
 * ensureConversation returns the open conversation's id, creating it (on
 * the first message or upload). title names it; without one the server
 * takes the first message's text.
 */
async function ensureConversation(title) {
  if (state.cid) return state.cid;
  const data = await api.createConversation(title);
  const cid = data.conversation_id;
  // Nothing to load: the conversation is new. Keep what the composer holds.
  state.gen++;
  state.cid = cid;
  setRoute(cid);
  subscribe(cid);
  return cid;
}

function resetChat(cid) {
  state.gen++;
  state.cid = cid;
  state.views = new Map();
  state.pendingFiles = [];
  state.artifacts = new Map();
  for (const p of state.blobs.values()) p.then((u) => URL.revokeObjectURL(u), () => {});
  state.blobs = new Map();
  hideWarning();
  renderAttachments();
  els.messages.replaceChildren(h("p", { class: "empty", id: "empty-hint" }, EMPTY_HINT));
  els.title.textContent = "New conversation";
  renderConversations();
}

async function openConversation(cid, { route = true } = {}) {
  setDrawer(false);
  if (route) setRoute(cid);
  if (cid === state.cid && state.views.size) {
    if (!state.sub) subscribe(cid);
    return;
  }
  unsubscribe();
  resetChat(cid);
  const gen = state.gen;
  els.title.textContent = "Conversation";
  let conv;
  try {
    conv = await api.getConversation(cid);
  } catch (err) {
    if (gen !== state.gen) return;
    if (err instanceof APIError && err.status === 404) {
      // Deleted, or someone else's: say so and offer a new chat.
      showError(new Error("That conversation does not exist (or was deleted)."));
      newChat({ replace: true });
      return;
    }
    showError(err);
    return;
  }
  if (gen !== state.gen) return;
  const summary = state.conversations.find((c) => c.conversation_id === cid);
  els.title.textContent = (summary && summary.title) || conv.title || "Conversation";
  for (const a of conv.artifacts || []) state.artifacts.set(a.artifact_id, a);
  renderConversation(conv);
  subscribe(cid);
}

/** renderConversation lays out a stored conversation: one block per turn, in history order. */
function renderConversation(conv) {
  const turns = new Map();
  for (const t of conv.turns || []) turns.set(t.turn_id, t);
  const history = conv.history || [];
  const byTurn = new Map();
  for (const e of history) {
    if (!e.turn_id) continue;
    if (!byTurn.has(e.turn_id)) byTurn.set(e.turn_id, []);
    byTurn.get(e.turn_id).push(e);
  }

  const placeTurn = (turn) => {
    const entries = byTurn.get(turn.turn_id) || [];
    const userEntry = entries.find((e) => e.role === "user" && e.kind === "message");
    const view = addTurnView(turn.turn_id, turn.text || (userEntry && userEntry.content) || "", []);
    for (const e of entries) {
      // A plan's text repeats the approval's calls as JSON: the approval
      // card is their only rendering.
      if (e.kind === "followup_questions" && e.content) view.addNote(e.content);
    }
    view.update(turn);
    if (!(turn.answers && turn.answers.length)) {
      // A turn recorded before turns kept their answers: what its history says.
      if (entries.some((e) => e.kind === "plan_approved")) view.showAnswer("Approved");
      else if (TERMINAL.has(turn.status) && (turn.steps || []).some((s) => s.status === "rejected")) view.showAnswer("Rejected");
    }
    // Waiting turns are followed too: they can expire or be answered elsewhere.
    if (!TERMINAL.has(turn.status)) pollTurn(view);
  };

  for (const e of history) {
    if (e.turn_id && turns.has(e.turn_id)) {
      if (!state.views.has(e.turn_id)) placeTurn(turns.get(e.turn_id));
      continue;
    }
    // An entry without a known turn: show it as a plain bubble.
    if (e.kind === "plan_approved" || e.kind === "plan" || !e.content) continue;
    clearEmpty();
    els.messages.append(
      e.role === "user"
        ? h("div", { class: "bubble user", "data-testid": "history-message" }, e.content)
        : h("div", { class: "bubble assistant markdown", "data-testid": "history-message" }, renderMarkdown(e.content)),
    );
  }
  const rest = [...turns.values()].filter((t) => !state.views.has(t.turn_id));
  rest.sort((a, b) => String(a.started_at || "").localeCompare(String(b.started_at || "")));
  rest.forEach(placeTurn);
  scrollDown(true);
}

function clearEmpty() {
  els.messages.querySelector(".empty")?.remove();
}

/**
 * refreshTurnActions offers Edit and Regenerate on the newest turn only,
 * once it has ended, and not on one already replaced.
 */
function refreshTurnActions() {
  const views = [...state.views.values()];
  const last = views[views.length - 1];
  for (const v of views) {
    if (!v.actionsEl) continue;
    v.showActions(v === last && TERMINAL.has(v.status) && !v.supersededBy && !!v.userEl.textContent);
  }
}

/** addTurnView appends a new turn's block to the chat. */
function addTurnView(tid, text, fileNames) {
  const view = new TurnView(tid, text, fileNames);
  state.views.set(tid, view);
  clearEmpty();
  els.messages.append(view.el);
  return view;
}

// ---- the event stream ------------------------------------------------------

/**
 * watchList follows the user's own event stream (GET /v1/events) while the
 * page has a token: a conversation created, renamed, deleted or whose
 * status changed anywhere (another tab, the CLI, the API, A2A) re-reads the
 * list. It reconnects after the last event, backing off while it fails.
 */
function watchList() {
  state.listWatch?.abort();
  const abort = new AbortController();
  state.listWatch = abort;
  let lastId = "";
  let timer = 0;
  const changed = (ev) => {
    const d = ev.data || {};
    if (d.type === "conversation.deleted" && d.conversation_id === state.cid) newChat({ replace: true });
    clearTimeout(timer);
    timer = setTimeout(refreshConversations, 100);
  };
  (async () => {
    let failures = 0;
    while (!abort.signal.aborted) {
      const began = Date.now();
      try {
        const delivery = await api.delivery();
        if (delivery.delivery === "appsync") {
          // On AWS: the user's own AppSync Events channel (…/<sub>/user);
          // what changed while it was not subscribed is read with the list.
          await api.streamAppSync("user", delivery, { signal: abort.signal, onOpen: refreshConversations, onEvent: changed });
        } else {
          await api.streamEvents(null, {
            lastEventId: lastId,
            signal: abort.signal,
            onEvent: (ev) => {
              if (ev.id) lastId = ev.id;
              changed(ev);
            },
          });
        }
        if (Date.now() - began > 5000) failures = 0;
      } catch (err) {
        if (abort.signal.aborted) return;
        // A deployment without the stream: the list is refreshed as before.
        if (err instanceof APIError && (err.status === 404 || err.status === 501 || err.status === 401)) return;
      }
      failures++;
      await new Promise((r) => setTimeout(r, Math.min(30000, 500 * 2 ** Math.min(failures, 6))));
    }
  })();
}

/**
 * subscribe follows the conversation's event stream until the conversation
 * is closed: it reconnects with Last-Event-ID when the server ends the
 * stream (it does after a few minutes), and while it cannot connect the
 * turns are polled (state.live false) and it tries again, backing off.
 */
function subscribe(cid) {
  unsubscribe();
  const sub = { cid, gen: state.gen, abort: new AbortController(), lastId: "", closed: false };
  state.sub = sub;
  (async () => {
    let failures = 0;
    while (!sub.closed) {
      const began = Date.now();
      let events = 0;
      let err = null;
      try {
        const opts = {
          lastEventId: sub.lastId,
          signal: sub.abort.signal,
          onOpen: () => setLive(sub, true),
          onEvent: (ev) => {
            if (sub.closed) return;
            events++;
            if (ev.id) sub.lastId = ev.id;
            onStreamEvent(ev.data);
          },
        };
        const delivery = await api.delivery();
        if (delivery.delivery === "appsync") {
          // No resume on AppSync: once subscribed, every followed turn is
          // read again, so nothing published meanwhile is missed.
          const open = opts.onOpen;
          opts.onOpen = () => {
            open();
            for (const view of state.views.values()) if (!TERMINAL.has(view.status)) pollTurn(view);
          };
          await api.streamAppSync(cid, delivery, opts);
        } else {
          await api.streamEvents(cid, opts);
        }
      } catch (e) {
        err = e;
      }
      if (sub.closed) return;
      // The server ends a healthy stream after a while: reconnect at once.
      // A stream that fails, or ends at once with nothing, counts as down.
      if (!err && (events > 0 || Date.now() - began > 5000)) {
        failures = 0;
        continue;
      }
      setLive(sub, false);
      if (err instanceof APIError && err.status === 401) {
        // A new token (start) subscribes again.
        if (state.sub === sub) state.sub = null;
        showError(err);
        return;
      }
      failures++;
      const wait = err instanceof APIError && err.retryAfter > 0 ? err.retryAfter * 1000 : Math.min(30000, 1000 * 2 ** failures);
      await new Promise((resolve) => {
        const t = setTimeout(resolve, wait);
        sub.abort.signal.addEventListener("abort", () => {
          clearTimeout(t);
          resolve();
        });
      });
    }
  })();
}

function unsubscribe() {
  const sub = state.sub;
  if (!sub) return;
  sub.closed = true;
  sub.abort.abort();
  state.sub = null;
  state.live = false;
}

/** setLive records whether the stream is up; when it goes down, every followed turn is polled again at once. */
function setLive(sub, live) {
  if (state.sub !== sub || state.live === live) return;
  state.live = live;
  els.app.dataset.live = String(live);
  if (live) return;
  for (const view of state.views.values()) {
    if (!TERMINAL.has(view.status)) pollTurn(view);
  }
}

/** onStreamEvent hands one event to its turn, adding the turn when it started elsewhere (another tab, the CLI). */
function onStreamEvent(ev) {
  if (!ev || !ev.turn_id) return;
  // An event's time is the server's when it wrote it, so at most its "now":
  // the largest difference seen is the page's best guess of the clock skew.
  const at = parseTime(ev.at);
  if (Number.isFinite(at)) state.skew = Math.max(state.skew ?? -Infinity, at - Date.now());
  let view = state.views.get(ev.turn_id);
  if (!view) {
    if (ev.type === "turn.ended") return; // a turn this page never showed, already over
    view = addTurnView(ev.turn_id, ev.type === "turn.started" ? ev.text || "" : "", []);
    view.update({ turn_id: ev.turn_id, status: "running" });
    scrollDown();
    pollTurn(view);
    refreshConversations();
  }
  view.onEvent(ev);
}

// ---- composer --------------------------------------------------------------

els.composer.addEventListener("keydown", (ev) => {
  if (ev.key === "Enter" && !ev.shiftKey && !ev.isComposing) {
    ev.preventDefault();
    send();
  }
});

els.composerForm.addEventListener("submit", (ev) => {
  ev.preventDefault();
  send();
});

els.attach.addEventListener("click", () => els.fileInput.click());

els.fileInput.addEventListener("change", async () => {
  const files = [...els.fileInput.files];
  els.fileInput.value = "";
  for (const file of files) {
    try {
      const cid = await ensureConversation();
      const gen = state.gen;
      const chip = { name: file.name, uploading: true };
      state.pendingFiles.push(chip);
      renderAttachments();
      const up = await api.uploadArtifact(cid, file);
      if (gen !== state.gen) return;
      Object.assign(chip, up, { uploading: false });
      renderAttachments();
    } catch (err) {
      state.pendingFiles = state.pendingFiles.filter((f) => !f.uploading);
      renderAttachments();
      showError(err);
    }
  }
});

function renderAttachments() {
  els.attachments.replaceChildren(
    ...state.pendingFiles.map((f) =>
      h(
        "li",
        { class: "chip", "data-testid": "attachment" },
        f.uploading ? `Uploading ${f.name}…` : `📎 ${f.name}`,
        h(
          "button",
          {
            type: "button",
            class: "link",
            "aria-label": `Remove ${f.name}`,
            onclick: () => {
              state.pendingFiles = state.pendingFiles.filter((x) => x !== f);
              renderAttachments();
            },
          },
          "Remove",
        ),
      ),
    ),
  );
}

/**
 * yesNo mirrors the API's reading of a short reply to a pending approval
 * as its decision (such a reply answers the approval, it does not cancel it).
 */
function yesNo(text) {
  const t = text.trim().toLowerCase().replace(/^[.!? ]+|[.!? ]+$/g, "");
  if (t.split(/\s+/).length > 3) return false;
  return [
    "yes", "y", "ok", "okay", "approve", "approved", "sure", "go ahead", "do it", "yes please", "ja", "si", "sí", "yep", "yeah",
    "no", "n", "nope", "reject", "rejected", "cancel", "stop", "don't", "do not", "no thanks", "nein",
  ].includes(t);
}

/** waitingView is the open conversation's turn that waits for a form or an approval, if any. */
function waitingView() {
  for (const v of state.views.values()) if (WAITING.has(v.status)) return v;
  return null;
}

/** showWarning asks before a message supersedes an open question: send anyway, or answer it. */
function showWarning(view) {
  const what = view.status === "awaiting_approval" ? "the approval that waits for you" : "the question that waits for your answer";
  els.warning.replaceChildren(
    h("p", {}, h("strong", {}, "This will cancel the open question. "), `Sending a new message now stops ${what}; its calls will not run.`),
    h(
      "div",
      { class: "warning-buttons" },
      h("button", { type: "button", "data-testid": "answer-instead", onclick: () => answerInstead(view) }, "Answer it instead"),
      h("button", { type: "button", class: "secondary", "data-testid": "send-anyway", onclick: () => send({ confirmed: true }) }, "Send anyway"),
    ),
  );
  els.warning.hidden = false;
  els.warning.querySelector('[data-testid="answer-instead"]').focus();
}

function hideWarning() {
  els.warning.hidden = true;
  els.warning.replaceChildren();
}

function answerInstead(view) {
  hideWarning();
  view.interactionEl.scrollIntoView({ block: "center", behavior: "smooth" });
  const target = view.interactionEl.querySelector("input, select, textarea, button");
  target?.focus({ preventScroll: true });
}

let sending = false;

async function send({ confirmed = false } = {}) {
  const text = els.composer.value.trim();
  if (sending || !text) return;
  const chars = [...text].length;
  if (chars > state.maxText) {
    // The API refuses it (413 text_too_long); say so before sending.
    showError(`This message is ${chars.toLocaleString("en")} characters long; the limit is ${state.maxText.toLocaleString("en")}. Shorten it, or send it as a file.`);
    return;
  }
  if (state.pendingFiles.some((f) => f.uploading)) {
    showError("Wait until the uploads have finished.");
    return;
  }
  const waiting = waitingView();
  if (waiting && !confirmed && !(waiting.status === "awaiting_approval" && yesNo(text))) {
    showWarning(waiting);
    return;
  }
  hideWarning();
  sending = true;
  els.send.disabled = true;
  try {
    const cid = await ensureConversation();
    const gen = state.gen;
    const files = state.pendingFiles.map((f) => f.artifact_id);
    const names = state.pendingFiles.map((f) => f.name);
    const res = await api.sendMessage(cid, text, files);
    if (gen !== state.gen) return;
    els.composer.value = "";
    state.pendingFiles = [];
    renderAttachments();
    followTurn(res, text, names);
  } catch (err) {
    showError(err);
  } finally {
    sending = false;
    els.send.disabled = false;
    els.composer.focus();
  }
}

/** followTurn shows the turn a message started (or answered) and follows it. */
function followTurn(res, text, names = []) {
  clearError();
  let view = state.views.get(res.turn_id);
  if (!view) {
    // A new turn. (A short yes/no to a pending approval answers that turn
    // instead, and comes back with its id.)
    view = addTurnView(res.turn_id, text, names);
    view.update({ turn_id: res.turn_id, status: res.status || "running" });
  } else if (view.status && !TERMINAL.has(view.status) && WAITING.has(view.status)) {
    view.showAnswer(text);
  }
  scrollDown(true);
  pollTurn(view);
  // Free text supersedes a turn that waited for input: follow it until
  // it shows that (it reads as running until its execution applies it).
  for (const other of state.views.values()) {
    if (other !== view && WAITING.has(other.status)) pollTurn(other);
  }
  refreshConversations();
}

// ---- store status ----------------------------------------------------------

/**
 * loadInfo shows in the sidebar's foot where conversations are kept, so a
 * store that loses them on restart says so. A stack without the route
 * shows nothing.
 */
async function loadInfo() {
  const el = $("store-status");
  try {
    const info = await api.getInfo();
    if (info && info.max_text > 0) state.maxText = info.max_text;
    const store = info && info.store;
    if (!store || !store.description) return;
    el.textContent = store.description;
    el.classList.toggle("store-volatile", !store.persistent);
    el.hidden = false;
  } catch {
    el.hidden = true;
  }
}

// ---- workflows -------------------------------------------------------------

/** loadWorkflows lists the catalog's workflow templates in the sidebar. */
async function loadWorkflows() {
  try {
    const cat = await api.getCatalog();
    const wfs = (cat && cat.workflows) || [];
    els.workflowList.replaceChildren(
      ...wfs.map((w) =>
        h(
          "li",
          {},
          h("button", { type: "button", class: "link workflow-open", "data-testid": "workflow", "data-id": w.id, title: w.description || null, onclick: () => openWorkflow(w) }, w.name || w.id, w.unavailable ? " (unavailable)" : ""),
        ),
      ),
    );
    if (!wfs.length) els.workflowList.append(h("li", { class: "muted" }, "none"));
    renderTools(cat);
  } catch (err) {
    showError(err);
  }
}

/**
 * renderTools lists the catalog in the sidebar's Tools: every skill
 * (specialists', MCP servers', another clientagent's) and workflow, with
 * whether it waits for approval, whether it is available now, and on
 * demand its description and input schema (a workflow's steps).
 */
function renderTools(cat) {
  const list = document.getElementById("tool-list");
  const badges = (t) => [
    t.requires_approval ? h("span", { class: "badge approval-badge", "data-testid": "tool-approval" }, "needs approval") : null,
    t.unavailable ? h("span", { class: "badge unavailable-badge", "data-testid": "tool-unavailable" }, "unavailable") : null,
  ];
  const skills = ((cat && cat.skills) || []).map((t) =>
    h(
      "li",
      { class: "tool", "data-testid": "tool", "data-name": t.name, "data-kind": "skill", "data-approval": String(!!t.requires_approval), "data-available": String(!t.unavailable) },
      h(
        "details",
        {},
        h("summary", { title: t.description || t.name }, h("code", {}, t.name), " ", ...badges(t)),
        t.description ? h("p", { class: "tool-desc" }, t.description) : null,
        h("pre", { class: "tool-schema", "data-testid": "tool-schema" }, prettyJSON(t.input_schema ?? {})),
      ),
    ),
  );
  const wfs = ((cat && cat.workflows) || []).map((w) =>
    h(
      "li",
      { class: "tool", "data-testid": "tool", "data-name": `workflow_${w.id}`, "data-kind": "workflow", "data-approval": String(!!w.requires_approval), "data-available": String(!w.unavailable) },
      h(
        "details",
        {},
        h("summary", { title: w.description || w.name }, h("code", {}, `workflow_${w.id}`), " ", ...badges(w)),
        w.description ? h("p", { class: "tool-desc" }, w.description) : null,
        h("ol", { class: "tool-steps" }, (w.steps || []).map((st) => h("li", {}, `${st.name}: `, h("code", {}, st.skill)))),
        h("pre", { class: "tool-schema", "data-testid": "tool-schema" }, prettyJSON(w.inputs ?? [])),
      ),
    ),
  );
  list.replaceChildren(...skills, ...wfs);
  if (!skills.length && !wfs.length) list.append(h("li", { class: "muted" }, "none"));
}

/**
 * openWorkflow shows a workflow's inputs above the composer. Every field may
 * stay empty: the turn then asks for what is missing in its own form.
 */
function openWorkflow(w) {
  setDrawer(false);
  const fields = (w.inputs || []).map((i) => ({ name: i.path, type: i.type || "string", description: i.description || "", enum: i.enum || null, required: false }));
  const inputs = fields.map((f, n) => {
    const id = `wf-${w.id}-${n}`;
    return { f, id, el: fieldInput(f, id) };
  });
  const steps = (w.steps || []).map((st) => st.name || st.skill).filter(Boolean);
  const form = els.workflowForm;
  form.replaceChildren(
    h("h3", {}, w.name || w.id),
    w.description ? h("p", { class: "muted" }, w.description) : null,
    steps.length
      ? h("p", { class: "muted", "data-testid": "workflow-steps" }, "Runs: ", steps.join(" → "), w.requires_approval ? " — asks for your approval first." : "")
      : null,
    w.unavailable ? h("p", { class: "inline-error" }, "A specialist of this workflow is unavailable right now.") : null,
    ...inputs.map(({ f, id, el }) => h("div", { class: "field" }, h("label", { for: id }, f.name, f.description ? h("span", { class: "muted" }, ` — ${f.description}`) : null), el)),
    h(
      "div",
      { class: "actions" },
      h("button", { type: "submit", "data-testid": "workflow-start" }, "Start"),
      h("button", { type: "button", class: "link", onclick: () => (form.hidden = true) }, "Cancel"),
    ),
  );
  form.onsubmit = async (ev) => {
    ev.preventDefault();
    const values = {};
    try {
      for (const { f, el } of inputs) {
        const v = fieldValue(f, el);
        if (v !== undefined) values[f.name] = v;
      }
      if (state.pendingFiles.some((f) => f.uploading)) throw new Error("Wait until the uploads have finished.");
      // A workflow's first message has no text: the workflow names the conversation.
      const cid = await ensureConversation(w.name || w.id);
      // Files attached for the next message go with the workflow.
      const names = state.pendingFiles.map((f) => f.name);
      const res = await api.startWorkflow(cid, w.id, values, state.pendingFiles.map((f) => f.artifact_id));
      form.hidden = true;
      state.pendingFiles = [];
      renderAttachments();
      followTurn(res, `Run the workflow ${w.name || w.id}`, names);
    } catch (err) {
      showError(err);
    }
  };
  form.hidden = false;
  inputs[0]?.el.focus();
}

// ---- turns -----------------------------------------------------------------

/**
 * pollTurn follows a turn until it ends. While the event stream is up a
 * running turn is read only when an event asks for it (and, as a safety
 * net, every livePollIntervalMs); without the stream every pollIntervalMs.
 * A turn waiting for the user is read every waitPollIntervalMs (and just
 * after its expires_at): a pause can expire or be answered elsewhere.
 * Called for a turn it already follows, it reads at once and ignores an
 * answer that was in flight (it predates what the caller just did).
 */
async function pollTurn(view) {
  if (view.polling) {
    view.seq++;
    view.wake();
    return;
  }
  view.polling = true;
  const gen = state.gen;
  const cid = state.cid;
  let failures = 0;
  try {
    while (gen === state.gen) {
      let turn;
      const seq = view.seq;
      try {
        turn = await api.getTurn(cid, view.id);
        if (failures) clearUnavailable();
        failures = 0;
      } catch (err) {
        if (gen !== state.gen) return;
        failures++;
        if (err instanceof APIError && err.unavailable) {
          // 503: the store did not answer (or is full). Wait as long as the
          // server asks (or back off), polling once per wait, not piling up.
          const seconds = Math.min(60, err.retryAfter > 0 ? err.retryAfter : Math.min(30, 2 ** failures));
          showUnavailable(seconds);
          await nap(view, seconds * 1000, false);
          continue;
        }
        showError(err);
        if (err instanceof APIError && err.status >= 400 && err.status < 500) return;
        await nap(view, Math.min(8000, 1000 * 2 ** failures));
        continue;
      }
      if (gen !== state.gen) return;
      if (seq !== view.seq) continue;
      const was = view.status;
      view.update(turn);
      if (turn.status !== was) {
        scrollDown();
        // The list's status follows the turn's (e.g. waiting for input).
        if (was) refreshConversations();
      }
      if (WAITING.has(turn.status)) {
        if (view.notesKey !== view.interactionKey) {
          view.notesKey = view.interactionKey;
          loadNotes(view, cid, gen);
        }
        await nap(view, waitingDelay(turn));
        continue;
      }
      if (turn.status !== "running") {
        refreshConversations();
        return;
      }
      // The stream said the turn ended but the read still says running: the
      // record is being written; read again soon.
      const live = state.live && !view.endedSeen;
      await nap(view, live ? config.livePollIntervalMs || 10000 : config.pollIntervalMs || 500);
    }
  } finally {
    view.polling = false;
  }
}

/** waitingDelay is how long to wait before re-reading a paused turn. */
function waitingDelay(turn) {
  const base = config.waitPollIntervalMs || 5000;
  const left = turn.expires_at ? Date.parse(turn.expires_at) - Date.now() : NaN;
  if (!Number.isFinite(left)) return base;
  // Just after the deadline, then every 2 s until the expiry shows.
  if (left > 0) return Math.min(base, left + 250);
  return Math.min(base, 2000);
}

/**
 * nap sleeps ms, or less when the turn's poller is woken (view.wake). A
 * nap that waits out a 503's Retry-After is not cut short (wakeable false):
 * the service asked for that pause.
 */
function nap(view, ms, wakeable = true) {
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      view.wake = () => {};
      resolve();
    };
    const timer = setTimeout(done, ms);
    view.wake = wakeable ? done : () => {};
  });
}

/** loadNotes shows the text a paused turn stored with its form (history kind followup_questions). */
async function loadNotes(view, cid, gen) {
  try {
    const conv = await api.getConversation(cid);
    if (gen !== state.gen) return;
    for (const e of conv.history || []) {
      if (e.turn_id === view.id && e.kind === "followup_questions" && e.content) view.addNote(e.content);
    }
  } catch {
    // The notes are a nicety; the form or approval itself is already shown.
  }
}

/** TurnView is one turn's block in the chat: the user's message, live progress, forms, artifacts, reply. */
class TurnView {
  constructor(id, text, fileNames) {
    this.id = id;
    this.status = "";
    this.polling = false;
    this.seq = 0; // bumped when the page acted on the turn; older poll answers are dropped
    this.wake = () => {}; // cuts the poller's current nap short
    this.endedSeen = false; // the stream said turn.ended
    this.interactionKey = "";
    this.notesKey = "";
    this.notes = new Set();
    this.artifactEls = new Map();
    this.steps = []; // the Turn's steps: {tool, call_id, status, started_at, ended_at, duration_ms, tokens, …, arguments, result}
    this.startedAt = ""; // the turn's start and end (once it has ended): the waterfall's time axis
    this.endedAt = "";
    this.usage = { tokens: 0, cached: 0, cost: 0 }; // the turn's tokens, cached tokens and cost in USD
    this.rows = new Map(); // step key → its waterfall row (kept, so an open row stays open)
    this.expanded = new Set(); // keys of the rows the user opened
    this.rowSeq = 0;
    this.ticker = 0; // grows running bars while the turn runs
    this.llmStarted = 0; // step.started events of LLM calls seen (their order matches the steps')
    this.llmEnded = 0;
    this.stream = { call: 0, text: "" }; // the reply as it streams in (llm.delta)
    this.streamFrame = 0;
    this.replyKey = "";
    this.answers = []; // Turn.answers as last read
    this.answersRead = 0;
    this.answersKey = "";
    this.pendingAnswer = null; // {text, after}: sent, not read back yet

    this.statusEl = h("span", { class: "status-badge", "data-testid": "turn-status" }, "");
    this.llmEl = h("span", { class: "llm-calls", "data-testid": "llm-calls" }, "");
    this.tokensEl = h("span", { class: "turn-tokens", "data-testid": "turn-tokens", hidden: true });
    this.costEl = h("span", { class: "turn-cost", "data-testid": "turn-cost", hidden: true });
    this.stopEl = h("button", { type: "button", class: "stop secondary", "data-testid": "stop", hidden: true, "aria-label": "Stop this turn", onclick: () => this.stop() }, "Stop");
    this.stepsEl = h("ol", { class: "steps waterfall", "data-testid": "steps", "aria-label": "Steps, in time order" });
    this.notesEl = h("div", { class: "notes" });
    this.interactionEl = h("div", { class: "interaction" });
    this.answerEl = h("div", { class: "answers" });
    this.artifactsEl = h("div", { class: "artifacts", "data-testid": "artifacts" });
    this.replyEl = h("div", { class: "reply-slot" });
    this.userEl = h("div", { class: "bubble user", "data-testid": "user-message", hidden: !text }, text || "");
    this.supersededBy = "";
    this.editing = false;
    this.editEl = h("div", { class: "edit-slot", hidden: true });
    this.replacedEl = h("p", { class: "replaced-note muted", "data-testid": "replaced-note", hidden: true }, "Replaced by a newer version of this message below; the model no longer sees this turn.");
    this.actionsEl = h(
      "div",
      { class: "turn-actions", "data-testid": "turn-actions", hidden: true },
      h("button", { type: "button", class: "link", "data-testid": "edit-resend", onclick: () => this.startEdit() }, "Edit"),
      h("button", { type: "button", class: "link", "data-testid": "regenerate", onclick: () => this.resend(this.userEl.textContent.trim()) }, "Regenerate"),
    );
    this.el = h(
      "article",
      { class: "turn", "data-testid": "turn", "data-turn-id": id },
      this.replacedEl,
      this.userEl,
      this.editEl,
      this.actionsEl,
      fileNames && fileNames.length ? h("div", { class: "bubble-files" }, fileNames.map((n) => `📎 ${n}`).join("  ")) : null,
      h(
        "section",
        { class: "turn-panel", "aria-label": "Turn progress" },
        h("div", { class: "turn-head" }, this.statusEl, h("span", { class: "turn-usage", "data-testid": "turn-usage" }, this.llmEl, this.tokensEl, this.costEl), this.stopEl),
        this.stepsEl,
      ),
      this.notesEl,
      this.interactionEl,
      this.answerEl,
      this.artifactsEl,
      this.replyEl,
    );
  }

  /** setSuperseded marks a turn an edited or regenerated message replaced: kept, left out of the model's window. */
  setSuperseded(by) {
    if (by) this.supersededBy = by;
    this.el.classList.toggle("replaced", !!this.supersededBy);
    this.el.dataset.supersededBy = this.supersededBy || "";
    this.replacedEl.hidden = !this.supersededBy;
    refreshTurnActions();
  }

  /** showActions offers, on the newest ended turn, to edit and resend its message or regenerate its answer. */
  showActions(on) {
    this.actionsEl.hidden = !on;
    if (!on && this.editing) this.cancelEdit();
  }

  startEdit() {
    this.editing = true;
    const area = h("textarea", { class: "edit-message", "data-testid": "edit-message", "aria-label": "Edit your message", rows: 3 });
    area.value = this.userEl.textContent;
    const send = h("button", { type: "button", "data-testid": "edit-send", onclick: () => this.resend(area.value.trim()) }, "Send");
    const cancel = h("button", { type: "button", class: "link", onclick: () => this.cancelEdit() }, "Cancel");
    this.editEl.replaceChildren(area, h("div", { class: "edit-buttons" }, send, cancel));
    this.editEl.hidden = false;
    this.userEl.hidden = true;
    area.focus();
  }

  cancelEdit() {
    this.editing = false;
    this.editEl.hidden = true;
    this.editEl.replaceChildren();
    this.userEl.hidden = !this.userEl.textContent;
  }

  /** resend sends text as a new turn that replaces this one (POST messages with supersedes). */
  async resend(text) {
    if (!text) return;
    this.actionsEl.querySelectorAll("button").forEach((b) => (b.disabled = true));
    try {
      const res = await api.sendMessage(state.cid, text, [], this.id);
      this.cancelEdit();
      this.setSuperseded(res.turn_id);
      followTurn(res, text, []);
    } catch (err) {
      showError(err);
    } finally {
      this.actionsEl.querySelectorAll("button").forEach((b) => (b.disabled = false));
    }
  }

  addNote(text) {
    if (this.notes.has(text)) return;
    this.notes.add(text);
    this.notesEl.append(h("div", { class: "bubble assistant note markdown", "data-testid": "note" }, renderMarkdown(text)));
  }

  /**
   * showAnswer shows what the user just answered a form or an approval
   * with, as their message, until the turn's read lists the answer itself.
   */
  showAnswer(text) {
    this.pendingAnswer = { text, after: this.answersRead };
    this.renderAnswers();
  }

  /**
   * renderAnswers shows the turn's answers as the record keeps them
   * (Turn.answers, so a reload or another tab shows them too), then the one
   * just sent that the record does not list yet.
   */
  renderAnswers(turn) {
    if (turn && Array.isArray(turn.answers)) {
      this.answers = turn.answers;
      this.answersRead = turn.answers.length;
    }
    const list = (this.answers || []).map(answerText);
    if (this.pendingAnswer && this.answersRead > this.pendingAnswer.after) this.pendingAnswer = null;
    if (this.pendingAnswer) list.push(this.pendingAnswer.text);
    const key = JSON.stringify(list);
    if (key === this.answersKey) return;
    this.answersKey = key;
    this.answerEl.replaceChildren(...list.map((text) => h("div", { class: "bubble user answer", "data-testid": "user-answer" }, text)));
  }

  update(turn) {
    this.status = turn.status;
    this.el.dataset.status = turn.status;
    this.statusEl.dataset.status = turn.status;
    const rejected = turn.status === "succeeded" && this.onlyRejected(turn.steps || this.steps);
    // A turn whose calls were all rejected ran nothing: say so, not a green "Succeeded".
    this.statusEl.dataset.outcome = rejected ? "rejected" : "";
    this.statusEl.textContent = rejected ? "Rejected" : statusLabel(turn.status);
    this.statusEl.classList.toggle("spinning", turn.status === "running");
    this.stopEl.hidden = TERMINAL.has(turn.status);
    this.stopEl.disabled = false;
    if (turn.text && !this.userEl.textContent) {
      this.userEl.textContent = turn.text;
      this.userEl.hidden = false;
    }
    if (typeof turn.llm_calls === "number") this.setLLMCalls(turn.llm_calls);
    if (turn.started_at) this.startedAt = turn.started_at;
    this.endedAt = turn.ended_at || "";
    if (turn.steps) {
      this.steps = this.mergeRunning(turn);
      this.renderSteps();
    } else {
      this.tickLive();
    }
    this.setUsage(turn);
    for (const a of turn.artifacts || []) this.addArtifact(a);
    this.renderAnswers(turn);
    if (turn.superseded_by !== undefined || turn.status) this.setSuperseded(turn.superseded_by || "");
    this.renderInteraction(turn);
    this.renderReply(turn);
  }

  onlyRejected(steps) {
    const calls = steps.filter((s) => s.tool !== "llm");
    return calls.length > 0 && calls.every((s) => s.status === "rejected");
  }

  setLLMCalls(n) {
    this.llmCalls = n;
    this.llmEl.textContent = n === 1 ? "1 LLM call" : `${n} LLM calls`;
  }

  /**
   * setUsage shows the turn's tokens (with the part the provider's prompt
   * cache served, when any) and its cost (when not 0), from a Turn or a
   * turn.ended event. While the turn runs, its LLM steps may already say more.
   */
  setUsage(u) {
    if (typeof u.tokens === "number") this.usage.tokens = u.tokens;
    if (typeof u.cached_tokens === "number") this.usage.cached = u.cached_tokens;
    if (typeof u.cost_usd === "number") this.usage.cost = u.cost_usd;
    this.renderUsage();
  }

  renderUsage() {
    let { tokens, cached, cost } = this.usage;
    if (!TERMINAL.has(this.status)) {
      const llm = this.steps.filter((s) => s.tool === "llm");
      tokens = Math.max(tokens, sum(llm, "tokens"));
      cached = Math.max(cached, sum(llm, "cached_tokens"));
      cost = Math.max(cost, sum(llm, "cost_usd"));
    }
    this.tokensEl.hidden = !(tokens > 0);
    this.tokensEl.textContent = tokens > 0 ? `${formatCount(tokens)} tokens${cached > 0 ? ` (${formatCount(cached)} cached)` : ""}` : "";
    this.costEl.hidden = !(cost > 0);
    this.costEl.textContent = cost > 0 ? formatUSD(cost) : "";
  }

  /**
   * mergeRunning is a read's steps plus the running steps the event stream
   * announced that the read does not list yet (an LLM call in flight is
   * written to the record only once it has ended), so a read while the turn
   * runs does not make a growing bar vanish.
   */
  mergeRunning(turn) {
    const next = turn.steps.map((s) => ({ ...s }));
    if (turn.status !== "running") return next;
    const readLLM = next.filter((s) => s.tool === "llm").length;
    const localLLM = this.steps.filter((s) => s.tool === "llm");
    for (const s of localLLM.slice(readLLM)) if (s.status === "running") next.push(s);
    for (const s of this.steps) {
      if (s.tool !== "llm" && s.status === "running" && s.call_id && !next.some((n) => n.call_id === s.call_id)) next.push(s);
    }
    return next;
  }

  /** onEvent applies one event of the turn's stream (contract: docs/api/openapi.yaml, GET …/events). */
  onEvent(ev) {
    if (TERMINAL.has(this.status)) {
      // The turn's read is final, but for the spend of an LLM call the user
      // stopped: it arrives when the provider answers, after the cancel.
      if (this.status === "cancelled" && ev.type === "step.ended" && ev.tool === "llm") pollTurn(this);
      return;
    }
    switch (ev.type) {
      case "turn.started":
        if (!this.startedAt && ev.at) this.startedAt = ev.at;
        if (!this.status) this.update({ turn_id: this.id, status: "running", text: ev.text });
        break;
      case "step.started":
        this.stepStarted(ev);
        break;
      case "step.ended":
        this.stepEnded(ev);
        break;
      case "llm.delta":
        this.delta(ev);
        break;
      case "artifact":
        if (ev.artifact) this.addArtifact(ev.artifact);
        break;
      case "form":
      case "approval":
        // The turn's read renders them (and carries the approval's id).
        pollTurn(this);
        break;
      case "turn.ended":
        this.endedSeen = true;
        if (typeof ev.llm_calls === "number") this.setLLMCalls(ev.llm_calls);
        this.setUsage(ev);
        pollTurn(this);
        break;
    }
  }

  stepStarted(ev) {
    if (ev.tool === "llm") {
      this.llmStarted++;
      // A replayed event of a step the turn's read already showed.
      if (this.steps.filter((s) => s.tool === "llm").length >= this.llmStarted) return;
      this.setLLMCalls(Math.max(this.llmCalls || 0, this.llmStarted));
    } else if (ev.call_id && this.steps.some((s) => s.call_id === ev.call_id)) {
      return;
    }
    this.steps.push({ tool: ev.tool, call_id: ev.call_id, status: "running", started_at: ev.at });
    if (this.status !== "running") this.setRunning();
    this.renderSteps();
  }

  stepEnded(ev) {
    let step;
    if (ev.tool === "llm" && !ev.call_id) {
      this.llmEnded++;
      step = this.steps.filter((s) => s.tool === "llm")[this.llmEnded - 1];
    } else {
      step = this.steps.find((s) => s.call_id === ev.call_id && s.tool === ev.tool);
    }
    if (!step) {
      step = { tool: ev.tool, call_id: ev.call_id };
      this.steps.push(step);
    }
    Object.assign(step, {
      status: ev.status || "succeeded",
      started_at: ev.started_at || step.started_at,
      ended_at: ev.ended_at || ev.at,
      duration_ms: ev.duration_ms,
    });
    for (const k of ["tokens", "cached_tokens", "cost_usd"]) if (typeof ev[k] === "number") step[k] = ev[k];
    this.renderSteps();
    this.renderUsage();
  }

  /** setRunning shows a turn as running again after an answer (the read confirms it). */
  setRunning() {
    this.update({ turn_id: this.id, status: "running" });
  }

  /**
   * delta appends a chunk of the model's answer. offset is where the chunk
   * starts in the current LLM call's text: smaller than what is shown means
   * a retried call restarted, so the text is cut back first. A new LLM call
   * starts a new text.
   */
  delta(ev) {
    const call = ev.llm_call || 0;
    if (call !== this.stream.call) this.stream = { call, text: "" };
    const offset = typeof ev.offset === "number" ? ev.offset : this.stream.text.length;
    if (offset < this.stream.text.length) this.stream.text = this.stream.text.slice(0, offset);
    this.stream.text += ev.text || "";
    if (!this.streamFrame) {
      this.streamFrame = requestAnimationFrame(() => {
        this.streamFrame = 0;
        this.renderStream();
      });
    }
  }

  renderStream() {
    if (TERMINAL.has(this.status) || WAITING.has(this.status)) return;
    if (!this.stream.text.trim()) {
      this.replyEl.replaceChildren();
      this.replyKey = "";
      return;
    }
    const atBottom = nearBottom();
    this.replyKey = "stream";
    this.replyEl.replaceChildren(
      h("div", { class: "bubble assistant markdown streaming", "data-testid": "reply", "data-streaming": "true", "aria-busy": "true" }, renderMarkdown(this.stream.text)),
    );
    if (atBottom) scrollDown();
  }

  /**
   * renderSteps shows the steps as a waterfall: one row per step in time
   * order, its bar placed by its start and end on the turn's time axis,
   * with its duration, status and (LLM calls) tokens. A row is a button
   * that opens the step's arguments and result. Rows are kept by key and
   * updated in place, so an open row stays open and keeps its focus.
   */
  renderSteps() {
    const keyed = stepKeys(this.steps);
    const seen = new Set();
    const rows = keyed.map(({ key, step }) => {
      seen.add(key);
      let row = this.rows.get(key);
      if (!row) {
        row = this.newRow(key);
        this.rows.set(key, row);
      }
      row.step = step;
      this.fillRow(row);
      return row;
    });
    for (const [key, row] of this.rows) {
      if (seen.has(key)) continue;
      row.li.remove();
      this.rows.delete(key);
    }
    rows.forEach((row, i) => {
      const at = this.stepsEl.children[i];
      if (at !== row.li) this.stepsEl.insertBefore(row.li, at || null);
    });
    this.layoutSteps();
    this.tickLive();
  }

  newRow(key) {
    const detailId = `step-${this.id}-${++this.rowSeq}`;
    const row = {
      key,
      icon: h("span", { class: "step-icon", "aria-hidden": "true" }),
      tool: h("span", { class: "step-tool" }),
      bar: h("span", { class: "step-bar", "data-testid": "step-bar" }),
      time: h("span", { class: "step-time", "data-testid": "step-time" }),
      status: h("span", { class: "step-status", "data-testid": "step-status" }),
      tokens: h("span", { class: "step-tokens", "data-testid": "step-tokens" }),
      detail: h("div", { class: "step-detail", id: detailId, "data-testid": "step-detail", hidden: true }),
      detailKey: "",
    };
    row.button = h(
      "button",
      { type: "button", class: "step-head", "aria-expanded": "false", "aria-controls": detailId, "data-testid": "step-toggle" },
      h("span", { class: "step-name" }, row.icon, row.tool),
      h("span", { class: "step-track", "aria-hidden": "true" }, row.bar),
      row.time,
      row.status,
      row.tokens,
    );
    row.button.addEventListener("click", () => {
      if (this.expanded.has(key)) this.expanded.delete(key);
      else this.expanded.add(key);
      this.fillRow(row);
    });
    row.li = h("li", { class: "step", "data-testid": "step" }, row.button, row.detail);
    return row;
  }

  fillRow(row) {
    const s = row.step;
    const open = this.expanded.has(row.key);
    const status = s.status || "running";
    row.li.className = `step step-${status}${open ? " expanded" : ""}${s.parent ? " step-child" : ""}`;
    if (s.parent) row.li.dataset.parent = s.parent;
    row.li.dataset.tool = s.tool;
    row.li.dataset.status = status;
    if (s.call_id) row.li.dataset.callId = s.call_id;
    if (row.icon.dataset.status !== status) {
      row.icon.dataset.status = status;
      stepIcon(row.icon, status);
    }
    row.tool.textContent = s.tool === "llm" ? "LLM call" : s.tool;
    row.tool.title = row.tool.textContent;
    row.status.textContent = status.replaceAll("_", " ");
    row.tokens.textContent = s.tool === "llm" && s.tokens > 0 ? `${formatCount(s.tokens)} tokens` : "";
    row.button.setAttribute("aria-expanded", String(open));
    row.detail.hidden = !open;
    if (!open) return;
    // Rebuilt only when what it shows changed: a selection in it survives reads.
    const key = JSON.stringify([s.status, s.tokens, s.cached_tokens, s.cost_usd, s.arguments, s.result, !!s.inspect]);
    if (key === row.detailKey) return;
    row.detailKey = key;
    row.detail.replaceChildren(...stepDetail(s));
  }

  /** layoutSteps places every bar on the turn's time axis and writes the durations (running ones grow). */
  layoutSteps() {
    const running = this.status === "running";
    const now = serverNow();
    const rows = [...this.rows.values()];
    const starts = rows.map((r) => parseTime(r.step.started_at)).filter(Number.isFinite);
    const ends = rows.map((r) => parseTime(r.step.ended_at)).filter(Number.isFinite);
    const t0 = Math.min(...[parseTime(this.startedAt), ...starts].filter(Number.isFinite));
    if (!Number.isFinite(t0)) return;
    let t1 = Math.max(t0, ...starts, ...ends);
    if (running) t1 = Math.max(t1, now);
    else if (TERMINAL.has(this.status)) t1 = Math.max(t1, parseTime(this.endedAt) || t1);
    const total = Math.max(1, t1 - t0);
    for (const r of rows) {
      const s = r.step;
      let start = parseTime(s.started_at);
      if (!Number.isFinite(start)) start = t1;
      let end = parseTime(s.ended_at);
      const live = !Number.isFinite(end) && s.status === "running";
      if (!Number.isFinite(end)) end = live ? (running ? Math.max(start, now) : t1) : start;
      const left = Math.min(100, Math.max(0, ((start - t0) / total) * 100));
      const width = Math.min(100 - left, Math.max(0, ((end - start) / total) * 100));
      // A bar is at least 2 px wide (CSS), so one that ends the turn starts 2 px early.
      r.bar.style.left = `min(${left}%, calc(100% - 2px))`;
      r.bar.style.width = `${width}%`;
      r.li.dataset.offsetMs = String(Math.round(start - t0));
      const ms = typeof s.duration_ms === "number" && !live ? s.duration_ms : end - start;
      r.li.dataset.durationMs = String(Math.round(ms));
      r.time.textContent = formatMs(ms) + (live ? "…" : "");
      r.button.title = `started ${formatMs(start - t0)} into the turn`;
    }
  }

  /** tickLive grows the running bars while the turn runs, and stops when it does not (or left the page). */
  tickLive() {
    if (this.ticker || this.status !== "running") return;
    this.ticker = setInterval(() => {
      if (this.status !== "running" || !this.el.isConnected) {
        clearInterval(this.ticker);
        this.ticker = 0;
        if (this.el.isConnected) this.layoutSteps();
        return;
      }
      this.layoutSteps();
    }, 250);
  }

  /** stop asks the API to cancel the turn (POST …/cancel); a 409 means it ended meanwhile. */
  async stop() {
    this.stopEl.disabled = true;
    try {
      const turn = await api.cancelTurn(state.cid, this.id);
      this.seq++; // a read in flight predates the cancel
      this.update(turn && turn.status ? turn : { turn_id: this.id, status: "cancelled" });
      if (!TERMINAL.has(this.status)) pollTurn(this);
    } catch (err) {
      this.stopEl.disabled = false;
      if (err instanceof APIError && err.status === 409) pollTurn(this);
      else showError(err);
    }
  }

  renderInteraction(turn) {
    let key = "";
    if (turn.status === "awaiting_input" && turn.form) key = "form:" + JSON.stringify(turn.form);
    else if (turn.status === "awaiting_approval" && turn.approval) key = "approval:" + JSON.stringify(turn.approval);
    if (key === this.interactionKey) return;
    this.interactionKey = key;
    if (!key) this.interactionEl.replaceChildren();
    else if (key.startsWith("form:")) this.interactionEl.replaceChildren(this.buildForm(turn.form));
    else this.interactionEl.replaceChildren(this.buildApproval(turn.approval));
  }
  buildForm(form) {
    const errorEl = h("p", { class: "inline-error", "data-testid": "form-error", role: "alert", hidden: true });
    const inputs = []; // {callId, field, el}
    const fieldsets = (form.calls || []).map((call) =>
      h(
        "fieldset",
        { class: "form-call", "data-testid": "form-call", "data-call-id": call.call_id },
        h("legend", {}, `${call.tool} needs:`),
        (call.fields || []).map((f) => {
          const id = `f-${this.id}-${call.call_id}-${f.name}`.replace(/[^a-zA-Z0-9_-]/g, "_");
          const el = fieldInput(f, id);
          inputs.push({ callId: call.call_id, field: f, el });
          const label = h(
            "label",
            { for: id },
            f.name,
            f.required ? h("span", { class: "required", title: "required" }, " *") : null,
            h("span", { class: "field-type" }, ` (${f.type}${f.required ? ", required" : ""})`),
          );
          const desc = f.description ? h("small", { class: "field-desc" }, f.description) : null;
          return f.type === "boolean"
            ? h("div", { class: "field field-check" }, el, label, desc)
            : h("div", { class: "field" }, label, el, desc);
        }),
      ),
    );
    const submit = h("button", { type: "submit", "data-testid": "form-submit" }, "Submit answers");
    const formEl = h("form", { class: "turn-form", "data-testid": "form" }, fieldsets, errorEl, submit);
    formEl.addEventListener("submit", async (ev) => {
      ev.preventDefault();
      const answers = {};
      try {
        for (const { callId, field, el } of inputs) {
          const v = fieldValue(field, el);
          if (v === undefined) continue;
          (answers[callId] ||= {})[field.name] = v;
        }
        for (const call of form.calls || []) answers[call.call_id] ||= {};
      } catch (err) {
        errorEl.textContent = err.message;
        errorEl.hidden = false;
        return;
      }
      await this.submitInput({ answers }, submit, errorEl, formAnswerText(form, answers));
    });
    return formEl;
  }

  buildApproval(approval) {
    const errorEl = h("p", { class: "inline-error", "data-testid": "approval-error", role: "alert", hidden: true });
    const note = h("input", { type: "text", id: `note-${this.id}`, "data-testid": "approval-note", placeholder: "Optional note" });
    const edits = []; // per call: {call, area, editing}
    const calls = (approval.calls || []).map((c) => {
      const shown = JSON.stringify(c.arguments ?? {}, null, 2);
      const pre = h("pre", { class: "approval-args", "data-testid": "approval-args" }, shown);
      const area = h("textarea", {
        class: "approval-args approval-args-edit",
        "data-testid": "approval-args-edit",
        "aria-label": `Arguments of ${c.tool}`,
        spellcheck: "false",
        rows: Math.min(20, shown.split("\n").length + 1),
      });
      const edit = { call: c, area, editing: false };
      edits.push(edit);
      const toggle = h("button", { type: "button", class: "link approval-edit", "data-testid": "approval-edit", "aria-label": `Edit the arguments of ${c.tool}` }, "Edit");
      toggle.addEventListener("click", () => {
        edit.editing = !edit.editing;
        // Discarding an edit shows the arguments as the approval has them again.
        area.value = shown;
        area.removeAttribute("aria-invalid");
        if (edit.editing) pre.replaceWith(area);
        else area.replaceWith(pre);
        toggle.textContent = edit.editing ? "Discard edit" : "Edit";
        errorEl.hidden = true;
        if (edit.editing) area.focus();
      });
      return h(
        "div",
        { class: "approval-call", "data-testid": "approval-call", "data-call-id": c.call_id },
        h("div", { class: "approval-call-head" }, h("span", { class: "approval-tool" }, c.tool), toggle),
        pre,
        approvalArtifacts(c.arguments),
        c.steps && c.steps.length
          ? h(
              "ol",
              { class: "approval-plan", "data-testid": "approval-plan", "aria-label": "The workflow's plan" },
              c.steps.map((st) =>
                h("li", { "data-testid": "plan-step", "data-skill": st.skill }, h("strong", {}, st.name || st.skill), ` ${st.skill} `, h("code", {}, JSON.stringify(st.arguments ?? {}))),
              ),
            )
          : null,
      );
    });
    const decide = (decision, btn) => {
      // The id names exactly the calls and arguments shown: the server
      // refuses an answer to an approval that has changed since (409).
      const body = { approval: { id: approval.id, decision } };
      const n = note.value.trim();
      if (n) body.approval.note = n;
      if (decision === "approve") {
        let args;
        try {
          args = editedArguments(edits);
        } catch (err) {
          errorEl.textContent = err.message;
          errorEl.hidden = false;
          return;
        }
        if (Object.keys(args).length) body.approval.arguments = args;
      }
      let said = decision === "approve" ? "Approved" : "Rejected";
      if (body.approval.arguments) said += " with edited arguments";
      if (n) said += `: ${n}`;
      return this.submitInput(body, btn, errorEl, said);
    };
    const approve = h("button", { type: "button", class: "approve", "data-testid": "approve" }, "Approve");
    const reject = h("button", { type: "button", class: "reject", "data-testid": "reject" }, "Reject");
    approve.addEventListener("click", () => decide("approve", approve));
    reject.addEventListener("click", () => decide("reject", reject));
    return h(
      "section",
      { class: "approval", "data-testid": "approval", "data-approval-id": approval.id, "aria-label": "Approval needed" },
      h("p", { class: "approval-title" }, calls.length === 1 ? "Approve this call with exactly these arguments?" : `Approve these ${calls.length} calls with exactly these arguments?`),
      calls,
      h("label", { for: `note-${this.id}` }, "Note"),
      note,
      errorEl,
      h("div", { class: "approval-buttons" }, approve, reject),
    );
  }

  async submitInput(body, button, errorEl, said) {
    const buttons = this.interactionEl.querySelectorAll("button");
    buttons.forEach((b) => (b.disabled = true));
    errorEl.hidden = true;
    try {
      const turn = await api.sendInput(state.cid, this.id, body);
      if (said) this.showAnswer(said);
      this.seq++; // a read in flight predates the answer
      this.update(turn && turn.status ? turn : { turn_id: this.id, status: "running" });
      pollTurn(this);
    } catch (err) {
      buttons.forEach((b) => (b.disabled = false));
      // 409 stale_approval: the approval changed since it was shown (e.g. a
      // specialist asked for more input); nothing ran. Show the new one.
      if (err instanceof APIError && err.code === "stale_approval") {
        await this.reload(STALE_APPROVAL, errorEl);
        return;
      }
      // Anything else (400 invalid_arguments, invalid_answer, …) is shown
      // here and the panel stays as it is, edits included.
      errorEl.textContent = err.message;
      errorEl.hidden = false;
      // 409: nothing waits any more (answered elsewhere, expired, superseded).
      // Follow the turn: it may read as running until the other answer is applied.
      if (err instanceof APIError && err.status === 409) pollTurn(this);
      else if (!(err instanceof APIError) || err.status === 0 || err.status >= 500) showError(err);
    }
  }

  /** reload re-reads the turn at once and shows message in its (possibly new) approval panel. */
  async reload(message, errorEl) {
    const gen = state.gen;
    this.seq++; // a poll answer in flight predates the change
    try {
      const turn = await api.getTurn(state.cid, this.id);
      if (gen !== state.gen) return;
      this.update(turn);
    } catch (err) {
      if (gen === state.gen) showError(err);
    }
    const el = this.interactionEl.querySelector('[data-testid="approval-error"]') || errorEl;
    el.textContent = message;
    el.hidden = false;
    pollTurn(this);
  }

  addArtifact(a) {
    state.artifacts.set(a.artifact_id, a);
    if (this.artifactEls.has(a.artifact_id)) return;
    const cid = state.cid;
    const isImage = IMAGE_TYPES.has((a.mime_type || "").toLowerCase());
    const img = isImage ? h("img", { "data-testid": "artifact-img", alt: a.description || a.name, "data-artifact-id": a.artifact_id }) : null;
    const link = h("a", { class: "download", "data-testid": "artifact-download", download: a.name, "aria-disabled": "true" }, `Download ${a.name}`);
    const fig = h(
      "figure",
      { class: "artifact", "data-testid": "artifact", "data-artifact-id": a.artifact_id, "data-mime-type": a.mime_type },
      img,
      h(
        "figcaption",
        {},
        h("span", { class: "artifact-name" }, a.name),
        h("span", { class: "artifact-type" }, ` ${a.mime_type}`),
        a.description ? h("span", { class: "artifact-desc" }, ` — ${linkArtifactText(a.description)}`) : null,
        " ",
        link,
      ),
    );
    this.artifactEls.set(a.artifact_id, fig);
    this.artifactsEl.append(fig);
    Promise.all([artifactURL(cid, a), linkURL(cid, a)]).then(
      ([url, href]) => {
        if (img) img.src = url;
        link.href = href;
        link.removeAttribute("aria-disabled");
      },
      (err) => {
        fig.append(h("p", { class: "inline-error", role: "alert" }, `Could not load ${a.name}: ${err.message}`));
      },
    );
  }

  renderReply(turn) {
    const s = turn.status;
    if (s === "running") return; // the streamed text (if any) stays until the turn ends
    const key = `${s}:${turn.reply || ""}:${turn.partial_reply || ""}`;
    if (key === this.replyKey) return;
    this.replyKey = key;
    let el = null;
    const error = (cls, title, text, alert = true) =>
      h("div", { class: `bubble error ${cls}`, "data-testid": "turn-error", role: alert ? "alert" : null }, h("strong", {}, title), " ", text);
    if (s === "succeeded") {
      el = h("div", { class: "bubble assistant markdown", "data-testid": "reply" }, renderMarkdown(turn.reply || ""));
    } else if (s === "failed") {
      el = error("failed", "The turn failed.", turn.reply || "");
    } else if (s === "expired") {
      el = error("expired", "This turn expired.", turn.reply || "Nobody answered in time.");
    } else if (s === "superseded") {
      el = error("superseded", "Superseded.", turn.reply || "A newer message replaced this turn; its waiting calls were not executed.", false);
    } else if (s === "cancelled") {
      el = error("cancelled", "Stopped.", turn.reply || "You stopped this turn.", false);
      if (turn.partial_reply) {
        // The answer as far as it had streamed, kept and marked stopped.
        el = h(
          "div",
          { class: "stopped-reply" },
          h("div", { class: "bubble assistant markdown stopped", "data-testid": "reply", "data-stopped": "true" }, renderMarkdown(turn.partial_reply)),
          el,
        );
      }
    } else if (s === "blocked") {
      el = error("blocked", "Blocked by policy.", turn.reply || "The request was blocked.");
    }
    if (el) this.replyEl.replaceChildren(el);
    else this.replyEl.replaceChildren();
  }
}

/**
 * answerText is one of Turn.answers as the user's message: a form's values
 * ("material: steel, holes: 4") or an approval's decision, whether the
 * arguments were edited, and the note.
 */
function answerText(a) {
  if (a.kind === "form") {
    const parts = [];
    for (const values of Object.values(a.values || {})) {
      for (const [k, v] of Object.entries(values || {})) parts.push(`${k}: ${typeof v === "boolean" ? (v ? "yes" : "no") : v}`);
    }
    return parts.length ? parts.join(", ") : "(no answers)";
  }
  let said = a.decision === "approve" ? "Approved" : "Rejected";
  if (a.edited && a.edited.length) said += " with edited arguments";
  if (a.note) said += `: ${a.note}`;
  return said;
}

/**
 * approvalArtifacts shows the artifacts a call's arguments name (an
 * artifact_id, a list of them) by name, with a thumbnail for an image, so
 * an approval is not decided on a raw art_… id.
 */
function approvalArtifacts(args) {
  const ids = [];
  const walk = (v) => {
    if (typeof v === "string") {
      if ((state.artifacts.has(v) || /^art_[A-Za-z0-9_-]+$/.test(v)) && !ids.includes(v)) ids.push(v);
    } else if (Array.isArray(v)) v.forEach(walk);
    else if (v && typeof v === "object") Object.values(v).forEach(walk);
  };
  walk(args);
  if (!ids.length) return null;
  return h("div", { class: "approval-artifacts", "data-testid": "approval-artifacts" }, ids.map((id) => artifactRef(id)));
}

/** formAnswerText is a form's answers as the user's message: "material: steel, holes: 4". */
function formAnswerText(form, answers) {
  const parts = [];
  for (const call of form.calls || []) {
    for (const [k, v] of Object.entries(answers[call.call_id] || {})) {
      parts.push(`${k}: ${typeof v === "boolean" ? (v ? "yes" : "no") : v}`);
    }
  }
  return parts.length ? parts.join(", ") : "(no answers)";
}

// ---- markdown ----------------------------------------------------------------

/**
 * renderMarkdown turns a reply's markdown into a sanitised fragment: marked
 * renders it, DOMPurify removes scripts, event handlers and anything active,
 * images from elsewhere become links (the page loads nothing external), and
 * artifact ids become the artifacts themselves.
 */
function renderMarkdown(text) {
  const html = marked.parse(String(text || ""), { async: false });
  const frag = DOMPurify.sanitize(html, {
    RETURN_DOM_FRAGMENT: true,
    FORBID_TAGS: ["style", "form", "input", "button", "textarea", "select", "iframe", "object", "embed"],
    FORBID_ATTR: ["style", "class", "id"],
  });
  for (const img of frag.querySelectorAll("img")) {
    const src = img.getAttribute("src") || "";
    img.replaceWith(h("a", { href: safeHref(src), target: "_blank", rel: "noopener noreferrer" }, img.getAttribute("alt") || src));
  }
  for (const a of frag.querySelectorAll("a[href]")) {
    a.setAttribute("href", safeHref(a.getAttribute("href")));
    a.setAttribute("target", "_blank");
    a.setAttribute("rel", "noopener noreferrer");
  }
  linkArtifacts(frag);
  return frag;
}

function safeHref(href) {
  try {
    const u = new URL(href, location.href);
    return ["http:", "https:", "mailto:"].includes(u.protocol) ? u.href : "#";
  } catch {
    return "#";
  }
}

/** linkArtifacts replaces artifact ids in a fragment's text with links (and thumbnails) to the artifacts. */
function linkArtifacts(root) {
  const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT, {
    acceptNode: (n) => (n.parentElement && n.parentElement.closest("a") ? NodeFilter.FILTER_REJECT : NodeFilter.FILTER_ACCEPT),
  });
  const nodes = [];
  for (let n = walker.nextNode(); n; n = walker.nextNode()) if (n.nodeValue.includes("art_")) nodes.push(n);
  for (const n of nodes) {
    const parts = [];
    let last = 0;
    for (const m of n.nodeValue.matchAll(ART_REF)) {
      parts.push(n.nodeValue.slice(last, m.index));
      parts.push(artifactRef(m[1] || m[2] || m[3]));
      last = m.index + m[0].length;
    }
    if (!parts.length) continue;
    parts.push(n.nodeValue.slice(last));
    n.replaceWith(...parts.filter((p) => p !== ""));
  }
}

/** linkArtifactText is text with artifact ids replaced by the artifacts' names (for plain-text places). */
function linkArtifactText(text) {
  return String(text).replace(ART_REF, (m, a, b, c) => {
    const ref = state.artifacts.get(a || b || c);
    return ref ? ref.name : "an artifact";
  });
}

/** artifactRef is a link to an artifact of the open conversation, with a thumbnail for an image. */
function artifactRef(aid) {
  const a = state.artifacts.get(aid) || { artifact_id: aid, name: "artifact", mime_type: "" };
  const isImage = IMAGE_TYPES.has((a.mime_type || "").toLowerCase());
  const opens = PASSIVE_TYPES.has((a.mime_type || "").toLowerCase());
  const thumb = isImage ? h("img", { class: "artifact-thumb", alt: "", "data-testid": "artifact-thumb" }) : null;
  const link = h(
    "a",
    { class: "artifact-ref", "data-testid": "artifact-ref", "data-artifact-id": aid, title: a.description || a.name, download: opens ? null : a.name, target: opens ? "_blank" : null, rel: "noopener" },
    thumb,
    h("span", {}, isImage ? a.name : `📎 ${a.name}`),
  );
  const cid = state.cid;
  if (cid) {
    Promise.all([artifactURL(cid, a), linkURL(cid, a)]).then(
      ([url, href]) => {
        link.href = href;
        if (thumb) thumb.src = url;
      },
      () => link.classList.add("broken"),
    );
  }
  return link;
}
function fieldInput(f, id) {
  const common = { id, name: f.name, "data-testid": `field-${f.name}`, required: f.required && f.type !== "boolean" };
  if (f.enum && f.enum.length) {
    return h(
      "select",
      common,
      f.required ? h("option", { value: "", disabled: true, selected: true }, "Choose…") : h("option", { value: "" }, "—"),
      f.enum.map((v) => h("option", { value: v }, v)),
    );
  }
  switch (f.type) {
    case "integer":
      return h("input", { ...common, type: "number", step: "1" });
    case "number":
      return h("input", { ...common, type: "number", step: "any" });
    case "boolean":
      return h("input", { ...common, type: "checkbox" });
    default:
      return h("input", { ...common, type: "text" });
  }
}

/** fieldValue reads one answer; undefined means "not given". */
function fieldValue(f, el) {
  if (f.type === "boolean") return el.checked;
  const raw = el.value.trim();
  if (raw === "") return undefined;
  if (f.enum && f.enum.length && f.type !== "integer" && f.type !== "number") return raw;
  if (f.type === "integer") {
    const n = Number(raw);
    if (!Number.isInteger(n)) throw new Error(`${f.name} must be a whole number`);
    return n;
  }
  if (f.type === "number") {
    const n = Number(raw);
    if (Number.isNaN(n)) throw new Error(`${f.name} must be a number`);
    return n;
  }
  return raw;
}

/**
 * editedArguments reads the approval's open edits: call id → the edited
 * arguments object, for the calls whose JSON differs from what was shown.
 * It throws (naming the call) when an edit is not a JSON object.
 */
function editedArguments(edits) {
  const out = {};
  for (const e of edits) {
    if (!e.editing) continue;
    e.area.removeAttribute("aria-invalid");
    let v;
    try {
      v = JSON.parse(e.area.value);
    } catch (err) {
      e.area.setAttribute("aria-invalid", "true");
      e.area.focus();
      throw new Error(`The arguments of ${e.call.tool} are not valid JSON: ${err.message}`);
    }
    if (!v || typeof v !== "object" || Array.isArray(v)) {
      e.area.setAttribute("aria-invalid", "true");
      e.area.focus();
      throw new Error(`The arguments of ${e.call.tool} must be a JSON object.`);
    }
    // Only a real change is sent: reformatting the JSON edits nothing.
    if (canonicalJSON(v) !== canonicalJSON(e.call.arguments ?? {})) out[e.call.call_id] = v;
  }
  return out;
}

/** canonicalJSON is JSON with object keys sorted, so equal values compare equal. */
function canonicalJSON(v) {
  if (Array.isArray(v)) return `[${v.map(canonicalJSON).join(",")}]`;
  if (v && typeof v === "object") {
    return `{${Object.keys(v)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonicalJSON(v[k])}`)
      .join(",")}}`;
  }
  return JSON.stringify(v);
}

/**
 * artifactURL fetches an artifact once (with the token) and returns the URL
 * an <img> shows it from: a blob: URL for a passive type, and for an active
 * one (an SVG) a data: URL, whose document, should anyone open it, has an
 * origin of its own: a blob: URL of this page opened in a tab is a
 * document of this origin, and its script would run here.
 */
function artifactURL(cid, a) {
  const key = `${cid}/${a.artifact_id}`;
  if (!state.blobs.has(key)) {
    const bytes = api.artifactBlob(cid, a.artifact_id, a.mime_type);
    const p = PASSIVE_TYPES.has((a.mime_type || "").toLowerCase()) ? bytes.then((b) => URL.createObjectURL(b)) : bytes.then(dataURL);
    p.catch(() => state.blobs.delete(key));
    state.blobs.set(key, p);
  }
  return state.blobs.get(key);
}

/** dataURL reads a blob as a data: URL of its type. */
function dataURL(blob) {
  return new Promise((resolve, reject) => {
    const r = new FileReader();
    r.onload = () => resolve(r.result);
    r.onerror = () => reject(r.error || new Error("cannot read the artifact"));
    r.readAsDataURL(blob);
  });
}

/**
 * linkURL is the blob: URL a link to the artifact points at: the artifact
 * itself for a passive type, else its bytes as application/octet-stream,
 * so that following the link downloads and never renders an active
 * document (an SVG's or HTML's script) in this origin.
 */
function linkURL(cid, a) {
  if (PASSIVE_TYPES.has((a.mime_type || "").toLowerCase())) return artifactURL(cid, a);
  const key = `${cid}/${a.artifact_id}#download`;
  if (!state.blobs.has(key)) {
    const p = api.artifactBlob(cid, a.artifact_id, a.mime_type).then((b) => URL.createObjectURL(new Blob([b], { type: "application/octet-stream" })));
    p.catch(() => state.blobs.delete(key));
    state.blobs.set(key, p);
  }
  return state.blobs.get(key);
}

function statusLabel(s) {
  return STATUS_LABELS[s] || s;
}

/**
 * stepKeys orders the steps in time (by start; the read's order among
 * equals) and names each row: a tool call by its call id, an LLM call by
 * its place among the turn's LLM calls.
 */
function stepKeys(steps) {
  const seen = new Map();
  let llm = 0;
  const keyed = steps.map((step, i) => {
    let key = step.tool === "llm" ? `llm#${llm++}` : `call:${step.call_id || `#${i}`}:${step.tool}`;
    const n = seen.get(key) || 0;
    seen.set(key, n + 1);
    if (n) key += `#${n}`;
    const start = parseTime(step.started_at);
    return { key, step, i, start: Number.isFinite(start) ? start : Infinity };
  });
  keyed.sort((a, b) => a.start - b.start || a.i - b.i);
  // A workflow's steps (parent: its call id) go right after it, nested.
  const children = new Map();
  const top = [];
  for (const k of keyed) {
    const p = k.step.parent;
    if (p && keyed.some((o) => o.step.call_id === p && !o.step.parent)) {
      if (!children.has(p)) children.set(p, []);
      children.get(p).push(k);
    } else top.push(k);
  }
  return top.flatMap((k) => [k, ...(children.get(k.step.call_id) || [])]);
}

/** stepDetail is what an open row shows: an LLM call's usage, a tool call's arguments and result (as text, never HTML). */
function stepDetail(s) {
  if (s.tool === "llm") {
    const facts = [];
    if (s.tokens > 0) facts.push(`${formatCount(s.tokens)} tokens${s.cached_tokens > 0 ? `, ${formatCount(s.cached_tokens)} of them from the prompt cache` : ""}`);
    if (s.cost_usd > 0) facts.push(formatUSD(s.cost_usd));
    const out = [h("p", { class: "step-facts", "data-testid": "step-usage" }, facts.length ? facts.join(" · ") : s.status === "running" ? "The model is answering…" : "No usage recorded.")];
    if (s.status === "running") return out;
    const inspect = s.inspect;
    if (!inspect) {
      out.push(h("p", { class: "muted", "data-testid": "inspect-off" }, "The call's content is not recorded: the operator turns it on with OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true."));
      return out;
    }
    // The inspector: what the call sent and what came back (the owner's own turn only).
    const section = (label, testid, body) => h("details", { class: "inspect", "data-testid": testid }, h("summary", {}, label), h("pre", { class: "step-json" }, body));
    out.push(
      h(
        "div",
        { class: "inspector", "data-testid": "inspector" },
        section(`Messages sent (${(inspect.messages || []).length})`, "inspect-messages", prettyJSON(inspect.messages || [])),
        section(`Tools offered (${(inspect.tools || []).length})`, "inspect-tools", (inspect.tools || []).join("\n")),
        section("System prompt and context", "inspect-system", `${inspect.system || ""}\n\n${inspect.context || ""}`.trim()),
        section("Raw response", "inspect-response", prettyJSON(inspect.response || {})),
      ),
    );
    return out;
  }
  const out = [h("p", { class: "step-label" }, "Arguments")];
  out.push(
    s.arguments !== undefined && s.arguments !== null
      ? h("pre", { class: "step-json", "data-testid": "step-arguments" }, prettyJSON(s.arguments))
      : h("p", { class: "muted", "data-testid": "step-arguments" }, "Not recorded."),
  );
  out.push(h("p", { class: "step-label" }, "Result"));
  out.push(
    s.result !== undefined && s.result !== null && s.result !== ""
      ? h("pre", { class: "step-json", "data-testid": "step-result" }, prettyJSON(s.result))
      : h("p", { class: "muted", "data-testid": "step-result" }, s.status === "running" ? "Running…" : "None."),
  );
  return out;
}

/** prettyJSON is a value as indented JSON (a string holding JSON is parsed first). */
function prettyJSON(v) {
  if (typeof v === "string") {
    try {
      v = JSON.parse(v);
    } catch {
      return v;
    }
  }
  return JSON.stringify(v, null, 2);
}

/** parseTime reads an API time in ms; NaN for none (or Go's zero time). */
function parseTime(t) {
  if (!t || String(t).startsWith("0001")) return NaN;
  return Date.parse(t);
}

/** serverNow is the API's clock as well as the page can tell: events carry the server's time (state.skew). */
function serverNow() {
  return Date.now() + (state.skew || 0);
}

function formatMs(ms) {
  if (!Number.isFinite(ms) || ms < 0) ms = 0;
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60000) return `${(ms / 1000).toFixed(1)} s`;
  return `${Math.floor(ms / 60000)} min ${Math.round((ms % 60000) / 1000)} s`;
}

function formatCount(n) {
  return Number(n).toLocaleString("en-US");
}

/** formatUSD writes a cost: two significant digits below a dollar ($0.0012), cents above. */
function formatUSD(v) {
  return v < 1
    ? `$${Number(v.toPrecision(2)).toLocaleString("en-US", { minimumFractionDigits: 2, maximumFractionDigits: 8 })}`
    : v.toLocaleString("en-US", { style: "currency", currency: "USD" });
}

function sum(list, field) {
  return list.reduce((n, x) => n + (typeof x[field] === "number" ? x[field] : 0), 0);
}

function formatTime(t) {
  if (!t) return "";
  const d = new Date(t);
  if (Number.isNaN(d.getTime())) return "";
  return d.toLocaleString([], { month: "short", day: "numeric", hour: "2-digit", minute: "2-digit" });
}

/** nearBottom says whether the chat shows its end (new text then keeps it in view). */
function nearBottom() {
  const m = els.messages;
  return m.scrollHeight - m.scrollTop - m.clientHeight < 80;
}

function scrollDown() {
  els.messages.scrollTop = els.messages.scrollHeight;
}

// ---- start -----------------------------------------------------------------

$("new-conversation").addEventListener("click", () => newChat());

async function start() {
  if (!state.token) {
    askToken();
    return;
  }
  els.tokenPanel.hidden = true;
  els.app.hidden = false;
  const cid = routeCid();
  const listed = refreshConversations();
  watchList();
  loadWorkflows();
  loadInfo();
  if (cid) await openConversation(cid, { route: false });
  await listed;
  renderConversations();
  els.composer.focus();
}

start();
