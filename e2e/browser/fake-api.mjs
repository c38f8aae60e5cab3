// fake-api.mjs: a small scripted stand-in for the clientagent HTTP API
// (docs/api/openapi.yaml) that serves ../../web as well, for working on the
// page without the local stack. It is NOT the product: the real checks run
// against pkg/devstack (e2e/browser_test.go).
//
//   node e2e/browser/fake-api.mjs            # prints CLIENTAGENT_URL=… and CLIENTAGENT_TOKEN=…
//   PORT=8090 node e2e/browser/fake-api.mjs
//
// Scripted prompts: "…Popelnase…" (svg → png → answer), "…SVG…Hello…"
// (svg → answer), "Publish it to <channel>" (approval), "…form…" (ask_user
// form; count < 1 is rejected with 400), "…fail…" (a failed turn).
//
// Approvals follow docs/api/openapi.yaml: the view carries approval.id (a hash of the calls
// shown), an answer without it is 400 missing_approval_id, one with another
// id is 409 stale_approval, and approval.arguments edits are checked like a
// model's call: publish_artifact's channel must be web, print or archive and
// its artifact_id an artifact of the conversation (else 400
// invalid_arguments), edits with "reject" or for a call not in the approval
// are 400 invalid_edit. GET /_fake/last-input returns the last input body
// the fake accepted or refused, so a check can see what the page sent.
//
// Artifacts download like on AWS: GET …/artifacts/{aid} answers 302 to a
// signed link, ?redirect=false answers {url, expires_at}, and the link
// (/_fake/files/…) refuses a request that carries an Authorization header
// (as S3 refuses a presigned URL sent with another auth mechanism).
// GET /_fake/requests lists the artifact and link requests seen.
//
// Outages: POST /_fake/outage {"count", "retry_after", "code"} makes the
// next count turn reads answer 503 {code} with Retry-After; GET
// /_fake/turn-reads lists every turn read ({at, status}).
//
// Live turns (docs/api/openapi.yaml): GET …/events streams the conversation's events as
// Server-Sent Events (turn.started, step.started/ended, llm.delta — the
// final answer in chunks of FAKE_CHUNK chars every FAKE_CHUNK_MS ms —,
// form, approval, artifact, turn.ended), resumes after Last-Event-ID, and
// ends after FAKE_STREAM_MS; FAKE_EVENTS=0 answers it 404 (a server
// without the stream: the page polls). POST …/turns/{tid}/cancel stops a
// turn (409 once it has ended), PATCH /v1/conversations/{cid} {"title"}
// renames. A prompt with "blocked" ends blocked by the (fake) policy.
//
// Usage (issue 16): every LLM call costs FAKE_LLM_TOKENS tokens (of them
// three quarters from the prompt cache) at $0.0004; the Turn carries tokens,
// cached_tokens and cost_usd, and its steps their timing, usage (LLM calls)
// and arguments and result (tool calls), like the API.
import http from "node:http";
import fs from "node:fs";
import path from "node:path";
import zlib from "node:zlib";
import crypto from "node:crypto";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const webDir = path.resolve(here, "../../web");
const TOKEN = process.env.FAKE_TOKEN || "fake-token";
const STEP_MS = Number(process.env.FAKE_STEP_MS || 400);
const CHUNK = Number(process.env.FAKE_CHUNK || 6);
const CHUNK_MS = Number(process.env.FAKE_CHUNK_MS || 40);
const STREAM_MS = Number(process.env.FAKE_STREAM_MS || 120000);
const EVENTS = process.env.FAKE_EVENTS !== "0";
const LLM_TOKENS = Number(process.env.FAKE_LLM_TOKENS || 1400);
const LLM_COST = 0.0004;
const FINAL = new Set(["succeeded", "failed", "expired", "superseded", "cancelled", "blocked"]);

