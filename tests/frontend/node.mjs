// node tests/frontend/node.mjs [atc.json]: the console bundle's pure functions under node
// (tests/frontend/logic.mjs), with what atc produces (tests/it/promises/frontend.rs writes atc.json).
// Prints each failure and exits 1 on any; prints "ok" otherwise.
import { readFileSync } from "node:fs";

const bundle = await import(new URL("../../examples/qwenpaw-plugin/atc/frontend.mjs", import.meta.url));
const { run } = await import(new URL("./logic.mjs", import.meta.url));
const atc = process.argv[2] ? JSON.parse(readFileSync(process.argv[2], "utf8")) : null;
const failures = run(bundle, atc);
for (const f of failures) console.error("FAILED: " + f);
if (failures.length) process.exit(1);
console.log("ok");
