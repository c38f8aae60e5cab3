// Validates ASL files with asl-validator (npm). Usage: node asl-validate.mjs FILE...
// Prints a JSON array [{file, isValid, errors}] and exits 0; the Go test judges.
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";

const require = createRequire(import.meta.url);
const validator = require("asl-validator");

const out = [];
for (const file of process.argv.slice(2)) {
  try {
    const def = JSON.parse(readFileSync(file, "utf8"));
    const { isValid, errors } = validator(def);
    out.push({ file, isValid, errors: errors.map((e) => e.message ?? JSON.stringify(e)) });
  } catch (err) {
    out.push({ file, isValid: false, errors: [String(err)] });
  }
}
process.stdout.write(JSON.stringify(out));
