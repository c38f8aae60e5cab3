// expire.mjs: an approval nobody answers expires (docs/design.md §3.3: a pause has a
// timeout; docs/design.md: expired turns run nothing). Run against a stack whose
// AwaitTimeout is 2 s (e2e/browser_test.go starts one): the page, left
// alone, must show the turn as expired with the server's message and keep
// no Approve button.
//   CLIENTAGENT_URL=… CLIENTAGENT_TOKEN=… node e2e/browser/expire.mjs
import { main, send, waitStatus, waitImage, shot } from "./lib.mjs";

await main("expire", async (page) => {
  const first = await send(page, "Create an SVG with the word Hello");
  await waitStatus(first, ["succeeded"]);
  await waitImage(first, "image/svg+xml");

  const turn = await send(page, "Publish it to web");
  await waitStatus(turn, ["awaiting_approval"]);
  await turn.getByTestId("approval").waitFor({ state: "visible" });
  console.log(`screenshot: ${await shot(page, "expire-pending.png")}`);

  // Do nothing: no click, no reload. The page has to notice by itself.
  await waitStatus(turn, ["expired"], 20000);
  const msg = (await turn.getByTestId("turn-error").innerText()).trim();
  if (!/expired/i.test(msg) || !/not answered|nothing was run/i.test(msg)) throw new Error(`expired turn says "${msg}", want the server's expiry message`);
  if (await turn.getByTestId("approval").count()) throw new Error("approval panel still shown on the expired turn");
  if (await page.getByTestId("approve").count()) throw new Error("an Approve button remains on the page");
  const steps = await turn.getByTestId("step").evaluateAll((els) => els.map((e) => `${e.dataset.tool}:${e.dataset.status}`));
  if (!steps.includes("publish_artifact:not_executed")) throw new Error(`steps ${steps.join(", ")} lack publish_artifact:not_executed`);
  console.log(`steps: ${steps.join(", ")}; message: ${msg}`);
  console.log(`screenshot: ${await shot(page, "expire.png")}`);
});
