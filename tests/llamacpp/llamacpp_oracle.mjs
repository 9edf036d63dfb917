#!/usr/bin/env node
// llamacpp_oracle.mjs: what llama.cpp computes on a GGUF file, as JSON, for tinylm's tests.
//
// usage: node llamacpp_oracle.mjs MODEL.gguf (--text TEXT | --ids "1 2 3") [-n N] [--positions P]
//             [--tokenize TEXT ...] [--also-ids "1 2 3" ...] [--threads T] [--nlc DIR] [--out FILE.json]
//
//   --text TEXT    the prompt as text: llama.cpp tokenizes it (its BOS first when the model asks for
//                  one, tokenizer.ggml.add_bos_token); the JSON gives that tokenization
//   --ids "1 2 3"  the prompt as token ids, used as they are (no BOS added)
//   -n N           tokens to generate greedily after the prompt (default 40; 0 = none); generation
//                  stops after an end-of-generation token, which is listed
//   --positions P  full-vocabulary log-probabilities at the first P positions of prompt + generated
//                  tokens (default 32)
//   --tokenize TEXT  also list llama.cpp's tokenization of TEXT (without BOS); may be repeated, and
//                  is all that is done when there is no --text or --ids
//   --also-ids "1 2 3"  also evaluate this sequence on its own (one batch, the history cleared first)
//                  and give the log-probabilities at each of its positions; may be repeated
//   --threads T    llama.cpp's threads (default 1: its workers busy-wait, which a shared machine
//                  punishes; on stories260K 2 threads give the same numbers bit for bit)
//   --nlc DIR      the folder holding node_modules/node-llama-cpp (default: this script's folder)
//   --out FILE     write the JSON there instead of standard output
//
// llama.cpp runs through node-llama-cpp (its prebuilt CPU build; nothing is built or downloaded)
// with the GPU off, flash attention off and the K and V caches in F32: llama.cpp's defaults (an
// F16 KV cache, CPU flash attention, which rounds to 16 bits even with an F32 cache) move the
// log-probabilities of tinylm's f32 exports by 1e-2 to 2e-2, and would hide what this oracle is
// used to find (with these settings: 2e-5).
//
// The JSON: {node_llama_cpp, llama_cpp_release, cpu_backend, threads, flash_attention,
// kv_cache: [K type, V type], vocab_size, bos, eos, add_bos, text_tokens (llama.cpp's tokenization
// of --text, without BOS), tokenizations ([{text, tokens}] of --tokenize), prompt (the ids
// evaluated), generated (greedy ids), eog (whether the last generated id ends generation), text
// (detokenized prompt + generated, without BOS), generated_text, batch: {positions, ids, logprobs}
// (one evaluation of the first P ids of prompt + generated, llama.cpp's prompt-processing path:
// logprobs[i][t] = log p(t | ids[0..i])), decode: {positions, logprobs} (the distributions the
// greedy loop chose from: the prompt's last position, then one-token decoding steps), also:
// [{ids, logprobs}] (of --also-ids)}. A
// log-probability is null where llama.cpp's float32 probability underflowed to 0. With only
// --tokenize: the fields up to tokenizations.
//
// Exit status: 0 done, 1 llama.cpp failed, 2 usage error, 3 node-llama-cpp is not installed (or
// this Node.js is older than it needs).
import fs from "node:fs";
import path from "node:path";
import {fileURLToPath, pathToFileURL} from "node:url";

const HERE = path.dirname(fileURLToPath(import.meta.url));
const NAME = "llamacpp_oracle";

function die(code, msg) {
    process.stderr.write(`${NAME}: ${msg}\n`);
    process.exit(code);
}

function idList(option, text) {
    const s = text.trim();
    if (!/^\d+(\s+\d+)*$/.test(s)) die(2, `${option} needs non-negative integers separated by spaces, got "${s}"`);
    return s.split(/\s+/).map(Number);
}

