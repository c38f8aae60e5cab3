// waterfall.mjs: a turn's trace as a waterfall (issue 16), read from the
// API. A Popelnase turn shows one row per step in time order (an LLM call,
// create_svg_artifact, convert_svg_to_png), each bar placed by its start
// and end with a width above zero, its duration and status, and tokens on
// the LLM rows; a row opens (aria-expanded) to show its arguments and
// result as text; the turn shows its tokens (the cached part and the cost
// only when not 0) as the API's Turn says. Against fake-api.mjs (whose
// steps take FAKE_STEP_MS and whose calls cost money) it also sees a running
// bar grow and the cost and cached tokens shown. At 390 px nothing overflows.
//   CLIENTAGENT_URL=… CLIENTAGENT_TOKEN=… node e2e/browser/waterfall.mjs
import { env, main, send, waitStatus, conversationId, shot } from "./lib.mjs";

const { url, token } = env();

/** isFake says whether the API is e2e/browser/fake-api.mjs (it answers /_fake/requests). */
async function isFake() {
  try {
    return (await fetch(`${url}/_fake/requests`)).ok;
  } catch {
    return false;
  }
}

async function readTurn(cid, tid) {
  const res = await fetch(`${url}/v1/conversations/${encodeURIComponent(cid)}/turns/${encodeURIComponent(tid)}`, { headers: { Authorization: `Bearer ${token}` } });
  if (!res.ok) throw new Error(`GET turn ${tid}: HTTP ${res.status}`);
  return res.json();
}

/** rows reads the waterfall: per row its tool, status, offset, the bar's box and the texts. */
function rows(turn) {
  return turn.getByTestId("step").evaluateAll((els) =>
    els.map((e) => {
      const bar = e.querySelector('[data-testid="step-bar"]').getBoundingClientRect();
      const track = e.querySelector(".step-track").getBoundingClientRect();
      return {
        tool: e.dataset.tool,
        status: e.dataset.status,
        offset: Number(e.dataset.offsetMs),
        left: bar.left - track.left,
        width: bar.width,
        trackWidth: track.width,
        time: e.querySelector('[data-testid="step-time"]').textContent,
        statusText: e.querySelector('[data-testid="step-status"]').textContent,
        tokens: e.querySelector('[data-testid="step-tokens"]').textContent,
      };
    }),
  );
}

const fmt = (n) => Number(n).toLocaleString("en-US");

