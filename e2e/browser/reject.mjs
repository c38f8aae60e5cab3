// reject.mjs: Reject on an approval (with a note) must not run the call:
// the turn ends succeeded with the model's "not published" reply, the
// call's step reads rejected and the approval panel goes away (docs/design.md §3.3
// approvals; docs/design.md §8).
//   CLIENTAGENT_URL=… CLIENTAGENT_TOKEN=… node e2e/browser/reject.mjs
import { main, send, waitStatus, waitImage, shot, answersIn } from "./lib.mjs";

await main("reject", async (page) => {
  const inputBodies = [];
  page.on("request", (r) => {
    if (r.method() === "POST" && /\/turns\/[^/]+\/input$/.test(new URL(r.url()).pathname)) inputBodies.push(r.postDataJSON());
  });

  const first = await send(page, "Create an SVG with the word Hello");
  await waitStatus(first, ["succeeded"]);
  await waitImage(first, "image/svg+xml");

  const turn = await send(page, "Publish it to web");
  await waitStatus(turn, ["awaiting_approval"]);
  const panel = turn.getByTestId("approval");
  await panel.waitFor({ state: "visible" });
  // The answer names the approval it answers (docs/api/openapi.yaml: approval.id).
  const id = await panel.getAttribute("data-approval-id");
  if (!id) throw new Error("the approval panel carries no approval id (data-approval-id)");
  const note = "not ready for the public";
  await panel.getByTestId("approval-note").fill(note);
  await panel.getByTestId("reject").click();
  await waitStatus(turn, ["succeeded"]);

  const want = { approval: { id, decision: "reject", note } };
  if (inputBodies.length !== 1 || JSON.stringify(inputBodies[0]) !== JSON.stringify(want)) {
    throw new Error(`input requests ${JSON.stringify(inputBodies)}, want one ${JSON.stringify(want)}`);
  }
  if (await turn.getByTestId("approval").count()) throw new Error("approval panel still shown after the rejection");
  if (await page.getByTestId("approve").count()) throw new Error("an Approve button remains on the page");
  const reply = (await turn.getByTestId("reply").innerText()).trim();
  if (!/not published/i.test(reply)) throw new Error(`reply "${reply}" does not say it was not published`);
  if (!reply.includes(note)) throw new Error(`reply "${reply}" does not carry the note "${note}"`);
  const steps = await turn.getByTestId("step").evaluateAll((els) => els.map((e) => `${e.dataset.tool}:${e.dataset.status}`));
  if (!steps.includes("publish_artifact:rejected")) throw new Error(`steps ${steps.join(", ")} lack publish_artifact:rejected`);
  if (steps.includes("publish_artifact:succeeded")) throw new Error(`a rejected publish ran: ${steps.join(", ")}`);
  if (await turn.getByTestId("artifact").count()) throw new Error("the rejected turn shows artifacts");
  // Issue 28: the rejection and its note are the turn's record, so a
  // reload and another tab show them as the live page did.
  const turnId = await turn.getAttribute("data-turn-id");
  const wantAnswer = `Rejected: ${note}`;
  for (const reload of [false, true]) {
    const answers = await answersIn(page, turnId, { reload });
    if (JSON.stringify(answers) !== JSON.stringify([wantAnswer])) throw new Error(`${reload ? "after a reload" : "in another tab"} the turn shows answers ${JSON.stringify(answers)}, want ["${wantAnswer}"]`);
  }
  console.log(`steps: ${steps.join(", ")}; reply: ${reply}`);
  console.log(`screenshot: ${await shot(page, "reject.png")}`);
});
