// restore.mjs: a conversation outlives the page (docs/design.md §3.1: the record is
// in Valkey, not in the browser). After a reload with the same stored
// token the address still names the conversation and the list shows it;
// opening it from the list restores the message, the turn's status, steps,
// reply and the PNG preview.
//   CLIENTAGENT_URL=… CLIENTAGENT_TOKEN=… node e2e/browser/restore.mjs
import { main, send, waitStatus, waitImage, shot, conversationId } from "./lib.mjs";

await main("restore", async (page) => {
  const text = "Create a PNG image with the word Popelnase";
  const live = await send(page, text);
  await waitStatus(live, ["succeeded"]);
  await waitImage(live, "image/png");
  const turnId = await live.getAttribute("data-turn-id");
  const reply = (await live.getByTestId("reply").innerText()).trim();
  const steps = await live.getByTestId("step").evaluateAll((els) => els.map((e) => `${e.dataset.tool}:${e.dataset.status}`));
  const cid = await page.locator('[data-testid="conversation"].active').getAttribute("data-id");
  if (!cid) throw new Error("no active conversation in the list before the reload");

  // The token left the address bar at the first load; the reload must find
  // it stored, and land on the conversation the address names (#/c/{cid}).
  if (conversationId(page) !== cid) throw new Error(`the address ${page.url()} does not name the conversation ${cid}`);
  await page.reload();
  if (page.url().includes("token=")) throw new Error(`token is in the address bar: ${page.url()}`);
  await page.getByTestId("composer").waitFor({ state: "visible", timeout: 60000 });
  const entry = page.locator(`[data-testid="conversation"][data-id="${cid}"]`);
  await entry.waitFor({ state: "visible", timeout: 60000 });
  const listed = (await entry.innerText()).trim();
  if (!/succeeded/i.test(listed)) throw new Error(`list entry "${listed}" does not show the status`);
  await page.locator(`[data-testid="turn"][data-turn-id="${turnId}"]`).waitFor({ state: "visible", timeout: 60000 });

  // A new chat, then the list entry: the conversation opens from the record.
  await page.getByTestId("new-conversation").click();
  await page.waitForFunction(() => !document.querySelector('[data-testid="turn"]'), null, { timeout: 30000 });
  await entry.locator(".conversation-open").click();
  const turn = page.locator(`[data-testid="turn"][data-turn-id="${turnId}"]`);
  await turn.waitFor({ state: "visible", timeout: 60000 });
  if ((await page.getByTestId("turn").count()) !== 1) throw new Error(`want 1 restored turn, got ${await page.getByTestId("turn").count()}`);
  await waitStatus(turn, ["succeeded"], 5000);
  const msg = (await turn.getByTestId("user-message").innerText()).trim();
  if (msg !== text) throw new Error(`restored message "${msg}", want "${text}"`);
  const gotReply = (await turn.getByTestId("reply").innerText()).trim();
  if (gotReply !== reply) throw new Error(`restored reply "${gotReply}", want "${reply}"`);
  const gotSteps = await turn.getByTestId("step").evaluateAll((els) => els.map((e) => `${e.dataset.tool}:${e.dataset.status}`));
  if (JSON.stringify(gotSteps) !== JSON.stringify(steps)) throw new Error(`restored steps ${gotSteps.join(", ")}, want ${steps.join(", ")}`);
  const { naturalWidth } = await waitImage(turn, "image/png");
  if (!(await page.locator(`[data-testid="conversation"][data-id="${cid}"]`).evaluate((el) => el.classList.contains("active")))) {
    throw new Error("the opened conversation is not marked active in the list");
  }
  console.log(`list: ${listed.replace(/\s+/g, " ")}; steps: ${gotSteps.join(", ")}; png naturalWidth ${naturalWidth}`);
  console.log(`screenshot: ${await shot(page, "restore.png")}`);
});
