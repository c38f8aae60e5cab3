// approval.mjs: a call that requires approval pauses the turn, the page
// shows the exact arguments, and Approve resumes it (docs/design.md §3.3 "Forms come
// first, then approval"; docs/design.md §8: the approval covers what was shown).
//   CLIENTAGENT_URL=… CLIENTAGENT_TOKEN=… node e2e/browser/approval.mjs
import { main, send, waitStatus, waitImage, shot } from "./lib.mjs";

await main("approval", async (page) => {
  const first = await send(page, "Create an SVG with the word Hello");
  await waitStatus(first, ["succeeded"]);
  await waitImage(first, "image/svg+xml");
  const ids = await page.locator('[data-testid="artifact"]').evaluateAll((els) => els.map((e) => e.dataset.artifactId));

  const turn = await send(page, "Publish it to web");
  await waitStatus(turn, ["awaiting_approval"]);
  const panel = turn.getByTestId("approval");
  await panel.waitFor({ state: "visible" });
  const argsText = await panel.getByTestId("approval-args").first().innerText();
  let args;
  try {
    args = JSON.parse(argsText);
  } catch (err) {
    throw new Error(`approval arguments are not JSON: ${argsText}`);
  }
  if (!args || typeof args !== "object" || Object.keys(args).length === 0) throw new Error(`approval shows no arguments: ${argsText}`);
  if ("artifact_id" in args && !ids.includes(args.artifact_id)) {
    throw new Error(`approval names artifact ${args.artifact_id}, the page shows ${ids.join(", ")}`);
  }
  // Issue 28: the artifact is shown by its name, with a thumbnail.
  const ref = panel.getByTestId("approval-artifacts").getByTestId("artifact-ref");
  await ref.first().waitFor({ state: "visible", timeout: 10000 });
  const refName = (await ref.first().innerText()).trim();
  const name = await first.getByTestId("artifact").first().locator(".artifact-name").innerText();
  if (refName !== name.trim()) throw new Error(`the approval names the artifact "${refName}", want "${name}"`);
  await page.waitForFunction(() => {
    const img = document.querySelector('[data-testid="approval-artifacts"] img[data-testid="artifact-thumb"]');
    return img && img.complete && img.naturalWidth > 0;
  }, null, { timeout: 30000 });
  const tool = await panel.getByTestId("approval-call").first().innerText();
  if (!tool.includes("publish_artifact")) throw new Error(`approval is for ${tool}, want publish_artifact`);
  console.log(`screenshot: ${await shot(page, "approval-pending.png")}`);

  await panel.getByTestId("approve").click();
  await waitStatus(turn, ["succeeded"]);
  if (await turn.getByTestId("approval").count()) throw new Error("approval panel still shown after the turn succeeded");
  const steps = await turn.getByTestId("step").evaluateAll((els) => els.map((e) => `${e.dataset.tool}:${e.dataset.status}`));
  if (!steps.includes("publish_artifact:succeeded")) throw new Error(`steps ${steps.join(", ")} lack publish_artifact:succeeded`);
  const reply = (await turn.getByTestId("reply").innerText()).trim();
  console.log(`arguments ${JSON.stringify(args)}; steps: ${steps.join(", ")}; reply: ${reply}`);
  console.log(`screenshot: ${await shot(page, "approval.png")}`);
});
