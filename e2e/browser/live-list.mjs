// live-list.mjs: the conversation list updates live (issue 28 point 6). A
// conversation another client starts through the API appears without a
// reload, with its title and then its status; a rename and a delete made
// elsewhere show too (GET /v1/events).
//   CLIENTAGENT_URL=… CLIENTAGENT_TOKEN=… node e2e/browser/live-list.mjs
import { main, env, shot } from "./lib.mjs";

await main("live-list", async (page) => {
  const { url, token } = env();
  const call = async (method, path, body) => {
    const res = await fetch(url + path, {
      method,
      headers: { Authorization: `Bearer ${token}`, "Content-Type": "application/json" },
      body: body ? JSON.stringify(body) : undefined,
    });
    if (!res.ok) throw new Error(`${method} ${path} = ${res.status} ${await res.text()}`);
    return res.status === 204 ? null : res.json();
  };
  await page.getByTestId("composer").waitFor({ state: "visible", timeout: 60000 });
  // Nothing on the page asks for the list again: only the stream can tell it.
  const text = "Create an SVG with the word Elsewhere";
  const { conversation_id: cid } = await call("POST", "/v1/conversations");
  await call("POST", `/v1/conversations/${cid}/messages`, { text });
  const row = page.locator(`[data-testid="conversation"][data-id="${cid}"]`);
  await row.waitFor({ state: "visible", timeout: 20000 });
  await page.waitForFunction(
    (id) => /Succeeded/i.test(document.querySelector(`[data-testid="conversation"][data-id="${id}"]`)?.innerText || ""),
    cid,
    { timeout: 30000 },
  );
  const title = (await row.getByTestId("conversation-title").innerText()).trim();
  if (title !== text) throw new Error(`the new row's title is "${title}", want "${text}"`);

  await call("PATCH", `/v1/conversations/${cid}`, { title: "Renamed elsewhere" });
  await page.waitForFunction(
    (id) => document.querySelector(`[data-testid="conversation"][data-id="${id}"] [data-testid="conversation-title"]`)?.textContent.trim() === "Renamed elsewhere",
    cid,
    { timeout: 20000 },
  );
  console.log(`screenshot: ${await shot(page, "live-list.png")}`);
  await call("DELETE", `/v1/conversations/${cid}`);
  await row.waitFor({ state: "detached", timeout: 20000 });
  console.log(`row ${cid} appeared, succeeded, was renamed and went, all without a reload`);
});
