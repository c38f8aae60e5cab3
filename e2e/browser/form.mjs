// form.mjs: a call that lacks a user-input field pauses the turn with a
// typed form (docs/design.md §3.3 "Forms come first, then approval"; §3.4 user-input
// fields). The page must show `material` as a required select with the
// schema's enum, refuse an empty answer (the browser's own check, and the
// server's 400 shown inline when that check is bypassed), and an answered
// form resumes the turn to the flange drawing.
//   CLIENTAGENT_URL=… CLIENTAGENT_TOKEN=… node e2e/browser/form.mjs
import { main, send, waitStatus, waitImage, shot, env, answersIn } from "./lib.mjs";

await main("form", async (page) => {
  const inputPosts = [];
  page.on("request", (r) => {
    if (r.method() === "POST" && /\/turns\/[^/]+\/input$/.test(new URL(r.url()).pathname)) inputPosts.push(r.postData());
  });

  const turn = await send(page, "Design a valve flange with 4 holes");
  await waitStatus(turn, ["awaiting_input"]);
  const form = turn.getByTestId("form");
  await form.waitFor({ state: "visible" });
  const legend = await form.getByTestId("form-call").first().locator("legend").innerText();
  if (!legend.includes("design_valve_flange")) throw new Error(`form is for ${legend}, want design_valve_flange`);

  const material = form.getByTestId("field-material");
  const info = await material.evaluate((el) => ({
    tag: el.tagName,
    required: el.required,
    options: [...el.options].filter((o) => !o.disabled && o.value).map((o) => o.value),
    label: document.querySelector(`label[for="${el.id}"]`)?.innerText || "",
  }));
  if (info.tag !== "SELECT") throw new Error(`material is a <${info.tag}>, want a <select>`);
  if (!info.required) throw new Error("material select is not marked required");
  if (!info.label.includes("required")) throw new Error(`material label "${info.label}" does not say required`);
  // The options are exactly the skill's enum as the catalog publishes it.
  const { url, token } = env();
  const cat = await (await fetch(`${url}/v1/catalog`, { headers: { Authorization: `Bearer ${token}` } })).json();
  const skill = (cat.skills || []).find((s) => s.name === "design_valve_flange");
  const wantEnum = skill?.input_schema?.properties?.material?.enum || [];
  if (!wantEnum.includes("steel") || JSON.stringify(info.options) !== JSON.stringify(wantEnum)) {
    throw new Error(`material options [${info.options.join(", ")}], want the catalog's enum [${wantEnum.join(", ")}] with steel`);
  }

  // 1. Nothing chosen: the browser's constraint check stops the submit, no request leaves the page.
  await form.getByTestId("form-submit").click();
  await page.waitForTimeout(300);
  if (inputPosts.length) throw new Error(`an empty required answer was sent: ${inputPosts.join(" | ")}`);
  if (!(await material.evaluate((el) => el.validity.valueMissing))) throw new Error("material is not flagged as missing");
  if ((await turn.getByTestId("turn-status").getAttribute("data-status")) !== "awaiting_input") throw new Error("turn left awaiting_input after a blocked submit");

  // 2. The same empty answer past the browser's check: the server refuses
  //    it (400 invalid_answer) and the page shows its message in the form.
  await form.evaluate((el) => (el.noValidate = true));
  await form.getByTestId("form-submit").click();
  const formError = form.getByTestId("form-error");
  await formError.waitFor({ state: "visible", timeout: 60000 });
  const serverMsg = (await formError.innerText()).trim();
  if (!/material/i.test(serverMsg)) throw new Error(`inline error "${serverMsg}" does not name the material field`);
  if (inputPosts.length !== 1) throw new Error(`want 1 input request after the bypassed check, got ${inputPosts.length}`);
  console.log(`server refused the empty answer inline: ${serverMsg}`);
  console.log(`screenshot: ${await shot(page, "form-error.png")}`);
  if ((await turn.getByTestId("turn-status").getAttribute("data-status")) !== "awaiting_input") throw new Error("turn left awaiting_input after a refused answer");
  if (await form.getByTestId("form-submit").isDisabled()) throw new Error("submit stays disabled after a refused answer");

  // 3. A value outside the enum (a tampered option) is refused as well.
  await material.evaluate((el) => {
    el.append(new Option("unobtainium", "unobtainium"));
    el.value = "unobtainium";
  });
  await form.getByTestId("form-submit").click();
  await page.waitForFunction(
    (prev) => {
      const e = document.querySelector('[data-testid="form-error"]');
      return e && !e.hidden && e.innerText.trim() !== "" && e.innerText.trim() !== prev;
    },
    serverMsg,
    { timeout: 60000 },
  );
  const enumMsg = (await formError.innerText()).trim();
  console.log(`server refused an answer outside the enum: ${enumMsg}`);

  // 4. steel: the turn resumes and ends with the drawing.
  await material.selectOption("steel");
  await form.getByTestId("form-submit").click();
  await waitStatus(turn, ["succeeded"]);
  if (await turn.getByTestId("form").count()) throw new Error("form still shown after the turn succeeded");
  const { naturalWidth } = await waitImage(turn, "image/svg+xml");
  const reply = (await turn.getByTestId("reply").innerText()).trim();
  if (!/steel/i.test(reply)) throw new Error(`reply "${reply}" does not mention steel`);
  const steps = await turn.getByTestId("step").evaluateAll((els) => els.map((e) => `${e.dataset.tool}:${e.dataset.status}`));
  if (!steps.includes("design_valve_flange:succeeded")) throw new Error(`steps ${steps.join(", ")} lack design_valve_flange:succeeded`);
  // Issue 28: the form's values are the turn's record: a reload and
  // another tab show what the user answered.
  const turnId = await turn.getAttribute("data-turn-id");
  for (const reload of [false, true]) {
    const answers = await answersIn(page, turnId, { reload });
    if (answers.length !== 1 || !answers[0].includes("material: steel")) throw new Error(`${reload ? "after a reload" : "in another tab"} the turn shows answers ${JSON.stringify(answers)}, want one with "material: steel"`);
  }
  console.log(`steps: ${steps.join(", ")}; svg naturalWidth ${naturalWidth}; reply: ${reply}`);
  console.log(`screenshot: ${await shot(page, "form.png")}`);
});
