// details.mjs: the smaller defects of issue 28 point 7 on the page.
//  - a row's title has a tooltip with the whole title;
//  - a message over the API's limit is refused before it is sent;
//  - the sidebar says a conversation waits for the user's approval;
//  - a #token= link pasted into an open tab is used at once;
//  - the Tools list shows the catalog (schema, approval rule, availability);
//  - an LLM call's inspector shows what it sent and got (capture on).
//   CLIENTAGENT_URL=… CLIENTAGENT_TOKEN=… node e2e/browser/details.mjs
import { main, send, waitStatus, waitImage, shot, env } from "./lib.mjs";

await main("details", async (page) => {
  const messages = [];
  page.on("request", (r) => {
    if (r.method() === "POST" && /\/messages$/.test(new URL(r.url()).pathname)) messages.push(r.url());
  });
  const text = "Create an SVG with the word Tooltip, please, in a calm blue";
  const first = await send(page, text);
  await waitStatus(first, ["succeeded"]);
  await waitImage(first, "image/svg+xml");
  // The LLM call inspector (capture is on for this stack): the messages
  // sent, the tools offered and the raw response.
  {
    const llmRow = first.locator('[data-testid="step"][data-tool="llm"]').first();
    await llmRow.getByTestId("step-toggle").click();
    const inspector = llmRow.getByTestId("inspector");
    await inspector.waitFor({ state: "visible", timeout: 10000 });
    const sent = await inspector.getByTestId("inspect-messages").locator("pre").textContent();
    if (!sent.includes(text)) throw new Error(`the inspector's messages lack the user's text: ${sent.slice(0, 300)}`);
    const tools = await inspector.getByTestId("inspect-tools").locator("pre").textContent();
    if (!tools.includes("create_svg_artifact")) throw new Error(`the inspector's tools are ${tools}`);
    const raw = await inspector.getByTestId("inspect-response").locator("pre").textContent();
    if (!raw.includes("create_svg_artifact") || !raw.includes("usage")) throw new Error(`the inspector's raw response is ${raw}`);
    await llmRow.getByTestId("step-toggle").click();
  }
  const row = page.locator('[data-testid="conversation"].active [data-testid="conversation-title"]');
  await row.waitFor({ state: "visible", timeout: 30000 });
  const tip = await row.getAttribute("title");
  if (tip !== text) throw new Error(`the row's tooltip is ${JSON.stringify(tip)}, want the whole title ${JSON.stringify(text)}`);

  // The tool catalog: every skill and workflow of GET /v1/catalog, with
  // its approval rule, availability and schema.
  {
    const { url, token } = env();
    const cat = await (await fetch(`${url}/v1/catalog`, { headers: { Authorization: `Bearer ${token}` } })).json();
    await page.getByTestId("tool-catalog").locator("summary").first().click();
    const tools = page.getByTestId("tool");
    await tools.first().waitFor({ state: "visible", timeout: 10000 });
    const shown = await tools.evaluateAll((els) => els.map((e) => ({ name: e.dataset.name, approval: e.dataset.approval, available: e.dataset.available })));
    const want = [...cat.skills.map((s) => ({ name: s.name, approval: String(!!s.requires_approval), available: String(!s.unavailable) })),
      ...cat.workflows.map((w) => ({ name: `workflow_${w.id}`, approval: String(!!w.requires_approval), available: String(!w.unavailable) }))];
    if (JSON.stringify(shown) !== JSON.stringify(want)) throw new Error(`the Tools list shows ${JSON.stringify(shown)}, want ${JSON.stringify(want)}`);
    const publish = page.locator('[data-testid="tool"][data-name="publish_artifact"]');
    if (!(await publish.getByTestId("tool-approval").isVisible())) throw new Error("publish_artifact does not say it needs approval");
    await publish.locator("summary").click();
    const schema = await publish.getByTestId("tool-schema").innerText();
    if (!schema.includes('"channel"')) throw new Error(`publish_artifact's schema shows ${schema}`);
    console.log(`tools: ${shown.length}; publish_artifact schema shown`);
    await page.getByTestId("tool-catalog").locator("summary").first().click();
  }

  // Over the limit: refused on the page, with the limit, and nothing sent.
  const sent = messages.length;
  const { url, token } = env();
  const info = await (await fetch(`${url}/v1/info`, { headers: { Authorization: `Bearer ${token}` } })).json();
  if (!(info.max_text > 0)) throw new Error(`GET /v1/info says no max_text: ${JSON.stringify(info)}`);
  await page.getByTestId("composer").fill("x".repeat(info.max_text + 1));
  await page.getByTestId("composer").press("Enter");
  const banner = page.getByTestId("error-text");
  await page.waitForFunction(() => /limit is/.test(document.querySelector("#banner-text")?.textContent || ""), null, { timeout: 10000 });
  const said = (await banner.innerText()).trim();
  if (!said.includes(info.max_text.toLocaleString("en"))) throw new Error(`the page says "${said}", want the limit ${info.max_text}`);
  if (messages.length !== sent) throw new Error("a message over the limit was sent");
  await page.getByTestId("composer").fill("");

  // Waiting for an approval: the sidebar says so.
  const turn = await send(page, "Publish it to web");
  await waitStatus(turn, ["awaiting_approval"]);
  await page.waitForFunction(
    () => /Waiting for your approval/.test(document.querySelector('[data-testid="conversation"].active')?.innerText || ""),
    null,
    { timeout: 30000 },
  );
  console.log(`screenshot: ${await shot(page, "details.png")}`);

  // A pasted #token= link: a wrong token is used at once (the page asks
  // for a token), the right one brings the conversations back.
  await page.evaluate(() => (location.hash = "#token=not-a-valid-token"));
  await page.locator("#token-panel").waitFor({ state: "visible", timeout: 30000 });
  if (page.url().includes("token=")) throw new Error(`the token stayed in the address: ${page.url()}`);
  await page.evaluate((t) => (location.hash = `#token=${encodeURIComponent(t)}`), token);
  await page.locator('[data-testid="conversation"]').first().waitFor({ state: "visible", timeout: 30000 });
  if (await page.locator("#token-panel").isVisible()) throw new Error("the token panel stayed after a valid token was pasted");
  console.log(`tooltip "${tip}"; refused: ${said}`);
});
