// A bounded load test against a running `vt serve` (node 20, no packages):
// TOTAL requests at CONCURRENCY, mixing whole and streamed completions and
// chats, with some clients disconnecting early (mid-stream and mid-wait).
// Usage: node load.mjs BASE_URL [TOTAL=240] [CONCURRENCY=16]
// Checks: no 5xx, every finished response valid; prints a JSON summary line.
const [base, totalArg, concArg] = process.argv.slice(2);
const TOTAL = Number(totalArg ?? 240), CONC = Number(concArg ?? 16);
let passed = 0, failed = 0;
const fails = [];
function check(cond, what) {
  if (cond) passed++;
  else { failed++; if (fails.length < 20) fails.push(what); }
}
const stats = { ok: 0, aborted: 0, status: {}, tokens: 0 };
const prompts = ['Once upon a time', 'The little dog', 'Lily wanted to', 'One day, a boy', 'The sun was'];

async function parseSSE(res, abortAfter, ac) {
  const reader = res.body.getReader();
  const dec = new TextDecoder();
  let buf = '', events = [], done = false;
  for (;;) {
    const { value, done: end } = await reader.read();
    if (end) break;
    buf += dec.decode(value, { stream: true });
    let i;
    while ((i = buf.indexOf('\n\n')) >= 0) {
      const ev = buf.slice(0, i); buf = buf.slice(i + 2);
      if (!ev.startsWith('data: ')) throw new Error(`bad SSE event ${JSON.stringify(ev)}`);
      const data = ev.slice(6);
      if (data === '[DONE]') { done = true; continue; }
      events.push(JSON.parse(data));
      if (abortAfter && events.length >= abortAfter) { ac.abort(); return { events, done, aborted: true }; }
    }
  }
  if (buf.length) throw new Error(`trailing SSE bytes ${JSON.stringify(buf)}`);
  return { events, done, aborted: false };
}

async function one(i) {
  const kind = i % 6; // 0,1 whole; 2,3 streamed; 4 stream dropped early; 5 whole dropped early
  const chat = i % 2 === 1;
  const prompt = prompts[i % prompts.length];
  const body = { max_tokens: 16 + (i % 5) * 16, temperature: i % 3 === 0 ? 0 : 0.8, seed: i };
  if (chat) body.messages = [{ role: 'user', content: prompt }]; else body.prompt = prompt;
  const stream = kind === 2 || kind === 3 || kind === 4;
  if (stream) { body.stream = true; body.stream_options = { include_usage: true }; }
  if (kind === 4 || kind === 5) body.max_tokens = 400;
  const ac = new AbortController();
  let timer = null;
  if (kind === 5) timer = setTimeout(() => ac.abort(), 2 + (i % 7));
  try {
    const res = await fetch(`${base}/v1/${chat ? 'chat/completions' : 'completions'}`, {
      method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body), signal: ac.signal });
    stats.status[res.status] = (stats.status[res.status] ?? 0) + 1;
    check(res.status < 500, `request ${i}: status ${res.status}`);
    if (res.status !== 200) { await res.text(); return; }
    if (stream) {
      check((res.headers.get('content-type') ?? '').startsWith('text/event-stream'), `request ${i}: content-type`);
      const r = await parseSSE(res, kind === 4 ? 3 : 0, ac);
      if (r.aborted) { stats.aborted++; return; }
      const usage = r.events.at(-1)?.usage;
      const content = r.events.filter(e => e.choices?.length).map(e =>
        chat ? (e.choices[0].delta.content ?? '') : e.choices[0].text).join('');
      const fin = r.events.filter(e => e.choices?.[0]?.finish_reason).length;
      check(r.done && usage && usage.completion_tokens > 0 && usage.completion_tokens <= body.max_tokens && fin === 1,
            `request ${i}: stream done=${r.done} usage=${JSON.stringify(usage)} finishes=${fin}`);
      check(typeof content === 'string', `request ${i}: content`);
      stats.tokens += usage?.completion_tokens ?? 0;
    } else {
      const j = await res.json();
      const c = j.choices?.[0];
      const text = chat ? c?.message?.content : c?.text;
      check(typeof text === 'string' && j.usage?.completion_tokens > 0 && j.usage.completion_tokens <= body.max_tokens &&
            ['stop', 'length'].includes(c.finish_reason), `request ${i}: body ${JSON.stringify(j).slice(0, 200)}`);
      stats.tokens += j.usage?.completion_tokens ?? 0;
    }
    stats.ok++;
  } catch (e) {
    if (ac.signal.aborted) { stats.aborted++; return; }
    check(false, `request ${i}: ${e.message}`);
  } finally {
    if (timer) clearTimeout(timer);
  }
}

const t0 = Date.now(); // timing: printed only, never asserted
let next = 0;
await Promise.all(Array.from({ length: CONC }, async () => {
  while (next < TOTAL) await one(next++);
}));
const secs = (Date.now() - t0) / 1000; // timing: printed only
check(stats.aborted > 0 && stats.ok > TOTAL / 2, `mix: ${stats.ok} ok, ${stats.aborted} aborted`);
for (const f of fails) console.log(`FAIL ${f}`);
console.log(JSON.stringify({ total: TOTAL, concurrency: CONC, seconds: secs, requests_per_s: TOTAL / secs,
                             tokens_per_s: stats.tokens / secs, ...stats }));
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
