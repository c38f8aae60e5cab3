// The clientagent chat page: conversation list, chat, live turn progress,
// typed forms, approvals and artifacts. Plain ES module, no framework, no
// build step and nothing loaded from outside the page's own files.
import { config } from "./config.js";
import { API, APIError } from "./api.js";

const TERMINAL = new Set(["succeeded", "failed", "expired", "superseded"]);
const WAITING = new Set(["awaiting_input", "awaiting_approval"]);
const IMAGE_TYPES = new Set(["image/png", "image/jpeg", "image/jpg", "image/svg+xml", "image/gif", "image/webp"]);
const STEP_ICONS = {
  running: "⏳",
  succeeded: "✓",
  failed: "✗",
  rejected: "⊘",
  not_executed: "–",
  answered: "✎",
};
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
};

const $ = (id) => document.getElementById(id);
const els = {
  app: $("app"),
  banner: $("banner"),
  bannerText: $("banner-text"),
  tokenPanel: $("token-panel"),
  tokenForm: $("token-form"),
  tokenInput: $("token-input"),
  list: $("conversation-list"),
  title: $("chat-title"),
  messages: $("messages"),
  composerForm: $("composer-form"),
  composer: $("composer"),
  send: $("send"),
  attach: $("attach"),
  fileInput: $("file-input"),
  attachments: $("attachments"),
  workflowList: $("workflow-list"),
  workflowForm: $("workflow-form"),
};

const state = {
  token: readToken(),
  conversations: [],
  cid: null,
  // gen changes whenever the open conversation changes, so loops and late
  // answers that belong to the previous one stop touching the page.
  gen: 0,
  views: new Map(), // turn_id → TurnView of the open conversation
  pendingFiles: [], // uploads for the next message: {artifact_id, name, mime_type}
  blobs: new Map(), // "cid/aid" → Promise<object URL>
};

const api = new API(config.apiBase || "", () => state.token);

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
    history.replaceState(null, "", location.pathname + location.search);
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
  start();
});