const convs = new Map(); // cid → {id, title, updated_at, history, turns: Map, artifacts: Map, events: [], subscribers: Set}
let eventSeq = 0;
let lastInput = null; // the last POST …/input body, for GET /_fake/last-input
const requests = []; // artifact downloads and link fetches: {path, authorization}
const turnReads = []; // every GET of a turn: {at, status}
let outage = { count: 0, retry_after: 1, code: "store_unavailable" };
const FILE_SECRET = crypto.randomBytes(8).toString("hex");
const linkSig = (cid, aid) => crypto.createHmac("sha256", FILE_SECRET).update(`${cid}/${aid}`).digest("hex").slice(0, 32);
const CHANNELS = ["web", "print", "archive"];
const now = () => new Date().toISOString();
const id = (p) => `${p}_${crypto.randomBytes(4).toString("hex")}`;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function send(res, status, body, headers = {}) {
  if (status === 204) {
    res.writeHead(204, headers);
    return res.end();
  }
  res.writeHead(status, { "Content-Type": "application/json", ...headers });
  res.end(JSON.stringify(body));
}
const fail = (res, status, code, message) => send(res, status, { error: { code, message } });

async function readBody(req) {
  const chunks = [];
  for await (const c of req) chunks.push(c);
  return Buffer.concat(chunks);
}

/** approvalID names exactly the calls and arguments shown (like the server's, opaque to clients). */
function approvalID(calls) {
  return "ap_" + crypto.createHash("sha256").update(JSON.stringify(calls)).digest("hex").slice(0, 16);
}

/** checkPublish validates publish_artifact arguments like the skill's schema; it returns the reason or "". */
function checkPublish(conv, args) {
  if (!args || typeof args !== "object" || Array.isArray(args)) return "arguments must be an object";
  for (const k of Object.keys(args)) if (k !== "artifact_id" && k !== "channel") return `unknown property ${k}`;
  if (typeof args.artifact_id !== "string" || !conv.artifacts.has(args.artifact_id)) return `artifact_id: no artifact ${JSON.stringify(args.artifact_id)} in this conversation`;
  if (!CHANNELS.includes(args.channel)) return `channel: ${JSON.stringify(args.channel)} is not one of ${CHANNELS.join(", ")}`;
  return "";
}

/** emit appends one event of turn t to its conversation's log and pushes it to the open streams. */
function emit(conv, t, type, fields = {}) {
  const ev = { id: `${Date.now()}-${eventSeq++}`, data: { type, turn_id: t.turn_id, at: now(), ...fields } };
  conv.events.push(ev);
  for (const res of conv.subscribers) writeEvent(res, ev);
}

function writeEvent(res, ev) {
  res.write(`id: ${ev.id}\nevent: ${ev.data.type}\ndata: ${JSON.stringify(ev.data)}\n\n`);
}

/** serveEvents streams a conversation's events (docs/api/openapi.yaml GET …/events). */
function serveEvents(req, res, url, conv) {
  if (!EVENTS) return fail(res, 404, "not_found", "no such route");
  const last = req.headers["last-event-id"] || url.searchParams.get("last_event_id") || "";
  const turn = url.searchParams.get("turn") || "";
  res.writeHead(200, { "Content-Type": "text/event-stream", "Cache-Control": "no-store", Connection: "keep-alive" });
  const open = new Set([...conv.turns.values()].filter((t) => !FINAL.has(t.status)).map((t) => t.turn_id));
  let from = 0;
  if (last) {
    const i = conv.events.findIndex((e) => e.id === last);
    from = i < 0 ? conv.events.length : i + 1;
  }
  for (const ev of conv.events.slice(from)) {
    if (turn && ev.data.turn_id !== turn) continue;
    if (!last && !open.has(ev.data.turn_id)) continue;
    writeEvent(res, ev);
  }
  const sub = turn ? { write: (x) => (x.includes(`"turn_id":"${turn}"`) ? res.write(x) : true) } : res;
  conv.subscribers.add(sub);
  const heartbeat = setInterval(() => res.write(": heartbeat\n\n"), 15000);
  const end = setTimeout(() => res.end(), STREAM_MS);
  res.on("close", () => {
    clearInterval(heartbeat);
    clearTimeout(end);
    conv.subscribers.delete(sub);
  });
}