function parseArgs(argv) {
    const o = {model: null, text: null, ids: null, tokenize: [], also: [], n: 40, positions: 32, threads: 1, nlc: HERE,
        out: null};
    const count = (k, v, min) => {
        if (v === undefined || !/^\d+$/.test(v) || Number(v) < min) die(2, `${k} needs an integer >= ${min}, got ${v}`);
        return Number(v);
    };
    for (let i = 0; i < argv.length; i++) {
        const a = argv[i], v = argv[i + 1];
        const value = () => { if (v === undefined) die(2, `${a} needs a value`); i++; return v; };
        switch (a) {
            case "--text": o.text = value(); break;
            case "--ids": o.ids = idList(a, value()); break;
            case "--also-ids": o.also.push(idList(a, value())); break;
            case "--tokenize": o.tokenize.push(value()); break;
            case "-n": o.n = count(a, v, 0); i++; break;
            case "--positions": o.positions = count(a, v, 0); i++; break;
            case "--threads": o.threads = count(a, v, 1); i++; break;
            case "--nlc": o.nlc = value(); break;
            case "--out": o.out = value(); break;
            case "-h": case "--help":
                process.stdout.write(fs.readFileSync(fileURLToPath(import.meta.url), "utf8").split("\n").slice(1)
                    .filter((l, k, all) => all.slice(0, k + 1).every((x) => x.startsWith("//")))
                    .map((l) => l.slice(3)).join("\n") + "\n");
                process.exit(0);
            default:
                if (a.startsWith("-") || o.model) die(2, `unknown argument ${a} (--help)`);
                o.model = a;
        }
    }
    if (!o.model) die(2, "MODEL.gguf is required (--help)");
    if (o.text !== null && o.ids !== null) die(2, "give the prompt as one of --text and --ids, not both");
    if (o.text === null && o.ids === null && o.tokenize.length === 0) {
        die(2, "give a prompt (--text or --ids) or --tokenize");
    }
    return o;
}

// node-llama-cpp from DIR/node_modules; exit 3 with what to run when it is not there
async function importNodeLlamaCpp(dir) {
    const major = Number(process.versions.node.split(".")[0]);
    const pkg = path.join(dir, "node_modules", "node-llama-cpp");
    const install = `npm ci --prefix ${dir} --omit=optional --no-audit --no-fund`;
    let meta;
    try {
        meta = JSON.parse(fs.readFileSync(path.join(pkg, "package.json"), "utf8"));
    } catch {
        die(3, `node-llama-cpp is not installed in ${dir}/node_modules (install it with: ${install})`);
    }
    const need = /^>=\s*(\d+)/.exec(meta.engines?.node ?? "")?.[1];
    if (need && major < Number(need)) {
        die(3, `node-llama-cpp ${meta.version} needs Node.js >= ${need}; this is Node.js ${process.versions.node}`);
    }
    const entry = meta.exports?.["."]?.import ?? meta.exports?.["."]?.default ?? meta.main ?? "./dist/index.js";
    try {
        const file = path.join(pkg, typeof entry === "string" ? entry : entry.default);
        return {nlc: await import(pathToFileURL(file).href), version: meta.version};
    } catch (e) {
        die(3, `node-llama-cpp ${meta.version} in ${pkg} does not load: ${e?.message ?? e} (reinstall: ${install})`);
    }
}

// log p over the whole vocabulary from node-llama-cpp's probability map (token -> float32 p)
function logprobs(map, vocab) {
    const out = new Array(vocab).fill(null);
    for (const [tok, p] of map) {
        if (tok < 0 || tok >= vocab) throw new Error(`a probability for token ${tok}, outside the vocabulary`);
        out[tok] = p > 0 ? Math.log(p) : null;
    }
    return out;
}

