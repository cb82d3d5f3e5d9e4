// Grammar-constrained against free generation through an OpenAI-compatible
// server (vt serve or llama-server), as bench_grammar does through vt's engine:
// each round sends CONCURRENCY requests of MAX_TOKENS tokens free, then the same
// under a GBNF grammar (the "grammar" field of /v1/completions, which both
// servers take), and the generated tokens/s of each are compared, the median
// over rounds. Sampling as bench_grammar's: temperature 1, no top-k / top-p /
// min-p, a seed per request, ignore_eos (a grammar run may end early where its
// text completes: the rate is what is compared). One warm-up round first.
// Usage: node bench_grammar_server.mjs BASE_URL CONCURRENCY MAX_TOKENS ROUNDS [FILE.gbnf]
// Prints one JSON line.
import { readFileSync } from 'node:fs';

const [base, concArg, maxArg, roundsArg, gfile] = process.argv.slice(2);
const CONC = Number(concArg ?? 1), MAX = Number(maxArg ?? 128), ROUNDS = Number(roundsArg ?? 5);
// bench_grammar.c's DEFAULT_GBNF: a JSON object of a fixed shape with unbounded strings
const DEFAULT_GBNF =
  'root ::= "{" ws "\\"name\\"" ws ":" ws string "," ws "\\"tags\\"" ws ":" ws "[" ws ' +
  '(string ("," ws string)*)? "]" ws "}" ws\n' +
  'string ::= "\\"" char* "\\"" ws\n' +
  'char ::= [^"\\\\\\x7F\\x00-\\x1F] | "\\\\" (["\\\\/bfnrt] | "u" [0-9a-fA-F]{4})\n' +
  'ws ::= | " " | "\\n" [ \\t]{0,20}\n';
const grammar = gfile ? readFileSync(gfile, 'utf8') : DEFAULT_GBNF;
let errors = 0, firstError = null;

async function one(i, withGrammar) {
  const body = { prompt: 'Answer in JSON:', max_tokens: MAX, temperature: 1, top_k: 0, top_p: 1, min_p: 0,
    seed: i + 1, ignore_eos: true };
  if (withGrammar) body.grammar = grammar;
  const res = await fetch(`${base}/v1/completions`, {
    method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body),
  });
  const j = await res.json();
  if (res.status !== 200) {
    errors++;
    firstError ??= `${res.status} ${JSON.stringify(j).slice(0, 200)}`;
    return 0;
  }
  return j.usage.completion_tokens;
}

// generated tokens/s of CONC requests sent together
async function round(withGrammar) {
  const t0 = performance.now();
  const n = await Promise.all(Array.from({ length: CONC }, (_, i) => one(i, withGrammar)));
  return n.reduce((a, b) => a + b, 0) / ((performance.now() - t0) / 1000);
}

const median = (a) => [...a].sort((x, y) => x - y)[Math.floor(a.length / 2)];
await round(true); // warm: the grammar's compiled form, the caches
const free = [], gram = [], ratio = [];
for (let r = 0; r < ROUNDS; r++) {
  free.push(await round(false));
  gram.push(await round(true));
  ratio.push(gram[r] / free[r]);
}
console.log(JSON.stringify({ concurrency: CONC, tokens: MAX, rounds: ROUNDS, free_tok_s: +median(free).toFixed(1),
  grammar_tok_s: +median(gram).toFixed(1), ratio: +median(ratio).toFixed(3), errors, first_error: firstError }));