function publicTurn(t) {
  const out = {
    turn_id: t.turn_id,
    status: t.status,
    text: t.text,
    started_at: t.started_at,
    ended_at: t.ended_at,
    steps: t.steps,
    artifacts: t.artifacts,
    llm_calls: t.llm_calls,
    tokens: t.tokens,
    cached_tokens: t.cached_tokens,
    cost_usd: t.cost_usd,
  };
  if (t.reply) out.reply = t.reply;
  if (t.status === "awaiting_input") out.form = t.form;
  if (t.status === "awaiting_approval") out.approval = t.approval;
  return out;
}

// ---- the scripted "model" ---------------------------------------------------

/** Stopped is thrown into a turn's script when the turn was cancelled or superseded meanwhile. */
class Stopped extends Error {}

function checkStopped(t) {
  if (FINAL.has(t.status)) throw new Stopped(t.status);
}

/**
 * step runs one step: an LLM call, or a tool call with args whose work
 * returns {status?, summary?, artifacts?, error?}, the compact result the
 * model reads back (the step's result).
 */
async function step(conv, t, tool, work, args) {
  checkStopped(t);
  const llm = tool === "llm";
  const s = { tool, call_id: llm ? undefined : id("call"), status: "running", started_at: now() };
  if (!llm) s.arguments = args || {};
  t.steps.push(s);
  if (llm) t.llm_calls++;
  emit(conv, t, "step.started", llm ? { tool, llm_call: t.llm_calls } : { tool, call_id: s.call_id });
  await sleep(STEP_MS);
  checkStopped(t);
  const result = (work && (await work(s))) || {};
  const status = result.status || "succeeded";
  if (!llm) s.result = { status, ...result };
  endStep(conv, t, s, status);
  return s;
}

function endStep(conv, t, s, status) {
  s.status = status;
  s.ended_at = now();
  s.duration_ms = Date.parse(s.ended_at) - Date.parse(s.started_at);
  const usage = {};
  if (s.tool === "llm" && status === "succeeded") {
    Object.assign(s, { tokens: LLM_TOKENS, cached_tokens: Math.floor((LLM_TOKENS * 3) / 4), cost_usd: LLM_COST });
    t.tokens += s.tokens;
    t.cached_tokens += s.cached_tokens;
    t.cost_usd = Math.round((t.cost_usd + s.cost_usd) * 1e6) / 1e6;
    Object.assign(usage, { tokens: s.tokens, cached_tokens: s.cached_tokens });
  }
  conv.updated_at = now();
  emit(conv, t, "step.ended", { tool: s.tool, call_id: s.call_id, status, started_at: s.started_at, ended_at: s.ended_at, duration_ms: s.duration_ms, ...usage });
}

/** usage is a turn's spend, as turn.ended carries it. */
const usage = (t) => ({ llm_calls: t.llm_calls, tokens: t.tokens, cached_tokens: t.cached_tokens, cost_usd: t.cost_usd });

/** answer is the turn's last LLM call: it streams reply in chunks (llm.delta), then the turn succeeds. */
async function answer(conv, t, reply) {
  checkStopped(t);
  const s = { tool: "llm", status: "running", started_at: now() };
  t.steps.push(s);
  t.llm_calls++;
  emit(conv, t, "step.started", { tool: "llm", llm_call: t.llm_calls });
  for (let off = 0; off < reply.length; off += CHUNK) {
    await sleep(CHUNK_MS);
    checkStopped(t);
    emit(conv, t, "llm.delta", { text: reply.slice(off, off + CHUNK), offset: off, llm_call: t.llm_calls });
  }
  endStep(conv, t, s, "succeeded");
  return finish(conv, t, "succeeded", reply);
}

