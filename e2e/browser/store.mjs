// store.mjs: the sidebar says where conversations are kept (issue 28), from
// GET /v1/info. The test stack keeps them in memory, so the line warns that
// a restart loses them.
//   CLIENTAGENT_URL=… CLIENTAGENT_TOKEN=… node e2e/browser/store.mjs
import { env, main } from "./lib.mjs";

await main("store", async (page) => {
  const { url, token } = env();
  const res = await fetch(`${url}/v1/info`, { headers: { Authorization: `Bearer ${token}` } });
  if (res.status !== 200) throw new Error(`GET /v1/info: HTTP ${res.status}`);
  const { store } = await res.json();
  const line = page.getByTestId("store-status");
  await line.waitFor({ state: "visible", timeout: 10000 });
  const text = (await line.innerText()).trim();
  if (text !== store.description) throw new Error(`the store line says "${text}", want "${store.description}"`);
  if (!/in memory: lost on restart/.test(text)) throw new Error(`the test stack's store line "${text}" does not say that a restart loses the conversations`);
  if (!(await line.evaluate((el) => el.classList.contains("store-volatile")))) throw new Error("a store that loses conversations is not marked");
});
