// lib.mjs: shared helpers of the browser checks. They drive Debian's
// headless Chromium through playwright-core (no downloaded browsers) and
// read CLIENTAGENT_URL and CLIENTAGENT_TOKEN from the environment.
import { chromium } from "playwright-core";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

export const here = path.dirname(fileURLToPath(import.meta.url));
export const shotsDir = path.join(here, "screenshots");

export function env() {
  const url = (process.env.CLIENTAGENT_URL || "").replace(/\/+$/, "");
  const token = process.env.CLIENTAGENT_TOKEN || "";
  if (!url || !token) throw new Error("set CLIENTAGENT_URL and CLIENTAGENT_TOKEN");
  return { url, token };
}

/**
 * open launches Chromium with a fresh profile, opens the page with the token
 * in the fragment and returns {page, close, problems}. problems collects
 * page errors, console errors and any request to another origin (the page
 * must load nothing external), of every tab (newTab). opts.viewport
 * overrides the 1280×860 window.
 */
export async function open(name, opts = {}) {
  const { url, token } = env();
  const userDataDir = fs.mkdtempSync(path.join(os.tmpdir(), `clientagent-${name}-`));
  const context = await chromium.launchPersistentContext(userDataDir, {
    executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
    headless: true,
    args: [
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
    ],
    viewport: opts.viewport || { width: 1280, height: 860 },
  });
  const problems = [];
  sessions.set(context, problems);
  const origin = new URL(url).origin;
  await context.route("**/*", (route) => {
    const u = route.request().url();
    if (u.startsWith(origin) || u.startsWith("blob:") || u.startsWith("data:")) return route.continue();
    problems.push(`external request: ${u}`);
    return route.abort();
  });
  const page = context.pages()[0] || (await context.newPage());
  watch(page, problems);
  await page.goto(`${url}/#token=${encodeURIComponent(token)}`);
  await page.getByTestId("composer").waitFor({ state: "visible", timeout: 60000 });
  const close = async () => {
    await context.close();
    fs.rmSync(userDataDir, { recursive: true, force: true });
  };
  return { page, close, problems };
}

const sessions = new WeakMap(); // browser context → its problems

function watch(page, problems) {
  page.on("pageerror", (err) => problems.push(`page error: ${err.message}`));
  page.on("console", (msg) => {
    // A 4xx the page handles (and shows) is logged by Chromium as an error
    // too; print those, fail only on the page's own errors.
    if (msg.type() !== "error") return;
    if (msg.text().startsWith("Failed to load resource")) console.error(`console: ${msg.text()}`);
    else problems.push(`console error: ${msg.text()}`);
  });
}

/**
 * newTab opens another tab of the same browser (same stored token) at the
 * page's address with the given fragment (e.g. "#/c/<cid>"), watched like
 * the first one.
 */
export async function newTab(page, hash = "") {
  const { url } = env();
  const context = page.context();
  const tab = await context.newPage();
  watch(tab, sessions.get(context));
  await tab.goto(`${url}/${hash}`);
  await tab.getByTestId("composer").waitFor({ state: "visible", timeout: 60000 });
  return tab;
}

/** conversationId is the conversation the page's address names (#/c/{cid}), or "". */
export function conversationId(page) {
  const m = new URL(page.url()).hash.match(/^#\/c\/([^/?&#]+)/);
  return m ? decodeURIComponent(m[1]) : "";
}

/**
 * send types a message into the composer and presses Enter; it returns the
 * new turn's locator, pinned to its turn id (a later turn does not move it).
 */
export async function send(page, text) {
  const before = await page.getByTestId("turn").count();
  await page.getByTestId("composer").fill(text);
  await page.getByTestId("composer").press("Enter");
  await page.waitForFunction((n) => document.querySelectorAll('[data-testid="turn"]').length > n, before, { timeout: 60000 });
  const id = await page.getByTestId("turn").last().getAttribute("data-turn-id");
  return page.locator(`[data-testid="turn"][data-turn-id="${id}"]`);
}

/** waitStatus waits until the turn shows one of want; a terminal status outside want fails at once. */
export async function waitStatus(turn, want, timeout = 60000) {
  const status = turn.getByTestId("turn-status");
  const deadline = Date.now() + timeout;
  const terminal = ["succeeded", "failed", "expired", "superseded", "cancelled", "blocked"];
  let got = "";
  while (Date.now() < deadline) {
    got = (await status.getAttribute("data-status")) || "";
    if (want.includes(got)) return got;
    if (terminal.includes(got)) {
      const why = await turn.innerText();
      throw new Error(`turn ended ${got}, want ${want.join("|")}:\n${why}`);
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`turn status ${got || "(none)"} after ${timeout} ms, want ${want.join("|")}`);
}

/** waitImage waits until an <img> of the given type inside the turn has decoded (naturalWidth > 0). */
export async function waitImage(turn, mimeType, timeout = 60000) {
  const img = turn.locator(`[data-testid="artifact"][data-mime-type="${mimeType}"] [data-testid="artifact-img"]`).first();
  await img.waitFor({ state: "visible", timeout });
  await img.evaluate(
    (el, ms) =>
      new Promise((resolve, reject) => {
        const t0 = Date.now();
        const check = () => {
          if (el.complete && el.naturalWidth > 0) return resolve();
          if (Date.now() - t0 > ms) return reject(new Error(`image ${el.src} did not load (naturalWidth ${el.naturalWidth})`));
          setTimeout(check, 100);
        };
        check();
      }),
    timeout,
  );
  return { img, naturalWidth: await img.evaluate((el) => el.naturalWidth) };
}

export async function shot(page, file) {
  fs.mkdirSync(shotsDir, { recursive: true });
  const p = path.join(shotsDir, file);
  await page.screenshot({ path: p, fullPage: false });
  return p;
}

/** main runs a check: it prints the failure (with a screenshot) and sets the exit code. opts go to open. */
export async function main(name, check, opts = {}) {
  let session;
  try {
    session = await open(name, opts);
    await check(session.page);
    if (session.problems.length) throw new Error(`page problems:\n${session.problems.join("\n")}`);
    console.log(`${name}: ok`);
  } catch (err) {
    process.exitCode = 1;
    console.error(`${name}: FAIL: ${err.stack || err}`);
    if (session) {
      if (session.problems.length) console.error(session.problems.join("\n"));
      try {
        console.error(`screenshot: ${await shot(session.page, `${name}-failure.png`)}`);
      } catch {
        // The browser may be gone already.
      }
    }
  } finally {
    if (session) await session.close();
  }
}

/**
 * answersIn opens the page's conversation in a new tab (reload: true
 * reloads this one instead) and returns the user's answers turn turnId
 * shows there, which only the record can tell it.
 */
export async function answersIn(page, turnId, { reload = false } = {}) {
  let tab = page;
  if (reload) {
    await page.reload();
    await page.getByTestId("composer").waitFor({ state: "visible", timeout: 60000 });
  } else {
    tab = await newTab(page, new URL(page.url()).hash);
  }
  const turn = tab.locator(`[data-testid="turn"][data-turn-id="${turnId}"]`);
  await turn.getByTestId("user-answer").first().waitFor({ state: "visible", timeout: 60000 });
  const got = (await turn.getByTestId("user-answer").allInnerTexts()).map((s) => s.trim());
  if (tab !== page) await tab.close();
  return got;
}
