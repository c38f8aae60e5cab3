// popelnase.mjs: the example of docs/design.md §2 end to end in a real browser (docs/design.md §1,
// §2): "Create a PNG image with the word Popelnase" must chain
// create_svg_artifact → convert_svg_to_png and show the PNG inline.
//   CLIENTAGENT_URL=… CLIENTAGENT_TOKEN=… node e2e/browser/popelnase.mjs
import { main, send, waitStatus, waitImage, shot } from "./lib.mjs";

await main("popelnase", async (page) => {
  const turn = await send(page, "Create a PNG image with the word Popelnase");
  await waitStatus(turn, ["succeeded"]);
  const { naturalWidth } = await waitImage(turn, "image/png");

  const steps = await turn.getByTestId("step").evaluateAll((els) => els.map((e) => `${e.dataset.tool}:${e.dataset.status}`));
  for (const want of ["create_svg_artifact:succeeded", "convert_svg_to_png:succeeded"]) {
    if (!steps.includes(want)) throw new Error(`steps ${steps.join(", ")} lack ${want}`);
  }
  if (steps.indexOf("create_svg_artifact:succeeded") > steps.indexOf("convert_svg_to_png:succeeded")) {
    throw new Error(`steps out of order: ${steps.join(", ")}`);
  }
  const reply = (await turn.getByTestId("reply").innerText()).trim();
  if (!reply) throw new Error("empty reply");
  const href = await turn.locator('[data-testid="artifact"][data-mime-type="image/png"] [data-testid="artifact-download"]').getAttribute("href");
  if (!href || !href.startsWith("blob:")) throw new Error(`PNG download link = ${href}, want a blob: URL`);

  console.log(`steps: ${steps.join(", ")}; png naturalWidth ${naturalWidth}; reply: ${reply}`);
  console.log(`screenshot: ${await shot(page, "popelnase.png")}`);
});