async function main() {
    const o = parseArgs(process.argv.slice(2));
    if (!fs.existsSync(o.model)) die(2, `${o.model}: no such file`);
    const {nlc, version} = await importNodeLlamaCpp(path.resolve(o.nlc));
    const {getLlama, LlamaLogLevel, GgmlType} = nlc;

    let backend = null;
    const llama = await getLlama({
        gpu: false, build: "never", skipDownload: true, usePrebuiltBinaries: true, progressLogs: false,
        maxThreads: o.threads, logLevel: LlamaLogLevel.debug,
        logger: (level, message) => {
            const m = /load_backend: loaded CPU backend from (\S+)/.exec(message);
            if (m) backend = path.basename(m[1]).replace(/^libggml-cpu-?|\.so$/g, "") || "cpu";
            if (level === LlamaLogLevel.error || level === LlamaLogLevel.fatal) {
                process.stderr.write(`llama.cpp: ${message}`);
            }
        },
    });
    const model = await llama.loadModel({modelPath: o.model, gpuLayers: 0});
    llama.logLevel = LlamaLogLevel.warn;

    const bos = model.tokens.bos, eos = model.tokens.eos, addBos = model.tokens.shouldPrependBosToken;
    const textTokens = o.text !== null ? model.tokenize(o.text) : null;
    const tokenizations = o.tokenize.map((text) => ({text, tokens: model.tokenize(text)}));
    const common = {
        node_llama_cpp: version, llama_cpp_release: llama.llamaCppRelease?.release ?? null, build: llama.buildType,
        cpu_backend: backend, threads: o.threads, model: o.model, bos, eos, add_bos: addBos, tokenizations,
    };
    if (o.text === null && o.ids === null) return finish(o, common, [model, llama]);
    const prompt = o.ids ?? (addBos && bos !== null ? [bos, ...textTokens] : [...textTokens]);
    if (prompt.length === 0) die(2, "the prompt has no tokens");
    let vocab = 0;
    for (const _ of model.iterateAllTokens()) vocab++;  // eslint-disable-line no-unused-vars
    const bad = [prompt, ...o.also].flat().find((t) => t >= vocab);
    if (bad !== undefined) die(2, `token ${bad} is outside the vocabulary (${vocab} tokens)`);
    const context = await model.createContext({
        contextSize: Math.max(prompt.length + o.n + 1, o.positions + 1, ...o.also.map((a) => a.length + 1), 8),
        sequences: 1,
        threads: {ideal: o.threads, min: o.threads}, flashAttention: false,
        experimentalKvCacheKeyType: "F32", experimentalKvCacheValueType: "F32",
    });
    const typeName = (t) => (GgmlType && GgmlType[t] !== undefined && typeof t === "number" ? GgmlType[t] : String(t));
    const kv = [typeName(context.kvCacheKeyType), typeName(context.kvCacheValueType)];
    if (context.flashAttention !== false || kv[0] !== "F32" || kv[1] !== "F32") {
        die(1, `the context did not take the settings asked for: flash attention ${context.flashAttention}, ` +
            `KV cache ${kv.join("/")} (want false, F32/F32)`);
    }
    const seq = context.getSequence();

    // the greedy loop, with the distribution each token was chosen from
    const generated = [], decode = [];
    let eog = false;
    if (o.n > 0) {
        const steps = seq.evaluateWithMetadata(prompt, {probabilities: true}, {temperature: 0, yieldEogToken: true});
        for await (const r of steps) {
            generated.push(r.token);
            if (decode.length < o.positions) decode.push(logprobs(r.probabilities, vocab));
            if (model.isEogToken(r.token)) { eog = true; break; }
            if (generated.length >= o.n) break;
        }
    }

    // ids evaluated in one batch from an empty history (the prompt-processing path): log p at each position
    const evaluateBatch = async (ids) => {
        await seq.clearHistory();
        if (ids.length === 0) return [];
        const res = await seq.controlledEvaluate(ids.map((t) => [t, {generateNext: {probabilities: true}}]));
        return ids.map((_, i) => {
            const p = res[i]?.next?.probabilities;
            if (!p) die(1, `no probabilities at position ${i} of the batch`);
            return logprobs(p, vocab);
        });
    };
    // the first P positions of prompt + generated
    const all = [...prompt, ...generated].slice(0, o.positions);
    const batch = await evaluateBatch(all);
    const also = [];
    for (const ids of o.also) also.push({ids, logprobs: await evaluateBatch(ids)});

    const withoutBos = prompt[0] === bos ? prompt.slice(1) : prompt;
    return finish(o, {
        ...common, flash_attention: context.flashAttention, kv_cache: kv, vocab_size: vocab,
        text_tokens: textTokens, prompt, generated, eog,
        text: model.detokenize([...withoutBos, ...generated]),
        generated_text: model.detokenize(generated, false, withoutBos),
        batch: {positions: all.length, ids: all, logprobs: batch},
        decode: {positions: decode.map((_, k) => prompt.length - 1 + k), logprobs: decode},
        also,
    }, [context, model, llama]);
}

async function finish(o, out, owned) {
    const json = JSON.stringify(out) + "\n";
    if (o.out) fs.writeFileSync(o.out, json); else process.stdout.write(json);
    for (const x of owned) await x.dispose();
}

main().catch((e) => die(1, e?.stack ?? String(e)));
