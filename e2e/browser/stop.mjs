// stop.mjs: Stop cancels a running turn (issue 15, POST …/cancel). Against
// a stack whose model streams slowly, Stop is clicked while the reply
// streams in: the turn ends "cancelled" with the server's message, the
// Stop button goes and the text stops growing; the partial answer stays,
// marked stopped, with its LLM row and tokens (issue 28).
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
  // Issue 28: the running step's icon is an inline SVG, not an emoji that
  // is an empty box without an emoji font.
  await turn.locator('[data-testid="step"][data-status="running"] .step-icon svg[data-icon="running"]').first().waitFor({ state: "attached", timeout: 30000 });
  // Stop once the answer has begun to stream.
  await turn.locator('[data-testid="reply"][data-streaming]').waitFor({ state: "visible", timeout: 30000 });
  await stop.click();
  await waitStatus(turn, ["cancelled"], 15000);
  if (cancels.length !== 1) throw new Error(`${cancels.length} cancel requests, want 1`);
  const note = (await turn.getByTestId("turn-error").innerText()).trim();
  if (!/stopped/i.test(note)) throw new Error(`the cancelled turn says "${note}"`);
  if (await turn.getByTestId("stop").isVisible()) throw new Error("Stop is still shown on a cancelled turn");
  const label = (await turn.getByTestId("turn-status").innerText()).trim();
  // Issue 28: the partial answer stays, marked stopped; the LLM row stays
  // (stopped) and gets the call's tokens once the provider has answered,
  // and the counter counts it.
  const partial = turn.locator('[data-testid="reply"][data-stopped]');
  await partial.waitFor({ state: "visible", timeout: 15000 });
  const kept = (await partial.innerText()).trim();
  if (kept.length < 3) throw new Error(`the stopped answer kept "${kept}"`);
  const llmRow = turn.locator('[data-testid="step"][data-tool="llm"]');
  if ((await llmRow.count()) !== 1 || (await llmRow.getAttribute("data-status")) !== "stopped") throw new Error("the LLM row is not shown as stopped");
  await page.waitForFunction(
    (id) => {
      const t = document.querySelector(`[data-testid="turn"][data-turn-id="${id}"]`);
      return /\d/.test(t.querySelector('[data-testid="step"][data-tool="llm"] [data-testid="step-tokens"]').textContent) && /^1 LLM call$/.test(t.querySelector('[data-testid="llm-calls"]').textContent.trim());
    },
    await turn.getAttribute("data-turn-id"),
    { timeout: 60000 },
  );
  // A reload shows the same: the record keeps it.
  const turnId = await turn.getAttribute("data-turn-id");
  await page.reload();
  const again = page.locator(`[data-testid="turn"][data-turn-id="${turnId}"]`);
  await again.locator('[data-testid="reply"][data-stopped]').waitFor({ state: "visible", timeout: 60000 });
  if ((await again.locator('[data-testid="reply"][data-stopped]').innerText()).trim() !== kept) throw new Error("the reload shows another stopped answer");
  if ((await again.getByTestId("llm-calls").innerText()).trim() !== "1 LLM call") throw new Error(`after a reload the counter says ${await again.getByTestId("llm-calls").innerText()}`);
  const before = await turn.innerText();
  await page.waitForTimeout(1500);
  if ((await turn.innerText()) !== before) throw new Error("the cancelled turn kept changing");
  console.log(`status label "${label}"; says: ${note}`);
  console.log(`screenshot: ${await shot(page, "stop.png")}`);
});
