// stop.mjs: Stop cancels a running turn (issue 15, POST …/cancel). Against
// a stack whose model streams slowly, Stop is clicked while the reply
// streams in: the turn ends "cancelled" with the server's message, the
// Stop button goes and the text stops growing.
//   CLIENTAGENT_URL=… CLIENTAGENT_TOKEN=… node e2e/browser/stop.mjs
import { main, send, waitStatus, shot } from "./lib.mjs";

await main("stop", async (page) => {
  const cancels = [];
  page.on("request", (r) => {
    if (r.method() === "POST" && /\/turns\/[^/]+\/cancel$/.test(new URL(r.url()).pathname)) cancels.push(r.url());
  });
  const turn = await send(page, "What can you do?");
  const stop = turn.getByTestId("stop");
  await stop.waitFor({ state: "visible", timeout: 60000 });
  // Stop once the answer has begun to stream.
  await turn.locator('[data-testid="reply"][data-streaming]').waitFor({ state: "visible", timeout: 30000 });
  await stop.click();
  await waitStatus(turn, ["cancelled"], 15000);
  if (cancels.length !== 1) throw new Error(`${cancels.length} cancel requests, want 1`);
  const note = (await turn.getByTestId("turn-error").innerText()).trim();
  if (!/stopped/i.test(note)) throw new Error(`the cancelled turn says "${note}"`);
  if (await turn.getByTestId("stop").isVisible()) throw new Error("Stop is still shown on a cancelled turn");
  const label = (await turn.getByTestId("turn-status").innerText()).trim();
  const before = await turn.innerText();
  await page.waitForTimeout(1500);
  if ((await turn.innerText()) !== before) throw new Error("the cancelled turn kept changing");
  console.log(`status label "${label}"; says: ${note}`);
  console.log(`screenshot: ${await shot(page, "stop.png")}`);
});
