// screenshots.mjs makes the README's screenshots (docs/img) against a
// running local stack with the demo model, at 1280 px and at 390 px:
//   CLIENTAGENT_URL=http://127.0.0.1:8080 CLIENTAGENT_TOKEN=… node scripts/screenshots.mjs
// (the token is the one `make run` prints for the user dev).
import { chromium } from "playwright-core";

const url = process.env.CLIENTAGENT_URL || "http://127.0.0.1:8080";
const token = process.env.CLIENTAGENT_TOKEN;
if (!token) throw new Error("CLIENTAGENT_TOKEN is required");
const browser = await chromium.launch({ executablePath: process.env.CHROMIUM || "/usr/bin/chromium", args: ["--no-sandbox"] });

async function turnDone(page, n) {
  await page.waitForFunction(
    (n) => {
      const turns = document.querySelectorAll('[data-testid="turn"]');
      const s = turns[n - 1]?.dataset.status;
      return turns.length >= n && s && !["running", ""].includes(s);
    },
    n,
    { timeout: 60000 },
  );
}

async function send(page, text, n) {
  await page.getByTestId("composer").fill(text);
  await page.getByTestId("composer").press("Enter");
  await turnDone(page, n);
}

for (const [width, height, suffix] of [
  [1280, 860, ""],
  [390, 844, "-390"],
]) {
  const page = await browser.newPage({ viewport: { width, height }, deviceScaleFactor: 1 });
  await page.goto(`${url}/#token=${encodeURIComponent(token)}`);
  await page.getByTestId("composer").waitFor({ state: "visible", timeout: 60000 });
  await send(page, "Create a PNG image with the word Popelnase", 1);
  await page.locator('[data-testid="artifact-img"]').last().evaluate((img) => img.decode());
  await page.screenshot({ path: `docs/img/popelnase${suffix}.png` });
  await send(page, "Publish it to web", 2);
  await page.getByTestId("approval").waitFor({ state: "visible", timeout: 30000 });
  await page.locator('[data-testid="approval-artifacts"] img').first().evaluate((img) => img.decode());
  await page.screenshot({ path: `docs/img/approval${suffix}.png` });
  await page.getByTestId("approve").click();
  await turnDone(page, 2);
  await page.waitForFunction(() => document.querySelectorAll('[data-testid="turn"]')[1]?.dataset.status === "succeeded", null, { timeout: 60000 });
  if (width > 600) {
    await page.getByTestId("tool-catalog").locator("summary").first().click();
    const llm = page.locator('[data-testid="turn"]').first().locator('[data-testid="step"][data-tool="llm"]').first();
    await llm.getByTestId("step-toggle").click();
    await llm.getByTestId("inspect-response").locator("summary").click();
  }
  await page.screenshot({ path: `docs/img/inspector${suffix}.png` });
  console.log(`docs/img/*${suffix}.png at ${width}x${height}`);
  await page.close();
}
await browser.close();