$("change-token").addEventListener("click", () => {
  localStorage.removeItem(config.tokenStorageKey);
  state.token = "";
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

// ---- conversations ---------------------------------------------------------

async function refreshConversations() {
  try {
    const data = await api.listConversations();
    state.conversations = (data && data.conversations) || [];
    renderConversations();
  } catch (err) {
    showError(err);
  }
}

function renderConversations() {
  const open = state.conversations.find((c) => c.conversation_id === state.cid);
  if (open && open.title) els.title.textContent = open.title;
  els.list.replaceChildren(
    ...state.conversations.map((c) => {
      const active = c.conversation_id === state.cid;
      return h(
        "li",
        { class: active ? "conversation active" : "conversation", "data-testid": "conversation", "data-id": c.conversation_id },
        h(
          "button",
          { type: "button", class: "conversation-open", "aria-current": active ? "true" : null, onclick: () => openConversation(c.conversation_id) },
          h("span", { class: "conversation-title" }, c.title || "New conversation"),
          h("span", { class: "conversation-meta" }, [c.status ? statusLabel(c.status) : "", formatTime(c.updated_at)].filter(Boolean).join(" · ")),
        ),
        h(
          "button",
          {
            type: "button",
            class: "conversation-delete link",
            "data-testid": "delete-conversation",
            "aria-label": `Delete conversation ${c.title || c.conversation_id}`,
            onclick: () => deleteConversation(c.conversation_id),
          },
          "Delete",
        ),
      );
    }),
  );
}

async function newConversation() {
  const data = await api.createConversation();
  await openConversation(data.conversation_id, { fresh: true });
  refreshConversations();
  return data.conversation_id;
}

async function deleteConversation(cid) {
  try {
    await api.deleteConversation(cid);
    if (cid === state.cid) resetChat(null);
    await refreshConversations();
  } catch (err) {
    showError(err);
  }
}

function resetChat(cid) {
  state.gen++;
  state.cid = cid;
  state.views = new Map();
  state.pendingFiles = [];
  for (const p of state.blobs.values()) p.then((u) => URL.revokeObjectURL(u), () => {});
  state.blobs = new Map();
  renderAttachments();
  els.messages.replaceChildren(h("p", { class: "empty" }, "Ask for something, e.g. “Create a PNG image with the word Popelnase”."));
  els.title.textContent = "New conversation";
  renderConversations();
}

async function openConversation(cid, { fresh = false } = {}) {
  resetChat(cid);
  if (fresh) return;
  const gen = state.gen;
  let conv;
  try {
    conv = await api.getConversation(cid);
  } catch (err) {
    showError(err);
    return;
  }
  if (gen !== state.gen) return;
  const summary = state.conversations.find((c) => c.conversation_id === cid);
  els.title.textContent = (summary && summary.title) || "Conversation";
  renderConversation(conv);
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
  const clearEmpty = () => els.messages.querySelector(".empty")?.remove();

  const placeTurn = (turn) => {
    const entries = byTurn.get(turn.turn_id) || [];
    const userEntry = entries.find((e) => e.role === "user" && e.kind === "message");
    const view = new TurnView(turn.turn_id, turn.text || (userEntry && userEntry.content) || "", []);
    for (const e of entries) {
      if ((e.kind === "followup_questions" || e.kind === "plan") && e.content) view.addNote(e.content);
    }
    state.views.set(turn.turn_id, view);
    clearEmpty();
    els.messages.append(view.el);
    view.update(turn);
    // Waiting turns are followed too: they can expire or be answered elsewhere.
    if (!TERMINAL.has(turn.status)) pollTurn(view);
  };

  for (const e of history) {
    if (e.turn_id && turns.has(e.turn_id)) {
      if (!state.views.has(e.turn_id)) placeTurn(turns.get(e.turn_id));
      continue;
    }
    // An entry without a known turn: show it as a plain bubble.
    if (e.kind === "plan_approved" || !e.content) continue;
    clearEmpty();
    els.messages.append(h("div", { class: `bubble ${e.role === "user" ? "user" : "assistant"}`, "data-testid": "history-message" }, e.content));
  }
  const rest = [...turns.values()].filter((t) => !state.views.has(t.turn_id));
  rest.sort((a, b) => String(a.started_at || "").localeCompare(String(b.started_at || "")));
  rest.forEach(placeTurn);
  scrollDown();
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
      const cid = state.cid || (await newConversation());
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

let sending = false;

async function send() {
  const text = els.composer.value.trim();
  if (sending || !text) return;
  if (state.pendingFiles.some((f) => f.uploading)) {
    showError("Wait until the uploads have finished.");
    return;
  }
  sending = true;
  els.send.disabled = true;
  try {
    const cid = state.cid || (await newConversation());
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

/** followTurn shows the turn a message started (or answered) and polls it. */
function followTurn(res, text, names = []) {
  clearError();
  let view = state.views.get(res.turn_id);
  if (!view) {
    // A new turn. (A short yes/no to a pending approval answers that turn
    // instead, and comes back with its id.)
    view = new TurnView(res.turn_id, text, names);
    state.views.set(res.turn_id, view);
    els.messages.querySelector(".empty")?.remove();
    els.messages.append(view.el);
  }
  view.update({ turn_id: res.turn_id, status: res.status || "running" });
  scrollDown();
  pollTurn(view);
  // Free text supersedes a turn that waited for input: follow it until
  // it shows that (it reads as running until its execution applies it).
  for (const other of state.views.values()) {
    if (other !== view && WAITING.has(other.status)) pollTurn(other);
  }
  refreshConversations();
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
          h("button", { type: "button", class: "link workflow-open", "data-testid": "workflow", "data-id": w.id, title: w.description, onclick: () => openWorkflow(w) }, w.name || w.id, w.unavailable ? " (unavailable)" : ""),
        ),
      ),
    );
    if (!wfs.length) els.workflowList.append(h("li", { class: "muted" }, "none"));
  } catch (err) {
    showError(err);
  }
}

/**
 * openWorkflow shows a workflow's inputs above the composer. Every field may
 * stay empty: the turn then asks for what is missing in its own form.
 */
function openWorkflow(w) {
  const fields = (w.inputs || []).map((i) => ({ name: i.path, type: i.type, description: i.description, enum: i.enum, required: false }));
  const inputs = fields.map((f, n) => {
    const id = `wf-${w.id}-${n}`;
    return { f, id, el: fieldInput(f, id) };
  });
  const form = els.workflowForm;
  form.replaceChildren(
    h("h3", {}, w.name || w.id),
    w.description ? h("p", { class: "muted" }, w.description) : null,
    w.steps && w.steps.length
      ? h("p", { class: "muted", "data-testid": "workflow-steps" }, "Runs: ", w.steps.map((st) => st.name || st.skill).join(" → "), w.requires_approval ? " — asks for your approval first." : "")
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
      const cid = state.cid || (await newConversation());
      // Files attached for the next message go with the workflow.
      const names = state.pendingFiles.map((f) => f.name);
      const res = await api.startWorkflow(cid, w.id, values, state.pendingFiles.map((f) => f.artifact_id));
      form.hidden = true;
      state.pendingFiles = [];
      renderAttachments();
      followTurn(res, `Run the workflow ${w.id}`, names);
    } catch (err) {
      showError(err);
    }
  };
  form.hidden = false;
  inputs[0]?.el.focus();
}