await main("waterfall", async (page) => {
  const fake = await isFake();
  const text = "Create a PNG image with the word Popelnase";
  let turn = await send(page, text);
  let tid = await turn.getAttribute("data-turn-id");

  if (fake) {
    // The fake's steps take FAKE_STEP_MS each: a running bar grows live.
    // Rows keep their place (new ones come after), so a row is pinned by
    // index; not the first one, whose bar spans the whole axis as it runs.
    // Every wait is on a condition with a generous timeout, and a turn
    // whose steps all ended before this saw one running (a page the
    // scheduler holds back) is followed by another turn (issue 31: a
    // 10 s wait for a running row and a fixed 300 ms pause timed out on a
    // loaded machine).
    let seen = "";
    for (let attempt = 0; attempt < 8 && !seen; attempt++) {
      const handle = await page.waitForFunction(
        (id) => {
          const t = document.querySelector(`[data-testid="turn"][data-turn-id="${id}"]`);
          if (!t) return false;
          const els = [...t.querySelectorAll('[data-testid="step"]')];
          const i = els.findIndex((e, n) => n > 0 && e.dataset.status === "running");
          if (i > 0) return i;
          const st = t.querySelector('[data-testid="turn-status"]')?.getAttribute("data-status") || "";
          return ["succeeded", "failed", "expired", "superseded", "cancelled", "blocked"].includes(st) ? -1 : false;
        },
        tid,
        { timeout: 60000, polling: 50 },
      );
      const i = await handle.jsonValue();
      if (i < 0) {
        await waitStatus(turn, ["succeeded"]);
        turn = await send(page, text);
        tid = await turn.getAttribute("data-turn-id");
        continue;
      }
      const row = turn.getByTestId("step").nth(i);
      const w1 = (await row.getByTestId("step-bar").boundingBox()).width;
      const d1 = Number(await row.getAttribute("data-duration-ms"));
      // Until the bar has grown by 150 ms, or its step has ended.
      const grown = await page.waitForFunction(
        ([id, n, w, d]) => {
          const e = document.querySelectorAll(`[data-testid="turn"][data-turn-id="${id}"] [data-testid="step"]`)[n];
          if (!e) return false;
          if (e.dataset.status !== "running") return "ended";
          const bar = e.querySelector('[data-testid="step-bar"]').getBoundingClientRect();
          return Number(e.dataset.durationMs) >= d + 150 && bar.width > w ? "grew" : false;
        },
        [tid, i, w1, d1],
        { timeout: 30000, polling: 50 },
      );
      if ((await grown.jsonValue()) !== "grew") continue; // it ended meanwhile: try the next one
      const w2 = (await row.getByTestId("step-bar").boundingBox()).width;
      const d2 = Number(await row.getAttribute("data-duration-ms"));
      const time = await row.getByTestId("step-time").textContent();
      if ((await row.getAttribute("data-status")) !== "running") continue; // it ended while read: try the next one
      if (!time.endsWith("…")) throw new Error(`a running step's time "${time}" is not marked as still running`);
      seen = `a running bar grew from ${w1.toFixed(1)} to ${w2.toFixed(1)} px, ${d1} to ${d2} ms (${time})`;
    }
    if (!seen) throw new Error("no running bar was seen to grow by 150 ms in 8 tries");
    console.log(seen);
  }

  await waitStatus(turn, ["succeeded"]);
  const cid = conversationId(page);
  // The page reads the turn once it ended; wait until every row has.
  await page.waitForFunction(
    (id) => {
      const t = document.querySelector(`[data-testid="turn"][data-turn-id="${id}"]`);
      return t && ![...t.querySelectorAll('[data-testid="step"]')].some((e) => e.dataset.status === "running");
    },
    tid,
    { timeout: 60000 },
  );
  const got = await rows(turn);
  const list = got.map((r) => `${r.tool}:${r.status}@${r.offset}ms[${r.left.toFixed(1)}+${r.width.toFixed(1)}]`).join(", ");
  const tools = got.map((r) => r.tool);
  const iLLM = tools.indexOf("llm");
  const iSVG = tools.indexOf("create_svg_artifact");
  const iPNG = tools.indexOf("convert_svg_to_png");
  if (iLLM < 0 || iSVG < 0 || iPNG < 0) throw new Error(`rows ${list}: want an LLM call, create_svg_artifact and convert_svg_to_png`);
  if (!(iLLM < iSVG && iSVG < iPNG)) throw new Error(`rows out of time order: ${list}`);
  for (let i = 1; i < got.length; i++) {
    if (got[i].offset < got[i - 1].offset || got[i].left < got[i - 1].left - 0.5) throw new Error(`rows out of time order: ${list}`);
  }
  for (const r of got) {
    if (!(r.width > 0)) throw new Error(`the ${r.tool} bar has no width: ${list}`);
    if (r.left + r.width > r.trackWidth + 0.5) throw new Error(`the ${r.tool} bar leaves its track: ${list}`);
    if (!/^\d+(\.\d)? (ms|s)$|^\d+ min \d+ s$/.test(r.time)) throw new Error(`the ${r.tool} row's duration reads "${r.time}"`);
    if (r.statusText !== r.status.replaceAll("_", " ")) throw new Error(`the ${r.tool} row's status reads "${r.statusText}", want ${r.status}`);
    if (r.tool === "llm" && !/^[\d,]+ tokens$/.test(r.tokens)) throw new Error(`an LLM row shows tokens "${r.tokens}"`);
    if (r.tool !== "llm" && r.tokens) throw new Error(`the ${r.tool} row shows tokens "${r.tokens}"`);
  }
  for (const t of ["create_svg_artifact", "convert_svg_to_png"]) {
    if (got.find((r) => r.tool === t).status !== "succeeded") throw new Error(`rows ${list}: want ${t} succeeded`);
  }
  console.log(`waterfall: ${list}`);

  // The turn's usage is the API's.
  const api = await readTurn(cid, tid);
  if (!(api.tokens > 0)) throw new Error(`the API's turn has ${api.tokens} tokens`);
  const wantTokens = `${fmt(api.tokens)} tokens${api.cached_tokens > 0 ? ` (${fmt(api.cached_tokens)} cached)` : ""}`;
  const tokensEl = turn.getByTestId("turn-tokens");
  await tokensEl.waitFor({ state: "visible", timeout: 30000 });
  const tokensText = (await tokensEl.textContent()).trim();
  if (tokensText !== wantTokens) throw new Error(`the turn shows "${tokensText}", want "${wantTokens}"`);
  const costEl = turn.getByTestId("turn-cost");
  const costShown = await costEl.isVisible();
  if (costShown !== api.cost_usd > 0) throw new Error(`the cost is ${costShown ? "shown" : "hidden"} for cost_usd ${api.cost_usd}`);
  const usage = (await turn.getByTestId("turn-usage").innerText()).replace(/\s+/g, " ").trim();
  if (costShown && !/\$\d/.test(await costEl.textContent())) throw new Error(`the cost reads "${await costEl.textContent()}"`);
  if (fake && !(api.cost_usd > 0 && api.cached_tokens > 0)) throw new Error(`the fake's turn has cost_usd ${api.cost_usd} and cached_tokens ${api.cached_tokens}, want both above 0`);
  console.log(`usage: ${usage} (API: ${api.tokens} tokens, ${api.cached_tokens} cached, $${api.cost_usd})`);

  // A tool row opens to its arguments and result, shown as text.
  const svgRow = turn.locator('[data-testid="step"][data-tool="create_svg_artifact"]');
  const toggle = svgRow.getByTestId("step-toggle");
  if ((await toggle.getAttribute("aria-expanded")) !== "false") throw new Error("the row starts open");
  if (await svgRow.getByTestId("step-detail").isVisible()) throw new Error("the closed row shows its details");
  await toggle.click();
  if ((await toggle.getAttribute("aria-expanded")) !== "true") throw new Error("the opened row does not say aria-expanded=true");
  const detail = svgRow.getByTestId("step-detail");
  await detail.waitFor({ state: "visible", timeout: 2000 });
  if ((await toggle.getAttribute("aria-controls")) !== (await detail.getAttribute("id"))) throw new Error("the row's button does not control its details");
  const argsEl = svgRow.locator('pre[data-testid="step-arguments"]');
  const resultEl = svgRow.locator('pre[data-testid="step-result"]');
  const args = JSON.parse(await argsEl.textContent());
  const result = JSON.parse(await resultEl.textContent());
  if (!JSON.stringify(args).includes("Popelnase")) throw new Error(`create_svg_artifact's arguments ${JSON.stringify(args)} lack the word Popelnase`);
  if (result.status !== "succeeded") throw new Error(`create_svg_artifact's result ${JSON.stringify(result)}, want status succeeded`);
  for (const el of [argsEl, resultEl]) {
    if (await el.evaluate((e) => e.childElementCount)) throw new Error("a step's JSON is rendered as HTML, not text");
  }
  const apiSVG = api.steps.find((s) => s.tool === "create_svg_artifact");
  if (JSON.stringify(args) !== JSON.stringify(apiSVG.arguments)) throw new Error(`shown arguments ${JSON.stringify(args)}, the API's ${JSON.stringify(apiSVG.arguments)}`);
  console.log(`create_svg_artifact: arguments ${JSON.stringify(args)}; result ${JSON.stringify(result).slice(0, 160)}`);

  const pngRow = turn.locator('[data-testid="step"][data-tool="convert_svg_to_png"]');
  await pngRow.getByTestId("step-toggle").press("Enter"); // a keyboard opens it too
  const pngResult = JSON.parse(await pngRow.locator('pre[data-testid="step-result"]').textContent());
  if (pngResult.status !== "succeeded") throw new Error(`convert_svg_to_png's result ${JSON.stringify(pngResult)}`);
  const pngArgs = await pngRow.locator('pre[data-testid="step-arguments"]').textContent();
  if (!/art_/.test(pngArgs)) throw new Error(`convert_svg_to_png's arguments ${pngArgs} name no artifact`);
  console.log(`screenshot: ${await shot(page, "waterfall.png")}`);

  // At 390 px the open rows fit the width.
  await page.setViewportSize({ width: 390, height: 844 });
  await page.waitForTimeout(200);
  const overflow = await page.evaluate(() => document.scrollingElement.scrollWidth - window.innerWidth);
  if (overflow > 0) throw new Error(`at 390 px the page is ${overflow} px wider than the window`);
  const narrow = await rows(turn);
  if (narrow.some((r) => !(r.width > 0) || r.trackWidth < 100)) throw new Error(`at 390 px the bars are ${narrow.map((r) => `${r.width}/${r.trackWidth}`).join(", ")}`);
  await svgRow.scrollIntoViewIfNeeded();
  console.log(`screenshot: ${await shot(page, "waterfall-narrow.png")}`);

  // Closing a row hides its details again.
  await toggle.click();
  if ((await toggle.getAttribute("aria-expanded")) !== "false" || (await detail.isVisible())) throw new Error("the row did not close");
});
