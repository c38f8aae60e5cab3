// approval-stale.mjs: an answer to an approval that changed since the page
// showed it is refused (docs/api/openapi.yaml: 409 stale_approval, nothing runs); the page
// must read the turn again, show the new approval with a short message, and
// an answer to that one goes through. The change is made in the browser:
// until the page answers, every read of the turn shows it an older approval
// id (as if a specialist's input-required answer had replaced the batch
// after the page last polled).
//   CLIENTAGENT_URL=… CLIENTAGENT_TOKEN=… node e2e/browser/approval-stale.mjs
import { main, send, waitStatus, waitImage, shot } from "./lib.mjs";

const OLD_ID = "ap_stale_in_browser";

await main("approval-stale", async (page) => {
  const inputBodies = [];
  page.on("request", (r) => {
    if (r.method() === "POST" && /\/turns\/[^/]+\/input$/.test(new URL(r.url()).pathname)) inputBodies.push(r.postDataJSON());
  });

  const first = await send(page, "Create an SVG with the word Hello");
  await waitStatus(first, ["succeeded"]);
  await waitImage(first, "image/svg+xml");

  await page.route(/\/turns\/[^/]+$/, async (route) => {
    if (route.request().method() !== "GET" || inputBodies.length) return route.fallback();
    const res = await route.fetch();
    const body = await res.json();
    if (body.approval) body.approval.id = OLD_ID;
    await route.fulfill({ response: res, json: body });
  });
  const turn = await send(page, "Publish it to web");
  await waitStatus(turn, ["awaiting_approval"]);
  const panel = turn.getByTestId("approval");
  await panel.waitFor({ state: "visible" });
  if ((await panel.getAttribute("data-approval-id")) !== OLD_ID) throw new Error("the page does not show the approval id it read");

  await panel.getByTestId("approve").click();
  // The page reads the turn again by itself and shows the current approval.
  await page.waitForFunction(
    (old) => {
      const p = document.querySelector('[data-testid="approval"]');
      return p && p.dataset.approvalId && p.dataset.approvalId !== old;
    },
    OLD_ID,
    { timeout: 60000 },
  );
  const msg = (await panel.getByTestId("approval-error").innerText()).trim();
  if (!/approval changed/i.test(msg)) throw new Error(`after the 409 the page says "${msg}", want "The approval changed; please review it again."`);
  if ((await turn.getByTestId("turn-status").getAttribute("data-status")) !== "awaiting_approval") throw new Error("turn left awaiting_approval after a stale answer");
  const steps = await turn.getByTestId("step").evaluateAll((els) => els.map((e) => `${e.dataset.tool}:${e.dataset.status}`));
  if (steps.some((s) => s.startsWith("publish_artifact:"))) throw new Error(`a stale approval ran something: ${steps.join(", ")}`);
  const currentID = await panel.getAttribute("data-approval-id");
  console.log(`stale answer refused; page says: ${msg}`);
  console.log(`screenshot: ${await shot(page, "approval-stale.png")}`);

  await panel.getByTestId("approve").click();
  await waitStatus(turn, ["succeeded"]);
  const ids = inputBodies.map((b) => b.approval && b.approval.id);
  if (JSON.stringify(ids) !== JSON.stringify([OLD_ID, currentID])) throw new Error(`input requests carried ids ${JSON.stringify(ids)}, want [${OLD_ID}, ${currentID}]`);
  const done = await turn.getByTestId("step").evaluateAll((els) => els.map((e) => `${e.dataset.tool}:${e.dataset.status}`));
  if (!done.includes("publish_artifact:succeeded")) throw new Error(`steps ${done.join(", ")} lack publish_artifact:succeeded`);
  console.log(`ids sent: ${ids.join(", ")}; steps: ${done.join(", ")}`);
});
