// search.mjs: conversation search by title and text (issue 28 feature):
// the list shows the conversations whose title holds the query, or whose
// messages or replies do (a renamed one is found by its text).
//   CLIENTAGENT_URL=… CLIENTAGENT_TOKEN=… node e2e/browser/search.mjs
import { main, env, shot } from "./lib.mjs";

await main("search", async (page) => {
  const { url, token } = env();
  const call = async (method, path, body) => {
    const res = await fetch(url + path, { method, headers: { Authorization: `Bearer ${token}`, "Content-Type": "application/json" }, body: body ? JSON.stringify(body) : undefined });
    if (!res.ok) throw new Error(`${method} ${path} = ${res.status}`);
    return res.status === 204 ? null : res.json();
  };
  // Each turn ends before the next begins, so the list's order (newest
  // change first) is the order written here.
  const start = async (text) => {
    const { conversation_id: cid } = await call("POST", "/v1/conversations");
    const { turn_id: tid } = await call("POST", `/v1/conversations/${cid}/messages`, { text });
    for (let i = 0; ; i++) {
      const t = await call("GET", `/v1/conversations/${cid}/turns/${tid}`);
      if (!["running", "awaiting_input", "awaiting_approval"].includes(t.status)) break;
      if (i > 300) throw new Error(`turn ${tid} still ${t.status} after 30 s`);
      await new Promise((r) => setTimeout(r, 100));
    }
    return cid;
  };
  const alpha = await start("Create an SVG with the word Quokkalpha");
  const beta = await start("Create an SVG with the word Quokkabeta");
  await call("PATCH", `/v1/conversations/${beta}`, { title: "Renamed without the word" });
  await page.reload();
  await page.locator(`[data-testid="conversation"][data-id="${beta}"]`).waitFor({ state: "visible", timeout: 30000 });
  const shown = () => page.getByTestId("conversation").evaluateAll((els) => els.map((e) => e.dataset.id));
  const search = async (q, want) => {
    await page.getByTestId("conversation-search").fill(q);
    await page.waitForFunction(
      (w) => JSON.stringify([...document.querySelectorAll('[data-testid="conversation"]')].map((e) => e.dataset.id).filter((id) => w.all.includes(id))) === JSON.stringify(w.want),
      { want, all: [alpha, beta] },
      { timeout: 20000 },
    );
  };
  await search("quokkalpha", [alpha]); // by title
  await search("QUOKKABETA", [beta]); // by the message's text: its title no longer has it
  await search("quokka", [beta, alpha]);
  await page.getByTestId("conversation-search").fill("no such text anywhere");
  await page.waitForFunction(() => /No conversation holds/.test(document.querySelector('[data-testid="conversation-list"]').innerText), null, { timeout: 20000 });
  console.log(`screenshot: ${await shot(page, "search.png")}`);
  await search("", [beta, alpha]);
  console.log(`search: ${JSON.stringify(await shown())}`);
});
