// workflow.mjs: a workflow template started from the page's catalog (docs/design.md
// §3.4, issue 8). The sidebar lists the catalog's workflows; "Word to PNG"
// opened and started with its input empty pauses the turn with a typed form
// for `word` (an explicit selection has no model to fill it); the answer runs
// the SVG → PNG chain with one LLM call, and the PNG shows inline. Then the
// same workflow started with its input filled runs without a form.
//   CLIENTAGENT_URL=… CLIENTAGENT_TOKEN=… node e2e/browser/workflow.mjs
import { main, waitStatus, waitImage, shot } from "./lib.mjs";

async function startWorkflow(page, values) {
  const before = await page.getByTestId("turn").count();
  await page.locator('[data-testid="workflow"][data-id="word_to_png"]').click();
  const form = page.getByTestId("workflow-form");
  await form.waitFor({ state: "visible" });
  const heading = await form.locator("h3").innerText();
  if (heading !== "Word to PNG") throw new Error(`workflow form heading "${heading}", want "Word to PNG"`);
  for (const [name, value] of Object.entries(values)) await form.getByTestId(`field-${name}`).fill(value);
  await form.getByTestId("workflow-start").click();
  await page.waitForFunction((n) => document.querySelectorAll('[data-testid="turn"]').length > n, before, { timeout: 60000 });
  // The turn may appear from the event stream a moment before the POST
  // answers and the page closes the form.
  await form.waitFor({ state: "hidden", timeout: 30000 }).catch(() => {
    throw new Error("workflow form still open after Start");
  });
  const id = await page.getByTestId("turn").last().getAttribute("data-turn-id");
  return page.locator(`[data-testid="turn"][data-turn-id="${id}"]`);
}

await main("workflow", async (page) => {
  // The sidebar lists the workflows once the catalog has loaded.
  await page.getByTestId("workflow").first().waitFor({ state: "attached", timeout: 60000 });
  const ids = await page.getByTestId("workflow").evaluateAll((els) => els.map((e) => e.dataset.id));
  if (!ids.includes("word_to_png") || !ids.includes("flange_drawing")) throw new Error(`sidebar workflows [${ids.join(", ")}], want word_to_png and flange_drawing`);

  // 1. Started with nothing filled in: the turn asks for the word.
  const turn = await startWorkflow(page, {});
  await waitStatus(turn, ["awaiting_input"]);
  const form = turn.getByTestId("form");
  const legend = await form.getByTestId("form-call").first().locator("legend").innerText();
  if (!legend.includes("workflow_word_to_png")) throw new Error(`form is for ${legend}, want workflow_word_to_png`);
  await form.getByTestId("field-word").fill("Flowchart");
  await form.getByTestId("form-submit").click();
  await waitStatus(turn, ["succeeded"]);
  const { naturalWidth } = await waitImage(turn, "image/png");
  const reply = (await turn.getByTestId("reply").innerText()).trim();
  if (!reply.includes("Word to PNG finished")) throw new Error(`reply "${reply}" does not report the workflow`);
  // Issue 28: the workflow's steps are nested under its row in the waterfall.
  const rows = await turn.getByTestId("step").evaluateAll((els) => els.map((e) => ({ tool: e.dataset.tool, parent: e.dataset.parent || "", call: e.dataset.callId || "" })));
  const wf = rows.findIndex((r) => r.tool === "workflow_word_to_png");
  const nested = rows.slice(wf + 1, wf + 3);
  if (wf < 0 || JSON.stringify(nested.map((r) => r.tool)) !== JSON.stringify(["create_svg_artifact", "convert_svg_to_png"]) || nested.some((r) => r.parent !== rows[wf].call)) {
    throw new Error(`waterfall rows ${JSON.stringify(rows)}, want the workflow's two steps nested right under it`);
  }
  console.log(`form answered, PNG naturalWidth ${naturalWidth}; reply: ${reply}`);
  console.log(`screenshot: ${await shot(page, "workflow.png")}`);

  // 2. Started with the word: no form, straight to the PNG.
  const direct = await startWorkflow(page, { word: "Direct" });
  await waitStatus(direct, ["succeeded"]);
  await waitImage(direct, "image/png");
  if (await direct.getByTestId("form").count()) throw new Error("a form was shown although the input was given");
});

// 3. A workflow with a step that needs approval shows its plan first
//    (docs/design.md §9): every step with its arguments; approved, it publishes.
await main("workflow-plan", async (page) => {
  const before = await page.getByTestId("turn").count();
  await page.locator('[data-testid="workflow"][data-id="publish_word"]').click();
  const form = page.getByTestId("workflow-form");
  const stepsText = await form.getByTestId("workflow-steps").innerText();
  if (!stepsText.includes("Draw the word → Convert to PNG → Publish") || !stepsText.includes("approval")) throw new Error(`workflow steps "${stepsText}", want the three steps and the approval note`);
  await form.getByTestId("field-word").fill("Planned");
  await form.getByTestId("field-channel").selectOption("web");
  await form.getByTestId("workflow-start").click();
  await page.waitForFunction((n) => document.querySelectorAll('[data-testid="turn"]').length > n, before, { timeout: 60000 });
  const id = await page.getByTestId("turn").last().getAttribute("data-turn-id");
  const turn = page.locator(`[data-testid="turn"][data-turn-id="${id}"]`);
  await waitStatus(turn, ["awaiting_approval"]);
  const steps = await turn.getByTestId("plan-step").evaluateAll((els) => els.map((e) => e.dataset.skill));
  if (JSON.stringify(steps) !== JSON.stringify(["create_svg_artifact", "convert_svg_to_png", "publish_artifact"])) throw new Error(`plan steps [${steps.join(", ")}], want svg → png → publish`);
  const planText = await turn.getByTestId("approval-plan").innerText();
  if (await page.getByTestId("workflow-form").isVisible()) throw new Error("the workflow form stayed open after Start");
  if (!planText.includes('"word":"Planned"') || !planText.includes('"channel":"web"')) throw new Error(`plan "${planText}" lacks the resolved arguments`);
  console.log(`screenshot: ${await shot(page, "workflow-plan.png")}`);
  await turn.getByTestId("approve").click();
  await waitStatus(turn, ["succeeded"]);
  await waitImage(turn, "image/png");
});
