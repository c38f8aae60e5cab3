// unavailable.mjs (against fake-api.mjs): while the API answers 503
// store_unavailable with Retry-After, the page says the service is
// unavailable and retrying, polls once per Retry-After instead of piling
// up polls, and clears the notice when the service answers again.
//   node e2e/browser/fake-api.mjs   # then CLIENTAGENT_URL=… CLIENTAGENT_TOKEN=… node e2e/browser/unavailable.mjs
import { env, main, send, waitStatus } from "./lib.mjs";

const { url } = env();
async function fake(path, body) {
  const res = await fetch(url + path, body ? { method: "POST", body: JSON.stringify(body), headers: { "Content-Type": "application/json" } } : {});
  if (!res.ok) throw new Error(`${path}: HTTP ${res.status} (run this check against e2e/browser/fake-api.mjs)`);
  return res.json();
}

await main("unavailable", async (page) => {
  const turn = await send(page, "Create an SVG with the word Hello");
  await fake("/_fake/outage", { count: 3, retry_after: 1, code: "store_unavailable" });
  await page.waitForFunction(
    () => {
      const b = document.querySelector('[data-testid="error-banner"]');
      return b && !b.hidden && /unavailable, retrying/i.test(b.textContent);
    },
    null,
    { timeout: 60000 },
  );
  await waitStatus(turn, ["succeeded"], 30000);
  await page.getByTestId("error-banner").waitFor({ state: "hidden", timeout: 30000 });

  const { reads } = await fake("/_fake/turn-reads");
  const first = reads.findIndex((r) => r.status === 503);
  if (first < 0) throw new Error(`no 503 answered: ${JSON.stringify(reads)}`);
  const outage = reads.slice(first, first + 4);
  if (outage.map((r) => r.status).join(",") !== "503,503,503,200") throw new Error(`reads around the outage: ${JSON.stringify(outage)}`);
  const gaps = outage.slice(1).map((r, i) => r.at - outage[i].at);
  // Retry-After: 1 → one poll per second at most (the page polls every 500 ms otherwise).
  if (gaps.some((g) => g < 900)) throw new Error(`polls after a 503 came ${gaps.join(", ")} ms apart, want at least 1000 (Retry-After)`);
  console.log(`polls during the outage ${gaps.join(", ")} ms apart`);
});
