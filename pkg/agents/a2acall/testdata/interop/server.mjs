// An independent A2A specialist built on the official JS SDK (@a2a-js/sdk
// 0.3.x), used by pkg/agents' interop test to check that our Go client
// (a2a-go) works with a server we did not write.
//
// Skills:
//   text.uppercase — a plain skill (no schema extension): answers the text
//                    upper-cased, as a direct message.
//   order_pizza    — described by our schema extension: asks "What size?"
//                    (input-required, with typed fields), then completes
//                    the same task with a text, a file and a data part.
//
// Usage: node server.mjs  — listens on 127.0.0.1 on a free port and prints
// "LISTENING <port>" on stdout.
import express from 'express';
import { randomUUID } from 'node:crypto';
import { AGENT_CARD_PATH } from '@a2a-js/sdk';
import { DefaultRequestHandler, InMemoryTaskStore } from '@a2a-js/sdk/server';
import { agentCardHandler, jsonRpcHandler, UserBuilder } from '@a2a-js/sdk/server/express';

const EXTENSION_URI = 'https://clientagent.dev/a2a/ext/skill-schema/v1';

const card = {
  name: 'JS Interop Agent',
  description: 'An A2A agent on the official JS SDK.',
  protocolVersion: '0.3.0',
  version: '0.1.0',
  url: '', // set once the port is known
  preferredTransport: 'JSONRPC',
  capabilities: {
    streaming: false,
    pushNotifications: false,
    extensions: [
      {
        uri: EXTENSION_URI,
        params: {
          skills: {
            order_pizza: {
              input_schema: {
                type: 'object',
                properties: {
                  item: { type: 'string', description: 'What to order' },
                  size: { type: 'string', enum: ['small', 'large'] },
                },
                required: ['item'],
              },
              usage_notes: 'Asks for the size when it is missing.',
            },
          },
        },
      },
    ],
  },
  defaultInputModes: ['text/plain', 'application/json'],
  defaultOutputModes: ['text/plain', 'application/json'],
  skills: [
    { id: 'text.uppercase', name: 'Uppercase', description: 'Returns the text upper-cased.', tags: ['text'], examples: ['shout hello'] },
    { id: 'order_pizza', name: 'Order pizza', description: 'Orders a pizza; asks for the size.', tags: ['food'] },
  ],
};

const partsOf = (msg) => msg?.parts ?? [];
const textOf = (msg) => partsOf(msg).filter((p) => p.kind === 'text').map((p) => p.text).join('\n');
const dataOf = (msg) => partsOf(msg).find((p) => p.kind === 'data')?.data;

class InteropExecutor {
  async execute(ctx, bus) {
    const { taskId, contextId, userMessage, task } = ctx;
    const data = dataOf(userMessage);
    if (!data) {
      bus.publish({
        kind: 'message',
        messageId: randomUUID(),
        role: 'agent',
        contextId,
        parts: [{ kind: 'text', text: textOf(userMessage).toUpperCase() }],
      });
      bus.finished();
      return;
    }
    const now = () => new Date().toISOString();
    if (!task) {
      bus.publish({ kind: 'task', id: taskId, contextId, status: { state: 'submitted', timestamp: now() }, history: [userMessage] });
    }
    if (!data.size) {
      bus.publish({
        kind: 'status-update', taskId, contextId, final: true,
        status: {
          state: 'input-required', timestamp: now(),
          message: {
            kind: 'message', messageId: randomUUID(), role: 'agent', taskId, contextId,
            parts: [
              { kind: 'text', text: `What size should the ${data.item} be?` },
              { kind: 'data', data: { fields: [{ name: 'size', type: 'string', description: 'Pizza size', required: true, enum: ['small', 'large'] }] } },
            ],
          },
        },
      });
      bus.finished();
      return;
    }
    bus.publish({
      kind: 'artifact-update', taskId, contextId,
      artifact: {
        artifactId: 'receipt', name: 'receipt', description: 'Order receipt',
        parts: [
          { kind: 'text', text: `Ordered a ${data.size} ${data.item}.` },
          { kind: 'file', file: { name: 'receipt.txt', mimeType: 'text/plain', bytes: Buffer.from(`${data.size} ${data.item}\n`).toString('base64') } },
          {
            kind: 'data',
            data: {
              item: data.item, size: data.size,
              inputSources: userMessage.metadata?.inputSources ?? null,
              sameTask: Boolean(task), messageId: userMessage.messageId,
            },
          },
        ],
      },
    });
    bus.publish({ kind: 'status-update', taskId, contextId, final: true, status: { state: 'completed', timestamp: now() } });
    bus.finished();
  }

  cancelTask = async () => {};
}

const app = express();
const server = app.listen(0, '127.0.0.1', () => {
  const { port } = server.address();
  card.url = `http://127.0.0.1:${port}/a2a/jsonrpc`;
  const requestHandler = new DefaultRequestHandler(card, new InMemoryTaskStore(), new InteropExecutor());
  app.use(`/${AGENT_CARD_PATH}`, agentCardHandler({ agentCardProvider: requestHandler }));
  app.use('/a2a/jsonrpc', jsonRpcHandler({ requestHandler, userBuilder: UserBuilder.noAuthentication }));
  process.stdout.write(`LISTENING ${port}\n`);
});

// Exit with the test process: stdin closes when the parent goes away.
process.stdin.on('end', () => process.exit(0));
process.stdin.resume();