function addArtifact(conv, t, name, mime, bytes, description, callId) {
  const a = { artifact_id: id("art"), name, mime_type: mime, description };
  conv.artifacts.set(a.artifact_id, { ...a, bytes });
  if (t) {
    t.artifacts.push(a);
    emit(conv, t, "artifact", { artifact: a });
    conv.history.push({ role: "tool", kind: "tool_result", tool: "x", call_id: callId, status: "succeeded", artifacts: [a], at: now(), turn_id: t.turn_id });
  }
  return a;
}

function svgOf(word) {
  return Buffer.from(
    `<svg xmlns="http://www.w3.org/2000/svg" width="320" height="100" viewBox="0 0 320 100">` +
      `<rect width="320" height="100" fill="#fff8e1"/><text x="160" y="62" font-size="36" text-anchor="middle" font-family="sans-serif" fill="#2457c5">${word.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;")}</text></svg>`,
  );
}

function finish(conv, t, status, reply) {
  checkStopped(t);
  t.status = status;
  t.reply = reply;
  t.ended_at = now();
  conv.updated_at = now();
  conv.history.push({ role: "assistant", kind: "message", content: reply, at: now(), turn_id: t.turn_id });
  emit(conv, t, "turn.ended", { status, reply, ...usage(t) });
}

function waitFor(t) {
  return new Promise((resolve) => (t.resume = resolve));
}

