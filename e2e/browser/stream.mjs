// stream.mjs: live turns (issue 15). Against a stack whose model streams
// its answer slowly (devstack ChunkDelay), the reply must appear
// progressively while the turn runs; a second tab on the same conversation
// must show a turn started in the first one, live, without a click; a
// reload and back/forward must land on the conversation the address names
// (#/c/{cid}).
//   CLIENTAGENT_URL=… CLIENTAGENT_TOKEN=… node e2e/browser/stream.mjs
import { main, send, waitStatus, waitImage, newTab, conversationId, shot } from "./lib.mjs";

await main("stream", async (page) => {
  // 1. The reply streams in: sample it while the turn runs.
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
  const final = (await turn.getByTestId("reply").innerText()).trim();
  if (seen.length < 3) throw new Error(`the reply was seen at ${seen.length} lengths while running (${seen.join(", ")}), want it to grow progressively`);
  if (seen.some((n, i) => i && n < seen[i - 1])) throw new Error(`the streamed reply shrank: ${seen.join(", ")}`);
  if (seen[0] >= final.length) throw new Error(`the first streamed text (${seen[0]} chars) is already the whole reply (${final.length})`);
  if (await turn.locator('[data-testid="reply"][data-streaming]').count()) throw new Error("the final reply is still marked as streaming");
  // The demo's help text is a markdown list: rendered, not shown raw.
  const items = await turn.locator('[data-testid="reply"] li').count();
  if (items < 3) throw new Error(`the reply renders ${items} list items, want the markdown list rendered`);
  if (/^\s*- /m.test(final)) throw new Error("the reply shows raw markdown list markers");
  console.log(`reply grew through ${seen.length} lengths (${seen.slice(0, 8).join(", ")}…) to ${final.length} chars, ${items} list items`);

  // 2. A second tab on the same conversation sees a new turn without a click.
  const cid = conversationId(page);
  if (!cid) throw new Error(`the address ${page.url()} does not name the conversation (#/c/{cid})`);
  const tab = await newTab(page, `#/c/${cid}`);
  await tab.locator(`[data-testid="turn"][data-turn-id="${await turn.getAttribute("data-turn-id")}"]`).waitFor({ state: "visible", timeout: 60000 });
  const twin = await send(page, "Create an SVG with the word Twin");
  const twinId = await twin.getAttribute("data-turn-id");
  const other = tab.locator(`[data-testid="turn"][data-turn-id="${twinId}"]`);
  await other.waitFor({ state: "visible", timeout: 60000 });
  const otherMsg = (await other.getByTestId("user-message").innerText()).trim();
  if (otherMsg !== "Create an SVG with the word Twin") throw new Error(`the second tab shows the message "${otherMsg}"`);
  await waitStatus(other, ["succeeded"]);
  await waitImage(other, "image/svg+xml");
  const steps = await other.getByTestId("step").evaluateAll((els) => els.map((e) => `${e.dataset.tool}:${e.dataset.status}`));
  if (!steps.includes("create_svg_artifact:succeeded")) throw new Error(`second tab steps ${steps.join(", ")} lack create_svg_artifact:succeeded`);
  console.log(`second tab followed the turn: ${steps.join(", ")}`);
  console.log(`screenshot: ${await shot(tab, "stream-second-tab.png")}`);

  // 3. A reload lands on the same conversation, without a click.
  await tab.reload();
  await tab.getByTestId("composer").waitFor({ state: "visible", timeout: 60000 });
  if (conversationId(tab) !== cid) throw new Error(`after a reload the address is ${tab.url()}, want #/c/${cid}`);
  await tab.locator(`[data-testid="turn"][data-turn-id="${twinId}"]`).waitFor({ state: "visible", timeout: 60000 });
  const active = await tab.locator('[data-testid="conversation"].active').getAttribute("data-id");
  if (active !== cid) throw new Error(`after a reload the list marks ${active} active, want ${cid}`);
  await tab.close();

  // 4. Back and forward: a new chat, then back to the conversation.
  await page.getByTestId("new-conversation").click();
  await page.waitForFunction(() => !document.querySelector('[data-testid="turn"]'), null, { timeout: 30000 });
  if (conversationId(page)) throw new Error(`a new chat still names a conversation: ${page.url()}`);
  await page.goBack();
  await page.locator(`[data-testid="turn"][data-turn-id="${twinId}"]`).waitFor({ state: "visible", timeout: 60000 });
  if (conversationId(page) !== cid) throw new Error(`back landed on ${page.url()}, want #/c/${cid}`);
  await page.goForward();
  await page.waitForFunction(() => !document.querySelector('[data-testid="turn"]'), null, { timeout: 30000 });
  console.log(`reload, back and forward landed on #/c/${cid} and the new chat`);
});
