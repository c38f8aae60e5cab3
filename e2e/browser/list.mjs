// list.mjs: the conversation list (issue 15). "New conversation" adds no
// row (a conversation is created with its first message), an empty
// conversation made through the API is not listed, the first message gives
// the row its title, Rename changes the title (PATCH, kept across a
// reload) and Delete asks before it deletes.
//   CLIENTAGENT_URL=… CLIENTAGENT_TOKEN=… node e2e/browser/list.mjs
import { env, main, send, waitStatus, conversationId, shot } from "./lib.mjs";

const rows = (page) => page.getByTestId("conversation");

async function titles(page) {
  return page.getByTestId("conversation-title").allInnerTexts();
}

await main("list", async (page) => {
  const { url, token } = env();
  // An empty conversation, as older clients made one per click.
  const res = await fetch(`${url}/v1/conversations`, { method: "POST", headers: { Authorization: `Bearer ${token}`, "Content-Type": "application/json" }, body: "{}" });
  if (res.status !== 201) throw new Error(`POST /v1/conversations: HTTP ${res.status}`);
  const { conversation_id: emptyId } = await res.json();
  await page.reload();
  await page.getByTestId("composer").waitFor({ state: "visible" });
  await page.waitForTimeout(500);
  if (await page.locator(`[data-testid="conversation"][data-id="${emptyId}"]`).count()) throw new Error("an empty conversation is listed");

  const before = await rows(page).count();
  await page.getByTestId("new-conversation").click();
  await page.getByTestId("new-conversation").click();
  await page.waitForTimeout(500);
  if ((await rows(page).count()) !== before) throw new Error(`"New conversation" added rows: ${before} → ${await rows(page).count()}`);

  const turn = await send(page, "Create an SVG with the word Listed");
  await waitStatus(turn, ["succeeded"]);
  const cid = conversationId(page);
  const row = page.locator(`[data-testid="conversation"][data-id="${cid}"]`);
  await row.waitFor({ state: "visible", timeout: 60000 });
  if ((await rows(page).count()) !== before + 1) throw new Error(`want one new row after the first message, got ${(await rows(page).count()) - before}`);
  await page.waitForFunction((id) => /\S/.test(document.querySelector(`[data-testid="conversation"][data-id="${id}"] [data-testid="conversation-title"]`)?.textContent || ""), cid);
  const first = (await row.getByTestId("conversation-title").innerText()).trim();
  if (!/Listed/.test(first)) throw new Error(`the new row's title is "${first}", want it from the first message`);
  for (const t of await titles(page)) if (!t.trim() || /^(new|untitled) conversation$/i.test(t.trim())) throw new Error(`an empty row is listed: "${t}"`);

  // Rename.
  await row.getByTestId("rename-conversation").click();
  await row.getByTestId("rename-input").fill("Renamed in the browser");
  await row.getByTestId("rename-save").click();
  await page.waitForFunction((id) => document.querySelector(`[data-testid="conversation"][data-id="${id}"] [data-testid="conversation-title"]`)?.textContent === "Renamed in the browser", cid, { timeout: 60000 });
  if ((await page.getByTestId("chat-title").innerText()).trim() !== "Renamed in the browser") throw new Error("the chat's title did not follow the rename");
  await page.reload();
  await page.getByTestId("composer").waitFor({ state: "visible" });
  await page.waitForFunction((id) => document.querySelector(`[data-testid="conversation"][data-id="${id}"] [data-testid="conversation-title"]`)?.textContent === "Renamed in the browser", cid, { timeout: 60000 });

  // Delete asks first; Cancel keeps the conversation.
  await row.getByTestId("delete-conversation").click();
  await row.getByTestId("confirm-delete").waitFor({ state: "visible" });
  const ask = (await row.innerText()).trim();
  if (!/delete/i.test(ask) || !ask.includes("Renamed in the browser")) throw new Error(`the confirmation says "${ask}"`);
  console.log(`screenshot: ${await shot(page, "list-delete.png")}`);
  await row.getByTestId("cancel-delete").click();
  await row.getByTestId("rename-conversation").waitFor({ state: "attached" });
  if (!(await page.getByTestId("turn").count())) throw new Error("Cancel closed the conversation");
  await row.getByTestId("delete-conversation").click();
  await row.getByTestId("confirm-delete").click();
  await row.waitFor({ state: "detached", timeout: 60000 });
  if (await page.getByTestId("turn").count()) throw new Error("the deleted conversation is still shown");
  if (conversationId(page)) throw new Error(`the address still names the deleted conversation: ${page.url()}`);
  const gone = await fetch(`${url}/v1/conversations/${cid}`, { headers: { Authorization: `Bearer ${token}` } });
  if (gone.status !== 404) throw new Error(`GET the deleted conversation: HTTP ${gone.status}, want 404`);
  console.log(`rows: ${before} → ${before + 1}, titled "${first}", renamed, deleted after confirmation`);
});