async function runTurn(conv, t) {
  const text = t.text;
  try {
    await step(conv, t, "llm");
    if (/popelnase/i.test(text)) {
      let svg;
      await step(
        conv,
        t,
        "create_svg_artifact",
        (s) => {
          svg = addArtifact(conv, t, "popelnase.svg", "image/svg+xml", svgOf("Popelnase"), "SVG with the word Popelnase", s.call_id);
          return { summary: `Created ${svg.name}.`, artifacts: [svg] };
        },
        { text: "Popelnase", width: 320, height: 100 },
      );
      await step(conv, t, "llm");
      await step(
        conv,
        t,
        "convert_svg_to_png",
        (s) => {
          const png = addArtifact(conv, t, "popelnase.png", "image/png", pngBytes(320, 100), `PNG of ${svg.artifact_id}`, s.call_id);
          return { summary: `Converted ${svg.name} to ${png.name}.`, artifacts: [png] };
        },
        { artifact_id: svg.artifact_id },
      );
      const png = t.artifacts[t.artifacts.length - 1];
      return await answer(conv, t, `Here is the **PNG** image with the word Popelnase: ${png.name} (artifact_id ${png.artifact_id}).`);
    }
    if (/svg/i.test(text)) {
      const word = (text.match(/word "([^"]+)"/i) || text.match(/word (\w+)/i) || [, "Hello"])[1];
      let svg;
      await step(
        conv,
        t,
        "create_svg_artifact",
        (s) => {
          const file = word.toLowerCase().replace(/[^a-z0-9]+/g, "-").replace(/^-|-$/g, "") || "word";
          svg = addArtifact(conv, t, `${file}.svg`, "image/svg+xml", svgOf(word), `SVG with the word ${word}`, s.call_id);
          return { summary: `Created ${svg.name}.`, artifacts: [svg] };
        },
        { text: word },
      );
      return await answer(conv, t, `Here is the SVG with the word ${word}. Artifact: ${svg.name} (artifact_id ${svg.artifact_id}).`);
    }
    if (/publish/i.test(text)) {
      const last = [...conv.artifacts.values()].pop();
      if (!last) return finish(conv, t, "succeeded", "There is nothing to publish yet.");
      const channel = (text.match(/\b(?:to|on)\s+(?:the\s+)?(\w+)/i) || [, "web"])[1].toLowerCase();
      const callId = id("call");
      const calls = [{ call_id: callId, tool: "publish_artifact", arguments: { artifact_id: last.artifact_id, channel } }];
      t.approval = { id: approvalID(calls), calls };
      t.status = "awaiting_approval";
      emit(conv, t, "approval", { approval: t.approval });
      conv.history.push({ role: "assistant", kind: "plan", content: `I will publish ${last.name} to ${channel}.`, at: now(), turn_id: t.turn_id });
      const input = await waitFor(t);
      t.status = "running";
      if (input.approval.decision !== "approve") {
        t.steps.push({ tool: "publish_artifact", call_id: callId, status: "rejected", started_at: now(), ended_at: now(), duration_ms: 0, arguments: calls[0].arguments });
        const why = input.approval.note ? ` (${input.approval.note})` : "";
        return await answer(conv, t, `Not published: publishing ${last.name} to ${channel} was rejected${why}.`);
      }
      // An edit replaces the call's arguments: what runs is what the user approved.
      const args = (input.approval.arguments && input.approval.arguments[callId]) || calls[0].arguments;
      const art = conv.artifacts.get(args.artifact_id);
      await step(conv, t, "publish_artifact", () => ({ summary: `Published ${art.name} to ${args.channel}.` }), args);
      return await answer(conv, t, `Published ${art.name} to ${args.channel} at https://example.invalid/p/${art.artifact_id}.`);
    }
    if (/form/i.test(text)) {
      const callId = id("call");
      t.form = {
        calls: [
          {
            call_id: callId,
            tool: "ask_user",
            fields: [
              { name: "word", type: "string", description: "The word to draw", required: true },
              { name: "color", type: "string", description: "Text colour", required: false, enum: ["red", "blue"] },
              { name: "count", type: "integer", description: "How many copies (at least 1)", required: true },
              { name: "transparent", type: "boolean", description: "Transparent background", required: false },
            ],
          },
        ],
      };
      t.status = "awaiting_input";
      emit(conv, t, "form", { form: t.form, expires_at: new Date(Date.now() + 86400000).toISOString() });
      conv.history.push({ role: "assistant", kind: "followup_questions", content: "I need a few details.", at: now(), turn_id: t.turn_id });
      const input = await waitFor(t);
      t.status = "running";
      t.steps.push({ tool: "ask_user", call_id: callId, status: "answered", started_at: now(), ended_at: now() });
      return await answer(conv, t, `Thanks: ${JSON.stringify(input.answers[callId])}`);
    }
    if (/fail/i.test(text)) {
      await step(conv, t, "broken_tool", () => ({ status: "failed", error: "the specialist is unreachable" }), {});
      return finish(conv, t, "failed", "The specialist broken_tool is unreachable.");
    }
    if (/blocked/i.test(text)) return finish(conv, t, "blocked", "The policy guardian blocked this request: it asks for something the policy does not allow.");
    if (/what can you do/i.test(text)) {
      return await answer(conv, t, "This is the **fake** API. I follow a few scripted prompts:\n- a PNG with the word Popelnase\n- an SVG with the word Hello\n- Publish it to web (after your approval)\n- a form\n- a failing turn\n\nAnything else I repeat.");
    }
    return await answer(conv, t, `You said: ${text}`);
  } catch (err) {
    if (err instanceof Stopped) return;
    t.status = "failed";
    t.reply = String(err);
    emit(conv, t, "turn.ended", { status: "failed", reply: t.reply, ...usage(t) });
  }
}

// ---- routes -----------------------------------------------------------------

