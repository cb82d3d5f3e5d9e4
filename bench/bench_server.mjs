// Server throughput: TOTAL completion requests at CONCURRENCY against an
// OpenAI-compatible server (vt serve or llama-server), greedy, a fixed number of
// generated tokens each (ignore_eos), prompts that differ per request.
// Usage: node bench_server.mjs BASE_URL CONCURRENCY TOTAL MAX_TOKENS
// Prints one JSON line: requests/s, generated tokens/s, mean/p50/p95 latency.
const [base, concArg, totalArg, maxArg] = process.argv.slice(2);
const CONC = Number(concArg ?? 4), TOTAL = Number(totalArg ?? 32), MAX = Number(maxArg ?? 32);
const words = ['river', 'stone', 'lamp', 'garden', 'winter', 'silver', 'market', 'harbor'];
let next = 0, tokens = 0, errors = 0, firstError = null;
const lat = [];
async function worker() {
  while (next < TOTAL) {
    const i = next++;
    const prompt = `Request ${i}: the ${words[i % 8]} and the ${words[(i * 3) % 8]} were`;
    const t0 = performance.now();
    const res = await fetch(`${base}/v1/completions`, {
      method: 'POST', headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ prompt, max_tokens: MAX, temperature: 0, ignore_eos: true }),
    });
    const body = await res.json();
    if (res.status !== 200) {
      errors++;
      firstError ??= `${res.status} ${JSON.stringify(body).slice(0, 200)}`;
      continue;
    }
    tokens += body.usage.completion_tokens;
    lat.push(performance.now() - t0);
  }
}
const t0 = performance.now();
await Promise.all(Array.from({ length: CONC }, worker));
const s = (performance.now() - t0) / 1000;
lat.sort((a, b) => a - b);
const q = (p) => lat.length ? lat[Math.min(lat.length - 1, Math.floor(p * lat.length))] : 0;
console.log(JSON.stringify({ concurrency: CONC, requests: TOTAL, errors, seconds: +s.toFixed(2),
  req_per_s: +(lat.length / s).toFixed(3), gen_tok_per_s: +(tokens / s).toFixed(2),
  lat_ms_mean: +(lat.reduce((a, b) => a + b, 0) / Math.max(1, lat.length)).toFixed(1),
  lat_ms_p50: +q(0.5).toFixed(1), lat_ms_p95: +q(0.95).toFixed(1), first_error: firstError }));
