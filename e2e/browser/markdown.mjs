// markdown.mjs: a reply's markdown is rendered, and HTML in it is inert
// (issue 15). The demo model repeats the quoted word in its reply, so the
// word carries markdown and a <script>: the reply must show the bold text,
// contain no script element and not run it. The reply's artifact id must
// show as a link to the artifact, not as a raw art_… id.
//   CLIENTAGENT_URL=… CLIENTAGENT_TOKEN=… node e2e/browser/markdown.mjs
import { main, send, waitStatus, waitImage, shot } from "./lib.mjs";

await main("markdown", async (page) => {
  const turn = await send(page, 'Create an SVG with the word "**Hi** <script>window.__pwned=1</script>"');
  await waitStatus(turn, ["succeeded"]);
  await waitImage(turn, "image/svg+xml");
  const reply = turn.getByTestId("reply");
  const text = (await reply.innerText()).trim();
  const bold = await reply.locator("strong").allInnerTexts();
  if (!bold.includes("Hi")) throw new Error(`reply "${text}" shows no bold "Hi" (strong: ${JSON.stringify(bold)})`);
  if (text.includes("**")) throw new Error(`reply "${text}" shows raw markdown`);
  if (await reply.locator("script").count()) throw new Error("the reply contains a <script> element");
  if (await page.evaluate(() => window.__pwned !== undefined)) throw new Error("a script in the reply ran");
  if (/\bart_[0-9a-f]/.test(text)) throw new Error(`reply "${text}" shows a raw artifact id`);
  const ref = reply.getByTestId("artifact-ref").first();
  await ref.waitFor({ state: "visible", timeout: 30000 });
  await page.waitForFunction((el) => el.getAttribute("href")?.startsWith("blob:"), await ref.elementHandle(), { timeout: 60000 });
  const refName = (await ref.innerText()).trim();
  if (!refName.endsWith(".svg")) throw new Error(`the artifact link reads "${refName}", want the file name`);
  // The user's own message is text, never markup.
  const mine = (await turn.getByTestId("user-message").innerText()).trim();
  if (!mine.includes("<script>")) throw new Error(`the user message "${mine}" is not shown as typed`);
  console.log(`reply: ${text}`);
  console.log(`screenshot: ${await shot(page, "markdown.png")}`);
});