async function api(req, res, url) {
  if (req.headers.authorization !== `Bearer ${TOKEN}`) return fail(res, 401, "unauthorized", "missing or invalid token");
  const parts = url.pathname.split("/").filter(Boolean).map(decodeURIComponent); // v1 conversations cid …
  const m = req.method;
  if (parts[1] === "catalog" && m === "GET") {
    // One workflow, so the page's Workflows list has something to show.
    return send(res, 200, {
      skills: [],
      workflows: [{ id: "word_to_png", name: "Word to PNG", description: "Render a word as an SVG image and convert it to a PNG.",
        inputs: [{ path: "word", type: "string", description: "The word to render." }],
        steps: [{ name: "Draw the word", skill: "create_svg_artifact" }, { name: "Convert to PNG", skill: "convert_svg_to_png" }] }],
    });
  }
  if (parts.length === 2 && m === "POST") {
    const body = JSON.parse((await readBody(req)).toString() || "{}");
    const c = { id: id("conv"), title: String(body.title || ""), updated_at: now(), history: [], turns: new Map(), artifacts: new Map(), events: [], subscribers: new Set() };
    convs.set(c.id, c);
    return send(res, 201, { conversation_id: c.id });
  }
  if (parts.length === 2 && m === "GET") {
    const list = [...convs.values()]
      .sort((a, b) => b.updated_at.localeCompare(a.updated_at))
      .map((c) => {
        const last = [...c.turns.values()].pop();
        return { conversation_id: c.id, title: c.title, updated_at: c.updated_at, status: last ? last.status : "" };
      });
    return send(res, 200, { conversations: list });
  }
  const conv = convs.get(parts[2]);
  if (!conv) return fail(res, 404, "not_found", "conversation not found");
  if (parts.length === 3 && m === "GET") {
    return send(res, 200, {
      conversation_id: conv.id,
      history: conv.history,
      artifacts: [...conv.artifacts.values()].map(({ bytes, ...a }) => a),
      turns: [...conv.turns.values()].map(publicTurn),
    });
  }
  if (parts.length === 3 && m === "PATCH") {
    const body = JSON.parse((await readBody(req)).toString() || "{}");
    const title = typeof body.title === "string" ? body.title.trim() : "";
    if (!title) return fail(res, 400, "invalid_title", "title must be a non-empty string");
    conv.title = title.slice(0, 200);
    conv.updated_at = now();
    const last = [...conv.turns.values()].pop();
    return send(res, 200, { conversation_id: conv.id, title: conv.title, updated_at: conv.updated_at, status: last ? last.status : "" });
  }
  if (parts[3] === "events" && parts.length === 4 && m === "GET") return serveEvents(req, res, url, conv);
  if (parts.length === 3 && m === "DELETE") {
    convs.delete(conv.id);
    return send(res, 204);
  }
  if (parts[3] === "artifacts" && parts.length === 4 && m === "POST") {
    const name = url.searchParams.get("name");
    if (!name) return fail(res, 400, "bad_request", "name is required");
    const body = await readBody(req);
    if (body.length > 5 << 20) return fail(res, 413, "too_large", "upload over 5 MiB");
    const a = addArtifact(conv, null, name, req.headers["content-type"] || "application/octet-stream", body, "upload");
    return send(res, 201, a);
  }
  if (parts[3] === "artifacts" && parts.length === 5 && m === "GET") {
    requests.push({ path: url.pathname + url.search, authorization: !!req.headers.authorization });
    const a = conv.artifacts.get(parts[4]);
    if (!a) return fail(res, 404, "not_found", "artifact not found");
    const redirect = url.searchParams.get("redirect");
    if (redirect !== null && redirect !== "true" && redirect !== "false") return fail(res, 400, "invalid_query", 'redirect must be "true" or "false"');
    const link = `http://${req.headers.host}/_fake/files/${enc(conv.id)}/${enc(a.artifact_id)}?sig=${linkSig(conv.id, a.artifact_id)}`;
    if (redirect === "false") {
      return send(res, 200, { url: link, expires_at: new Date(Date.now() + 5 * 60000).toISOString() }, { "Cache-Control": "no-store" });
    }
    res.writeHead(302, { Location: link });
    return res.end();
  }
  if (parts[3] === "messages" && m === "POST") {
    const body = JSON.parse((await readBody(req)).toString() || "{}");
    if (!body.text) return fail(res, 400, "bad_request", "text is required");
    // A newer message supersedes a turn that waits for input.
    for (const t of conv.turns.values()) {
      if (t.status === "awaiting_input" || t.status === "awaiting_approval") {
        t.status = "superseded";
        t.reply = "A newer message replaced this turn.";
        t.resume = null;
        emit(conv, t, "turn.ended", { status: t.status, reply: t.reply, ...usage(t) });
      }
    }
    const t = { turn_id: id("turn"), text: body.text, status: "running", started_at: now(), steps: [], artifacts: [], llm_calls: 0, tokens: 0, cached_tokens: 0, cost_usd: 0 };
    conv.turns.set(t.turn_id, t);
    emit(conv, t, "turn.started", { text: body.text });
    conv.history.push({ role: "user", kind: "message", content: body.text, at: now(), turn_id: t.turn_id });
    if (!conv.title) conv.title = body.text.slice(0, 60);
    conv.updated_at = now();
    runTurn(conv, t);
    return send(res, 202, { turn_id: t.turn_id, status: t.status });
  }
  if (parts[3] === "turns" && parts.length >= 5) {
    const t = conv.turns.get(parts[4]);
    if (!t) return fail(res, 404, "not_found", "turn not found");
    if (parts.length === 5 && m === "GET") {
      if (outage.count > 0) {
        outage.count--;
        turnReads.push({ at: Date.now(), status: 503 });
        return send(res, 503, { error: { code: outage.code, message: "the store did not answer" } }, { "Retry-After": String(outage.retry_after) });
      }
      turnReads.push({ at: Date.now(), status: 200 });
      return send(res, 200, publicTurn(t));
    }
    if (parts[5] === "cancel" && m === "POST") {
      if (FINAL.has(t.status)) return fail(res, 409, "turn_ended", `the turn has already ended (${t.status})`);
      for (const st of t.steps) if (st.status === "running") endStep(conv, t, st, "not_executed");
      t.status = "cancelled";
      t.reply = "You stopped this turn; calls that had not run were not executed.";
      t.ended_at = now();
      t.resume = null;
      conv.updated_at = now();
      conv.history.push({ role: "assistant", kind: "message", content: t.reply, at: now(), turn_id: t.turn_id });
      emit(conv, t, "turn.ended", { status: t.status, reply: t.reply, ...usage(t) });
      return send(res, 202, publicTurn(t));
    }
    if (parts[5] === "input" && m === "POST") {
      const body = JSON.parse((await readBody(req)).toString() || "{}");
      lastInput = body;
      if (!body.answers === !body.approval) return fail(res, 400, "invalid_input", "send exactly one of answers or approval");
      for (const f of body.files || []) {
        if (!conv.artifacts.has(f)) return fail(res, 400, "unknown_file", `no artifact ${f} in this conversation`);
      }
      if (t.status === "awaiting_approval" && body.approval) {
        const ap = body.approval;
        if (!ap.id) return fail(res, 400, "missing_approval_id", "approval.id is required: send the id of the approval you answer");
        if (ap.decision !== "approve" && ap.decision !== "reject") return fail(res, 400, "invalid_decision", "decision must be approve or reject");
        if (ap.id !== t.approval.id) return fail(res, 409, "stale_approval", "the approval changed since it was shown; read the turn again");
        for (const [callId, args] of Object.entries(ap.arguments || {})) {
          const call = t.approval.calls.find((c) => c.call_id === callId);
          if (ap.decision !== "approve") return fail(res, 400, "invalid_edit", "arguments may only come with approve");
          if (!call) return fail(res, 400, "invalid_edit", `call ${callId} is not in the approval`);
          const why = checkPublish(conv, args);
          if (why) return fail(res, 400, "invalid_arguments", `${call.tool}: ${why}`);
        }
      } else if (t.status === "awaiting_input" && body.answers) {
        for (const call of t.form.calls) {
          const a = body.answers[call.call_id] || {};
          for (const f of call.fields) {
            if (f.required && a[f.name] === undefined) return fail(res, 400, "invalid_input", `${f.name} is required`);
          }
          if (typeof a.count !== "number" || a.count < 1) return fail(res, 400, "invalid_input", "count must be at least 1");
        }
      } else {
        return fail(res, 409, "not_waiting", `nothing waits for that input (turn is ${t.status})`);
      }
      const resume = t.resume;
      t.resume = null;
      t.status = "running";
      resume(body);
      return send(res, 202, publicTurn(t));
    }
  }
  return fail(res, 404, "not_found", "no such route");
}

