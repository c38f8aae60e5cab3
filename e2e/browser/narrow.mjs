// narrow.mjs: a phone-sized window (390 px, issue 15). The conversation
// list collapses into a drawer: hidden at first, opened with the ☰
// button, closed again by picking a conversation; the chat and composer
// fit the width.
//   CLIENTAGENT_URL=… CLIENTAGENT_TOKEN=… node e2e/browser/narrow.mjs
import { main, send, waitStatus, conversationId, shot } from "./lib.mjs";

await main(
  "narrow",
  async (page) => {
    const list = page.getByTestId("conversation-list");
    const toggle = page.getByTestId("drawer-toggle");
    if (await list.isVisible()) throw new Error("the conversation list is shown over the chat on a narrow screen");
    if (!(await toggle.isVisible())) throw new Error("no button opens the conversation list");

    const turn = await send(page, "Create an SVG with the word Narrow");
    await waitStatus(turn, ["succeeded"]);
    const cid = conversationId(page);
    const overflow = await page.evaluate(() => document.scrollingElement.scrollWidth - window.innerWidth);
    if (overflow > 0) throw new Error(`the page is ${overflow} px wider than the window`);
    if (!(await page.getByTestId("send").isVisible())) throw new Error("Send is not visible");
    console.log(`screenshot: ${await shot(page, "narrow-chat.png")}`);

    await toggle.click();
    await list.waitFor({ state: "visible", timeout: 30000 });
    if ((await toggle.getAttribute("aria-expanded")) !== "true") throw new Error("the ☰ button does not say the drawer is open");
    const row = page.locator(`[data-testid="conversation"][data-id="${cid}"]`);
    await row.waitFor({ state: "visible" });
    const box = await page.locator("#sidebar").boundingBox();
    if (!box || box.width > 390) throw new Error(`the drawer is ${box && box.width} px wide`);
    await page.waitForTimeout(300); // the drawer slides in
    console.log(`screenshot: ${await shot(page, "narrow-drawer.png")}`);

    await page.getByTestId("new-conversation").click();
    await list.waitFor({ state: "hidden", timeout: 30000 });
    await toggle.click();
    await row.locator(".conversation-open").click();
    await list.waitFor({ state: "hidden", timeout: 30000 });
    await page.locator(`[data-testid="turn"][data-turn-id="${await turn.getAttribute("data-turn-id")}"]`).waitFor({ state: "visible", timeout: 60000 });
    console.log("drawer opens with ☰ and closes when a conversation is picked");
  },
  { viewport: { width: 390, height: 844 } },
);
