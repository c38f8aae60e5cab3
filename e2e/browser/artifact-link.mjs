// artifact-link.mjs (against fake-api.mjs, which downloads like AWS: the
// artifact route answers 302 to a signed link, and the link refuses a
// request carrying an Authorization header, as S3 does): the page asks for
// the link (?redirect=false, with its token) and fetches the link without
// the token, so an artifact shows outside the local stack too.
import { env, main, send, waitStatus, waitImage } from "./lib.mjs";

const { url } = env();

await main("artifact-link", async (page) => {
  const turn = await send(page, "Create an SVG with the word Hello");
  await waitStatus(turn, ["succeeded"], 30000);
  await waitImage(turn, "image/svg+xml");
  const res = await fetch(url + "/_fake/requests");
  if (!res.ok) throw new Error(`/_fake/requests: HTTP ${res.status} (run this check against e2e/browser/fake-api.mjs)`);
  const { requests } = await res.json();
  const asked = requests.filter((r) => r.path.includes("/artifacts/"));
  const fetched = requests.filter((r) => r.path.startsWith("/_fake/files/"));
  if (!asked.length || asked.some((r) => !r.path.endsWith("?redirect=false") || !r.authorization)) {
    throw new Error(`artifact requests ${JSON.stringify(asked)}, want ?redirect=false with the token`);
  }
  if (!fetched.length || fetched.some((r) => r.authorization)) {
    throw new Error(`link fetches ${JSON.stringify(fetched)}, want them without an Authorization header`);
  }
  console.log(`artifact: ${asked.length} link request(s), ${fetched.length} link fetch(es) without the token`);
});