// ---- turns -----------------------------------------------------------------


/**
 * pollTurn follows a turn until it ends: every pollIntervalMs while it runs,
 * and while it waits for the user every waitPollIntervalMs (and just after
 * its expires_at), because a pause can expire or be answered elsewhere.
 * Called for a turn it already follows, it polls at once and ignores an
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
          await nap(view, seconds * 1000);
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
      if (turn.status !== was) scrollDown();
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
      await nap(view, config.pollIntervalMs || 500);
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

/** nap sleeps ms, or less when the turn's poller is woken (view.wake). */
function nap(view, ms) {
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      view.wake = () => {};
      resolve();
    };
    const timer = setTimeout(done, ms);
    view.wake = done;
  });
}

/** loadNotes shows the text a paused turn stored with its form or plan (history kinds followup_questions / plan). */
async function loadNotes(view, cid, gen) {
  try {
    const conv = await api.getConversation(cid);
    if (gen !== state.gen) return;
    for (const e of conv.history || []) {
      if (e.turn_id === view.id && (e.kind === "followup_questions" || e.kind === "plan") && e.content) view.addNote(e.content);
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
    this.interactionKey = "";
    this.notesKey = "";
    this.notes = new Set();
    this.artifactEls = new Map();

    this.statusEl = h("span", { class: "status-badge", "data-testid": "turn-status" }, "");
    this.llmEl = h("span", { class: "llm-calls", "data-testid": "llm-calls" }, "");
    this.stepsEl = h("ol", { class: "steps", "data-testid": "steps", "aria-label": "Steps" });
    this.notesEl = h("div", { class: "notes" });
    this.interactionEl = h("div", { class: "interaction" });
    this.artifactsEl = h("div", { class: "artifacts", "data-testid": "artifacts" });
    this.replyEl = h("div", { class: "reply-slot" });
    this.el = h(
      "article",
      { class: "turn", "data-testid": "turn", "data-turn-id": id },
      text ? h("div", { class: "bubble user", "data-testid": "user-message" }, text) : null,
      fileNames && fileNames.length ? h("div", { class: "bubble-files" }, fileNames.map((n) => `📎 ${n}`).join("  ")) : null,
      h(
        "section",
        { class: "turn-panel", "aria-label": "Turn progress" },
        h("div", { class: "turn-head" }, this.statusEl, this.llmEl),
        this.stepsEl,
      ),
      this.notesEl,
      this.interactionEl,
      this.artifactsEl,
      this.replyEl,
    );
  }

  addNote(text) {
    if (this.notes.has(text)) return;
    this.notes.add(text);
    this.notesEl.append(h("div", { class: "bubble assistant note", "data-testid": "note" }, text));
  }

  update(turn) {
    this.status = turn.status;
    this.el.dataset.status = turn.status;
    this.statusEl.dataset.status = turn.status;
    this.statusEl.textContent = statusLabel(turn.status);
    this.statusEl.classList.toggle("spinning", turn.status === "running");
    if (typeof turn.llm_calls === "number") this.llmEl.textContent = `LLM calls: ${turn.llm_calls}`;
    if (turn.steps) this.renderSteps(turn.steps);
    this.renderInteraction(turn);
    for (const a of turn.artifacts || []) this.addArtifact(a);
    this.renderReply(turn);
  }

  renderSteps(steps) {
    this.stepsEl.replaceChildren(
      ...steps.map((s) => {
        const label = s.tool === "llm" ? "LLM call" : s.tool;
        const dur = s.started_at && s.ended_at && !s.ended_at.startsWith("0001") ? duration(s.started_at, s.ended_at) : "";
        return h(
          "li",
          { class: `step step-${s.status}`, "data-testid": "step", "data-tool": s.tool, "data-status": s.status },
          h("span", { class: "step-icon", "aria-hidden": "true" }, STEP_ICONS[s.status] || "•"),
          h("span", { class: "step-tool" }, label),
          h("span", { class: "step-status" }, s.status.replace("_", " ")),
          dur ? h("span", { class: "step-time" }, dur) : null,
        );
      }),
    );
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
      await this.submitInput({ answers }, submit, errorEl);
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
      return this.submitInput(body, btn, errorEl);
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

  async submitInput(body, button, errorEl) {
    const buttons = this.interactionEl.querySelectorAll("button");
    buttons.forEach((b) => (b.disabled = true));
    errorEl.hidden = true;
    try {
      const turn = await api.sendInput(state.cid, this.id, body);
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
        a.description ? h("span", { class: "artifact-desc" }, ` — ${a.description}`) : null,
        " ",
        link,
      ),
    );
    this.artifactEls.set(a.artifact_id, fig);
    this.artifactsEl.append(fig);
    artifactURL(cid, a).then(
      (url) => {
        if (img) img.src = url;
        link.href = url;
        link.removeAttribute("aria-disabled");
      },
      (err) => {
        fig.append(h("p", { class: "inline-error", role: "alert" }, `Could not load ${a.name}: ${err.message}`));
      },
    );
  }

  renderReply(turn) {
    let el = null;
    if (turn.status === "succeeded") {
      el = h("div", { class: "bubble assistant", "data-testid": "reply" }, turn.reply || "");
    } else if (turn.status === "failed") {
      el = h("div", { class: "bubble error failed", "data-testid": "turn-error", role: "alert" }, h("strong", {}, "The turn failed. "), turn.reply || "");
    } else if (turn.status === "expired") {
      el = h("div", { class: "bubble error expired", "data-testid": "turn-error", role: "alert" }, h("strong", {}, "This turn expired. "), turn.reply || "Nobody answered in time.");
    } else if (turn.status === "superseded") {
      el = h("div", { class: "bubble error superseded", "data-testid": "turn-error" }, h("strong", {}, "Superseded. "), turn.reply || "A newer message replaced this turn; its waiting calls were not executed.");
    }
    if (el) this.replyEl.replaceChildren(el);
    else this.replyEl.replaceChildren();
  }
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

/** artifactURL fetches an artifact once (with the token) and returns a blob: URL for it. */
function artifactURL(cid, a) {
  const key = `${cid}/${a.artifact_id}`;
  if (!state.blobs.has(key)) {
    const p = api.artifactBlob(cid, a.artifact_id, a.mime_type).then((b) => URL.createObjectURL(b));
    p.catch(() => state.blobs.delete(key));
    state.blobs.set(key, p);
  }
  return state.blobs.get(key);
}

function statusLabel(s) {
  return STATUS_LABELS[s] || s;
}

function duration(a, b) {
  const ms = Date.parse(b) - Date.parse(a);
  if (!Number.isFinite(ms) || ms < 0) return "";
  return ms < 1000 ? `${ms} ms` : `${(ms / 1000).toFixed(1)} s`;
}

function formatTime(t) {
  if (!t) return "";
  const d = new Date(t);
  if (Number.isNaN(d.getTime())) return "";
  return d.toLocaleString([], { month: "short", day: "numeric", hour: "2-digit", minute: "2-digit" });
}

function scrollDown() {
  els.messages.scrollTop = els.messages.scrollHeight;
}

// ---- start -----------------------------------------------------------------

$("new-conversation").addEventListener("click", () => newConversation().catch(showError));

async function start() {
  if (!state.token) {
    askToken();
    return;
  }
  els.tokenPanel.hidden = true;
  els.app.hidden = false;
  await refreshConversations();
  loadWorkflows();
  els.composer.focus();
}

start();
