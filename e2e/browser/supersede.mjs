// supersede.mjs: free text while a turn waits for a form supersedes that
// turn (API.md; spec §3.3): the page must show the old turn as superseded
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
  const turn = await send(page, "Create an SVG with the word Later");
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
