// svg-script.mjs (issue 27, point 8): an SVG artifact that carries script
// runs none of it in the page's origin. Every artifact link of the local
// stack answers with such an SVG (as a specialist could return it, typed
// image/svg+xml and without the server's sandboxing headers). The page
// shows it through <img>, its links download bytes typed
// application/octet-stream and never open a tab, and the image's own URL
// opened as a document (what "Open image in new tab" does) is not of the
// page's origin (a data: URL: a blob: URL would be, and its script would
// run there). The script would set localStorage "pwned" in the page's
// origin (where the token is) and call the API's /pwned path; neither
// happens.
import { env, main, send, waitStatus, waitImage } from "./lib.mjs";

const EVIL = `<svg xmlns="http://www.w3.org/2000/svg" width="80" height="40" onload="localStorage.setItem('pwned', 'onload'); fetch('/pwned?onload')">
<script>localStorage.setItem('pwned', 'script'); window.pwned = true; fetch('/pwned?script');</script>
<rect width="80" height="40" fill="tomato"/></svg>`;

const { url } = env();

await main("svg-script", async (page) => {
  const pwnedRequests = [];
  page.context().on("request", (r) => {
    if (r.url().includes("/pwned")) pwnedRequests.push(r.url());
  });
  await page.route("**/files/**", (route) => route.fulfill({ status: 200, contentType: "image/svg+xml", body: EVIL }));
  const turn = await send(page, "Create an SVG with the word Hello");
  await waitStatus(turn, ["succeeded"], 60000);
  const { img } = await waitImage(turn, "image/svg+xml");

  const pwned = async (p) => p.evaluate(() => [localStorage.getItem("pwned"), window.pwned === true]);
  let [stored, global] = await pwned(page);
  if (stored !== null || global) throw new Error(`the SVG's script ran in the page (pwned=${stored}, window.pwned=${global})`);

  // Its links download, as bytes that no browser renders.
  const links = turn.locator('[data-testid="artifact"][data-mime-type="image/svg+xml"] a[data-testid="artifact-download"]');
  const n = await links.count();
  if (!n) throw new Error("no download link for the SVG");
  for (let i = 0; i < n; i++) {
    const a = links.nth(i);
    await page.waitForFunction((el) => el.href.startsWith("blob:"), await a.elementHandle(), { timeout: 30000 });
    const [download, target] = await a.evaluate((el) => [el.getAttribute("download"), el.getAttribute("target")]);
    if (download === null || target === "_blank") throw new Error(`SVG link: download=${download} target=${target}; want a download, no new tab`);
    const pages = page.context().pages().length;
    const [dl] = await Promise.all([page.waitForEvent("download", { timeout: 30000 }), a.click()]);
    await dl.cancel();
    if (page.context().pages().length !== pages) throw new Error("following the SVG's link opened a tab");
  }

  // The image's own URL opened as a document.
  const src = await img.getAttribute("src");
  if (!src || src.startsWith("blob:")) throw new Error(`image src ${src && src.slice(0, 40)}, want no blob: URL of the page's origin for an SVG`);
  const tab = await page.context().newPage();
  await tab.goto(src, { waitUntil: "load" }).catch(() => {}); // Chromium may refuse to open a data: URL at all
  const [origin, ranThere] = await tab.evaluate(() => [self.origin, window.pwned === true]).catch(() => ["(not opened)", false]);
  await tab.close();
  [stored] = await pwned(page);
  if (stored !== null || (ranThere && origin === new URL(url).origin)) {
    throw new Error(`the SVG's script ran in the page's origin when its image was opened (pwned=${stored}, origin ${origin})`);
  }
  if (pwnedRequests.length) throw new Error(`the SVG's script called ${pwnedRequests.join(", ")}`);
  console.log(`svg-script: shown through <img>, ${n} link(s) download, its image opened as a document is of origin ${origin}, not ${new URL(url).origin}`);
});
