// appsync.mjs (issue 27, point 1): against a stack whose GET /v1/info says
// its live events come from an AppSync Events API (the in-process fake of
// e2e/browser_test.go), the page subscribes over that API's WebSocket
// (subprotocol aws-appsync-event-ws, with its token) instead of reading
// GET …/events, and the reply grows while the turn runs from the events it
// is sent there.
import { main, send, waitStatus } from "./lib.mjs";

await main("appsync", async (page) => {
  const sockets = [];
  page.on("websocket", (ws) => {
    const s = { url: ws.url(), sent: [], received: [] };
    ws.on("framesent", (f) => s.sent.push(String(f.payload)));
    ws.on("framereceived", (f) => s.received.push(String(f.payload)));
    sockets.push(s);
  });
  const sse = [];
  page.on("request", (r) => {
    if (r.url().includes("/events")) sse.push(r.url());
  });
  const turn = await send(page, "What can you do?");
  const seen = [];
  const deadline = Date.now() + 60000;
  for (;;) {
    const status = await turn.getByTestId("turn-status").getAttribute("data-status");
    const reply = turn.getByTestId("reply");
    if (status === "running" && (await reply.count())) {
      const len = (await reply.innerText()).length;
      if (len && len !== seen[seen.length - 1]) seen.push(len);
    }
    if (status !== "running" || Date.now() > deadline) break;
    await page.waitForTimeout(40);
  }
  await waitStatus(turn, ["succeeded"], 60000);
  if (seen.length < 3) throw new Error(`the reply was seen at ${seen.length} lengths while running, want it to grow from the WebSocket's events`);
  // The page opens one WebSocket per channel: the owner's conversation list
  // (/live/dev/user) and the conversation's (/live/dev/c-…), in whichever
  // order they come. The conversation's socket is the one that carries the turn.
  const realtime = sockets.filter((s) => s.url.endsWith("/event/realtime"));
  if (!realtime.length) throw new Error(`no WebSocket to the Event API (sockets: ${sockets.map((s) => s.url).join(", ") || "none"})`);
  const types = (frames) => frames.map((f) => JSON.parse(f).type);
  const subsOf = (s) => s.sent.map((f) => JSON.parse(f)).filter((m) => m.type === "subscribe");
  const subs = realtime.flatMap(subsOf);
  // (A page that resubscribed has more than one; their frames count together.)
  const conv = realtime.filter((s) => subsOf(s).some((m) => /^\/live\/dev\/c-/.test(m.channel)));
  if (!conv.length || subs.some((m) => !m.authorization?.Authorization)) {
    throw new Error(`subscribe frames ${JSON.stringify(subs)}, want the conversation's channel of the owner, each with the token`);
  }
  const received = conv.flatMap((s) => s.received);
  const got = types(received);
  if (!got.includes("connection_ack") || !got.includes("subscribe_success") || got.filter((t) => t === "data").length < 5) {
    throw new Error(`frames received ${got.join(",")}, want connection_ack, subscribe_success and the turn's data`);
  }
  const ended = received.map((f) => JSON.parse(f)).filter((m) => m.type === "data").map((m) => JSON.parse(m.event)).find((e) => e.type === "turn.ended");
  if (!ended) throw new Error("no turn.ended over the WebSocket");
  if (sse.length) throw new Error(`the page read the SSE stream too: ${sse.join(", ")}`);
  console.log(`appsync: ${got.filter((t) => t === "data").length} events over ${conv[0].url}, reply grew through ${seen.length} lengths`);
});
