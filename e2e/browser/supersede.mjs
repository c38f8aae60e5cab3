// supersede.mjs: free text while a turn waits for a form supersedes that
// turn (docs/api/openapi.yaml; docs/design.md §3.3). The page warns first ("this will cancel the
// open question"): "Answer it instead" sends nothing and leads to the form,
// "Send anyway" sends; the page must then show the old turn as superseded
// without its form, and the new turn runs to its own image.
//   CLIENTAGENT_URL=… CLIENTAGENT_TOKEN=… node e2e/browser/supersede.mjs
import { main, send, waitStatus, waitImage, shot } from "./lib.mjs";

await main("supersede", async (page) => {
  const old = await send(page, "Design a valve flange with 4 holes");
  await waitStatus(old, ["awaiting_input"]);
  await old.getByTestId("form").waitFor({ state: "visible" });

  // The API answers a pause at once and reads it as running until the
  // execution applies the answer (API contract: "an answered pause reads
  // as running"). Make the first read of the old turn after the new
  // message fall in that window, as it does on a busy stack: the page
  // must keep following the old turn, not stop at "running".
  const oldId = await old.getAttribute("data-turn-id");
  let windowed = 0;
  await page.route(`**/turns/${oldId}`, async (route) => {
    if (route.request().method() !== "GET" || windowed) return route.fallback();
    windowed++;
    const res = await route.fetch();
    const body = await res.json();
    body.status = "running";
    delete body.form;
    delete body.reply;
    await route.fulfill({ response: res, json: body });
  });
  // The page asks before it cancels the open question.
  const posts = [];
  page.on("request", (r) => {
    if (r.method() === "POST" && /\/messages$/.test(new URL(r.url()).pathname)) posts.push(r.url());
  });
  await page.getByTestId("composer").fill("Create an SVG with the word Later");
  await page.getByTestId("composer").press("Enter");
  const warning = page.getByTestId("supersede-warning");
  await warning.waitFor({ state: "visible", timeout: 30000 });
  if (!/cancel the open question/i.test(await warning.innerText())) throw new Error(`the warning says "${await warning.innerText()}"`);
  await warning.getByTestId("answer-instead").click();
  await warning.waitFor({ state: "hidden" });
  const focused = await page.evaluate(() => document.activeElement?.closest('[data-testid="form"]') !== null);
  if (!focused) throw new Error('"Answer it instead" did not lead to the form');
  if (posts.length) throw new Error(`a message was sent before the user confirmed: ${posts.join(", ")}`);
  if ((await old.getByTestId("turn-status").getAttribute("data-status")) !== "awaiting_input") throw new Error("the open question did not stay open");
  console.log(`screenshot: ${await shot(page, "supersede-warning.png")}`);

  await page.getByTestId("composer").press("Enter");
  await warning.getByTestId("send-anyway").click();
  await page.waitForFunction(() => document.querySelectorAll('[data-testid="turn"]').length > 1, null, { timeout: 60000 });
  const newId = await page.getByTestId("turn").last().getAttribute("data-turn-id");
  const turn = page.locator(`[data-testid="turn"][data-turn-id="${newId}"]`);
  // The page shows the change by itself: no reload, no click.
  await waitStatus(old, ["superseded"], 15000);
  await waitStatus(turn, ["succeeded"]);
  const { naturalWidth } = await waitImage(turn, "image/svg+xml");
  if (windowed !== 1) throw new Error(`the old turn was read ${windowed} times through the answered-pause window, want 1`);

  if (await old.getByTestId("form").count()) throw new Error("the superseded turn still shows its form");
  const oldNote = (await old.getByTestId("turn-error").innerText()).trim();
  if (!/superseded/i.test(oldNote)) throw new Error(`superseded turn says "${oldNote}"`);
  const oldSteps = await old.getByTestId("step").evaluateAll((els) => els.map((e) => `${e.dataset.tool}:${e.dataset.status}`));
  if (oldSteps.includes("design_valve_flange:succeeded")) throw new Error(`the superseded flange ran: ${oldSteps.join(", ")}`);
  if (await old.getByTestId("artifact").count()) throw new Error("the superseded turn shows artifacts");
  const ids = await page.getByTestId("turn").evaluateAll((els) => els.map((e) => e.dataset.turnId));
  if (ids.length !== 2 || ids[0] === ids[1]) throw new Error(`want two distinct turns on the page, got ${ids.join(", ")}`);
  const reply = (await turn.getByTestId("reply").innerText()).trim();
  if (!reply.includes("Later")) throw new Error(`new turn's reply "${reply}" does not mention Later`);
  console.log(`old turn steps: ${oldSteps.join(", ")}; old says: ${oldNote}`);
  console.log(`new turn svg naturalWidth ${naturalWidth}; reply: ${reply}`);
  console.log(`screenshot: ${await shot(page, "supersede.png")}`);
});
