// resend.mjs: Regenerate and Edit on the last message (issue 28 feature).
// Regenerate sends the same text as a new turn that replaces the last one;
// Edit resends an edited text the same way. The replaced turns stay in
// the history, marked replaced (after a reload too), and only the newest
// turn offers the actions.
//   CLIENTAGENT_URL=… CLIENTAGENT_TOKEN=… node e2e/browser/resend.mjs
import { main, send, waitStatus, shot } from "./lib.mjs";

await main("resend", async (page) => {
  const posts = [];
  page.on("request", (r) => {
    if (r.method() === "POST" && /\/messages$/.test(new URL(r.url()).pathname)) posts.push(r.postDataJSON());
  });
  const first = await send(page, "Create an SVG with the word First");
  await waitStatus(first, ["succeeded"]);
  const firstId = await first.getAttribute("data-turn-id");
  await first.getByTestId("regenerate").click();
  await page.waitForFunction(() => document.querySelectorAll('[data-testid="turn"]').length === 2, null, { timeout: 30000 });
  const second = page.getByTestId("turn").last();
  const secondId = await second.getAttribute("data-turn-id");
  await waitStatus(second, ["succeeded"]);
  if (JSON.stringify(posts[1]) !== JSON.stringify({ text: "Create an SVG with the word First", supersedes: firstId })) throw new Error(`regenerate sent ${JSON.stringify(posts[1])}`);
  if ((await first.getAttribute("data-superseded-by")) !== secondId || !(await first.getByTestId("replaced-note").isVisible())) throw new Error("the regenerated turn is not marked replaced");
  if (await first.getByTestId("turn-actions").isVisible()) throw new Error("the replaced turn still offers Edit and Regenerate");

  await second.getByTestId("edit-resend").click();
  await second.getByTestId("edit-message").fill("Create an SVG with the word Second");
  await second.getByTestId("edit-send").click();
  await page.waitForFunction(() => document.querySelectorAll('[data-testid="turn"]').length === 3, null, { timeout: 30000 });
  const third = page.getByTestId("turn").last();
  await waitStatus(third, ["succeeded"]);
  if (posts[2].supersedes !== secondId || posts[2].text !== "Create an SVG with the word Second") throw new Error(`edit sent ${JSON.stringify(posts[2])}`);
  if (!/Second/.test(await third.getByTestId("reply").innerText())) throw new Error("the edited message's answer does not use the edit");
  console.log(`screenshot: ${await shot(page, "resend.png")}`);

  await page.reload();
  await page.locator(`[data-testid="turn"][data-turn-id="${secondId}"]`).waitFor({ state: "visible", timeout: 60000 });
  const marked = await page.getByTestId("turn").evaluateAll((els) => els.map((e) => e.dataset.supersededBy || ""));
  if (!(marked[0] && marked[1] && !marked[2])) throw new Error(`after a reload the turns are marked replaced ${JSON.stringify(marked)}, want the first two`);
  const offered = await page.getByTestId("turn-actions").evaluateAll((els) => els.map((e) => !e.hidden));
  if (JSON.stringify(offered) !== "[false,false,true]") throw new Error(`Edit/Regenerate offered on ${JSON.stringify(offered)}, want only the newest turn`);
  console.log(`turns ${firstId} → ${secondId} → replaced; kept after a reload`);
});