/** serveLink serves a signed artifact link; like S3 with a presigned URL, it refuses a second auth mechanism. */
function serveLink(req, res, url) {
  requests.push({ path: url.pathname + url.search, authorization: !!req.headers.authorization });
  const [cid, aid] = url.pathname.split("/").slice(3).map(decodeURIComponent);
  if (req.headers.authorization) return fail(res, 400, "invalid_argument", "Only one auth mechanism allowed");
  if (url.searchParams.get("sig") !== linkSig(cid, aid)) return fail(res, 403, "forbidden", "bad signature");
  const a = convs.get(cid) && convs.get(cid).artifacts.get(aid);
  if (!a) return fail(res, 404, "not_found", "no such object");
  res.writeHead(200, { "Content-Type": a.mime_type, "Content-Length": a.bytes.length });
  return res.end(a.bytes);
}

const enc = encodeURIComponent;

const types = { ".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8" };

const server = http.createServer(async (req, res) => {
  const url = new URL(req.url, "http://x");
  try {
    if (url.pathname.startsWith("/v1/")) return await api(req, res, url);
    if (url.pathname === "/_fake/last-input" && req.method === "GET") return send(res, 200, { body: lastInput });
    if (url.pathname === "/_fake/requests" && req.method === "GET") return send(res, 200, { requests });
    if (url.pathname === "/_fake/turn-reads" && req.method === "GET") return send(res, 200, { reads: turnReads });
    if (url.pathname === "/_fake/outage" && req.method === "POST") {
      outage = { count: 0, retry_after: 1, code: "store_unavailable", ...JSON.parse((await readBody(req)).toString() || "{}") };
      return send(res, 200, outage);
    }
    if (url.pathname.startsWith("/_fake/files/") && req.method === "GET") return serveLink(req, res, url);
    const rel = url.pathname === "/" ? "index.html" : url.pathname.slice(1);
    const file = path.join(webDir, path.normalize(rel));
    if (!file.startsWith(webDir) || !fs.existsSync(file)) return fail(res, 404, "not_found", "no such file");
    res.writeHead(200, { "Content-Type": types[path.extname(file)] || "application/octet-stream", "Cache-Control": "no-cache" });
    res.end(fs.readFileSync(file));
  } catch (err) {
    fail(res, 500, "internal", "internal error");
    console.error(err);
  }
});

