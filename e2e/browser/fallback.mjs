// fallback.mjs: without the event stream (a proxy that refuses it, an
// older API) the page follows turns by polling (issue 15): every request
// to …/events fails, and a turn still runs to its image and reply.
//   CLIENTAGENT_URL=… CLIENTAGENT_TOKEN=… node e2e/browser/fallback.mjs
import { main, send, waitStatus, waitImage } from "./lib.mjs";

await main("fallback", async (page) => {
  let refused = 0;
  await page.route(/\/v1\/conversations\/[^/]+\/events/, (route) => {
    refused++;
    return route.abort("connectionrefused");
  });
  const turn = await send(page, "Create an SVG with the word Polled");
  await waitStatus(turn, ["succeeded"]);
  await waitImage(turn, "image/svg+xml");
  const reply = (await turn.getByTestId("reply").innerText()).trim();
  if (!reply.includes("Polled")) throw new Error(`reply "${reply}" does not mention Polled`);
  if (!refused) throw new Error("the page never asked for the event stream");
  console.log(`event stream refused ${refused} time(s); the turn was polled to: ${reply}`);
});
