// Evaluates JSONata expressions with the npm jsonata package (2.0.6, the
// version AWS Step Functions runs). Reads {"cases":[{"expr","bindings"}]} on
// stdin; writes [{"value"} | {"undefined":true} | {"error"}] on stdout.
import jsonata from "jsonata";

let input = "";
for await (const chunk of process.stdin) input += chunk;
const { cases } = JSON.parse(input);
const out = [];
for (const c of cases) {
  try {
    const v = await jsonata(c.expr).evaluate(undefined, c.bindings);
    out.push(v === undefined ? { undefined: true } : { value: JSON.parse(JSON.stringify(v)) });
  } catch (err) {
    out.push({ error: String(err.message ?? err) });
  }
}
process.stdout.write(JSON.stringify(out));
