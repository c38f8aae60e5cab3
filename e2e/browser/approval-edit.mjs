// approval-edit.mjs: the user edits a call's arguments before approving
// (docs/api/openapi.yaml: approval.arguments, like LangGraph's "edit"). The page must send
// the approval's id and only the changed call's arguments, refuse JSON that
// does not parse without sending anything, show the server's 400
// invalid_arguments inline while keeping the edit, and the turn must run
// with the edited arguments.
//   CLIENTAGENT_URL=… CLIENTAGENT_TOKEN=… node e2e/browser/approval-edit.mjs
import { main, send, waitStatus, waitImage, shot, answersIn } from "./lib.mjs";

await main("approval-edit", async (page) => {
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
  const approvalID = await panel.getAttribute("data-approval-id");
  if (!approvalID) throw new Error("the approval panel carries no approval id (data-approval-id): does the turn view send approval.id?");
  const call = panel.getByTestId("approval-call").first();
  const callID = await call.getAttribute("data-call-id");
  const shown = JSON.parse(await call.getByTestId("approval-args").innerText());
  if (shown.channel !== "web") throw new Error(`approval shows ${JSON.stringify(shown)}, want channel web`);

  // Edit turns the arguments into a textarea holding the same JSON.
  await call.getByTestId("approval-edit").click();
  const area = call.getByTestId("approval-args-edit");
  await area.waitFor({ state: "visible" });
  const prefilled = JSON.parse(await area.inputValue());
  if (JSON.stringify(prefilled) !== JSON.stringify(shown)) throw new Error(`edit box holds ${JSON.stringify(prefilled)}, want the shown ${JSON.stringify(shown)}`);
  if (await call.getByTestId("approval-args").count()) throw new Error("the read-only arguments stay shown while editing");

  // 1. JSON that does not parse: shown inline, nothing sent.
  const errorEl = panel.getByTestId("approval-error");
  await area.fill('{"artifact_id": ');
  await panel.getByTestId("approve").click();
  await errorEl.waitFor({ state: "visible", timeout: 30000 });
  const parseMsg = (await errorEl.innerText()).trim();
  if (!/not valid JSON/i.test(parseMsg)) throw new Error(`parse error says "${parseMsg}", want "not valid JSON"`);
  await page.waitForTimeout(300);
  if (inputBodies.length) throw new Error(`JSON that does not parse was sent: ${JSON.stringify(inputBodies)}`);

  // 2. A channel the skill does not offer: the server refuses it (400
  //    invalid_arguments), the page shows why and keeps the edit; nothing ran.
  const bad = { ...shown, channel: "radio" };
  await area.fill(JSON.stringify(bad, null, 2));
  await panel.getByTestId("approve").click();
  await page.waitForFunction(
    (prev) => {
      const e = document.querySelector('[data-testid="approval-error"]');
      return e && !e.hidden && e.innerText.trim() !== "" && e.innerText.trim() !== prev;
    },
    parseMsg,
    { timeout: 60000 },
  );
  const serverMsg = (await errorEl.innerText()).trim();
  if (/failed with HTTP/.test(serverMsg)) throw new Error(`inline error "${serverMsg}" is not the server's reason`);
  // Issue 28: worded for the person, not the model.
  if (/call \w+ again|invalid arguments for/i.test(serverMsg) || !/channel/.test(serverMsg)) throw new Error(`inline error "${serverMsg}" is worded for the model, or does not name the channel`);
  if (inputBodies.length !== 1) throw new Error(`want 1 input request after the refused edit, got ${inputBodies.length}`);
  if (!(await area.isVisible()) || JSON.parse(await area.inputValue()).channel !== "radio") throw new Error("the edit was lost after the server refused it");
  if ((await turn.getByTestId("turn-status").getAttribute("data-status")) !== "awaiting_approval") throw new Error("turn left awaiting_approval after refused arguments");
  if (await panel.getByTestId("approve").isDisabled()) throw new Error("Approve stays disabled after refused arguments");
  console.log(`server refused channel radio inline: ${serverMsg}`);
  console.log(`screenshot: ${await shot(page, "approval-edit-error.png")}`);

  // 3. archive: sent with the id and the edited arguments; the turn runs them.
  const edited = { ...shown, channel: "archive" };
  await area.fill(JSON.stringify(edited, null, 2));
  await panel.getByTestId("approve").click();
  await waitStatus(turn, ["succeeded"]);

  const want = { approval: { id: approvalID, decision: "approve", arguments: { [callID]: edited } } };
  const got = inputBodies[inputBodies.length - 1];
  if (inputBodies.length !== 2 || JSON.stringify(got) !== JSON.stringify(want)) {
    throw new Error(`input requests ${JSON.stringify(inputBodies)}, want the last ${JSON.stringify(want)}`);
  }
  if (inputBodies[0].approval.id !== approvalID) throw new Error(`refused request carried id ${inputBodies[0].approval.id}, want ${approvalID}`);
  if (await turn.getByTestId("approval").count()) throw new Error("approval panel still shown after the turn succeeded");
  const steps = await turn.getByTestId("step").evaluateAll((els) => els.map((e) => `${e.dataset.tool}:${e.dataset.status}`));
  if (!steps.includes("publish_artifact:succeeded")) throw new Error(`steps ${steps.join(", ")} lack publish_artifact:succeeded`);
  const reply = (await turn.getByTestId("reply").innerText()).trim();
  if (!/archive/i.test(reply)) throw new Error(`reply "${reply}" does not say it was published to archive (the edit)`);
  // Issue 28: that the arguments were edited is the turn's record.
  const turnId = await turn.getAttribute("data-turn-id");
  for (const reload of [false, true]) {
    const answers = await answersIn(page, turnId, { reload });
    if (JSON.stringify(answers) !== JSON.stringify(["Approved with edited arguments"])) throw new Error(`${reload ? "after a reload" : "in another tab"} the turn shows answers ${JSON.stringify(answers)}, want ["Approved with edited arguments"]`);
  }
  console.log(`sent ${JSON.stringify(got)}; steps: ${steps.join(", ")}; reply: ${reply}`);
  console.log(`screenshot: ${await shot(page, "approval-edit.png")}`);
});