server.listen(Number(process.env.PORT || 0), "127.0.0.1", () => {
  const { port } = server.address();
  console.log(`CLIENTAGENT_URL=http://127.0.0.1:${port}`);
  console.log(`CLIENTAGENT_TOKEN=${TOKEN}`);
});

// ---- a tiny PNG encoder (stripes), so the fake needs no image library ------

function pngBytes(w, h) {
  const raw = Buffer.alloc((w * 3 + 1) * h);
  for (let y = 0; y < h; y++) {
    raw[y * (w * 3 + 1)] = 0;
    for (let x = 0; x < w; x++) {
      const o = y * (w * 3 + 1) + 1 + x * 3;
      const on = ((x >> 4) + (y >> 4)) % 2 === 0;
      raw[o] = on ? 0x24 : 0xff;
      raw[o + 1] = on ? 0x57 : 0xf8;
      raw[o + 2] = on ? 0xc5 : 0xe1;
    }
  }
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(w, 0);
  ihdr.writeUInt32BE(h, 4);
  ihdr[8] = 8; // bit depth
  ihdr[9] = 2; // RGB
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk("IHDR", ihdr),
    chunk("IDAT", zlib.deflateSync(raw)),
    chunk("IEND", Buffer.alloc(0)),
  ]);
}

function chunk(type, data) {
  const len = Buffer.alloc(4);
  len.writeUInt32BE(data.length);
  const td = Buffer.concat([Buffer.from(type, "ascii"), data]);
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(crc32(td));
  return Buffer.concat([len, td, crc]);
}

function crc32(buf) {
  let c = ~0;
  for (const b of buf) {
    c ^= b;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
  }
  return ~c >>> 0;
}
