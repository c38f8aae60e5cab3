// An outside A2A client on the official JS SDK (@a2a-js/sdk 0.3.x), used
// by pkg/a2aserver's interop test to call clientagent's own A2A endpoint
// the way another agent would: card discovery, message/send,
// message/stream, answers on the same task, tasks/get and tasks/cancel.
//
// Usage: A2A_BASE=<base url of the agent> A2A_TOKEN=<bearer> node client.mjs
// It prints one JSON object with what it saw and exits 0, or prints the
// failing step and exits 1.
import { ClientFactory, ClientFactoryOptions, DefaultAgentCardResolver, JsonRpcTransportFactory } from '@a2a-js/sdk/client';

const base = process.env.A2A_BASE;
const token = process.env.A2A_TOKEN;

// authFetch sends the bearer token with every request, as the card asks.
const authFetch = (url, init = {}) => {
  const headers = new Headers(init.headers || {});
  headers.set('Authorization', `Bearer ${token}`);
  return fetch(url, { ...init, headers });
};

const out = {};
let step = 'start';

function fail(msg) {
  throw new Error(`${step}: ${msg}`);
}

function dataPart(msg) {
  return (msg?.parts || []).find((p) => p.kind === 'data')?.data;
}

function message(parts, extra = {}) {
  return { message: { kind: 'message', role: 'user', messageId: crypto.randomUUID(), parts, ...extra } };
}

async function download(part) {
  const res = await fetch(part.file.uri); // the link needs no credentials
  if (!res.ok) fail(`download ${part.file.uri}: HTTP ${res.status}`);
  const bytes = new Uint8Array(await res.arrayBuffer());
  const viaAPI = await authFetch(part.metadata.url); // the stable URL, with the token
  if (!viaAPI.ok) fail(`download ${part.metadata.url}: HTTP ${viaAPI.status}`);
  return { name: part.file.name, mimeType: part.file.mimeType, size: bytes.length,
    png: bytes[0] === 0x89 && bytes[1] === 0x50 && bytes[2] === 0x4e && bytes[3] === 0x47,
    apiSize: (await viaAPI.arrayBuffer()).byteLength };
}

async function main() {
  step = 'card';
  const resolver = new DefaultAgentCardResolver({ fetchImpl: authFetch });
  const card = await resolver.resolve(base);
  out.card = { name: card.name, url: card.url, streaming: card.capabilities?.streaming, skills: card.skills.map((s) => s.id) };
  const factory = new ClientFactory(ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
    transports: [new JsonRpcTransportFactory({ fetchImpl: authFetch })],
    cardResolver: resolver,
  }));
  const client = await factory.createFromAgentCard(card);

  step = 'popelnase';
  let task = await client.sendMessage(message([{ kind: 'text', text: 'Create a PNG image with the word Popelnase' }]));
  if (task.kind !== 'task') fail(`got ${task.kind}, want a task`);
  const files = [];
  for (const a of task.artifacts || []) {
    for (const p of a.parts) if (p.kind === 'file') files.push(await download(p));
  }
  out.popelnase = { state: task.status.state, reply: task.status.message?.parts?.[0]?.text, files, contextId: task.contextId, taskId: task.id };

  step = 'tasks/get';
  const got = await client.getTask({ id: task.id });
  out.get = { state: got.status.state, artifacts: (got.artifacts || []).length };

  step = 'tasks/cancel of a completed task';
  try {
    await client.cancelTask({ id: task.id });
    out.cancelCompleted = 'no error';
  } catch (e) {
    out.cancelCompleted = String(e.message || e);
  }

  step = 'flange (stream)';
  const states = [];
  let last;
  for await (const ev of client.sendMessageStream(message([{ kind: 'text', text: 'Design a valve flange with 6 holes and 120 mm outer diameter' }]))) {
    if (ev.kind === 'task') { states.push(ev.status.state); last = ev; }
    if (ev.kind === 'status-update') { states.push(ev.status.state); last = { ...last, status: ev.status }; }
  }
  const form = dataPart(last.status.message);
  out.flange = { states, state: last.status.state, kind: form?.kind, fields: form?.fields, text: last.status.message?.parts?.[0]?.text };
  step = 'flange answer';
  const material = form.fields.find((f) => f.name === 'material');
  task = await client.sendMessage(message([{ kind: 'data', data: { material: material.enum.includes('brass') ? 'brass' : material.enum[0] } }],
    { taskId: last.id, contextId: last.contextId }));
  out.flangeAnswered = { state: task.status.state, sameTask: task.id === last.id, reply: task.status.message?.parts?.[0]?.text,
    files: (task.artifacts || []).map((a) => a.parts[0].file?.mimeType) };

  step = 'publish_word';
  task = await client.sendMessage(message([{ kind: 'data', data: { workflow: { id: 'publish_word', inputs: { word: 'Interop', channel: 'web' } } } }]));
  const approval = dataPart(task.status.message);
  out.publish = { state: task.status.state, kind: approval?.kind, approval: approval?.approval, text: task.status.message?.parts?.[0]?.text };
  step = 'publish_word answer';
  task = await client.sendMessage(message([{ kind: 'text', text: 'yes' }], { taskId: task.id, contextId: task.contextId }));
  out.publishAnswered = { state: task.status.state, reply: task.status.message?.parts?.[0]?.text };

  step = 'no token';
  try {
    const res = await fetch(card.url, { method: 'POST', headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tasks/get', params: { id: task.id } }) });
    out.noToken = res.status;
  } catch (e) {
    out.noToken = String(e);
  }
}

try {
  await main();
  console.log(JSON.stringify(out));
} catch (e) {
  console.error(e?.stack || String(e));
  console.log(JSON.stringify({ ...out, error: String(e.message || e) }));
  process.exit(1);
}
