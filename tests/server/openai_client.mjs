// The official `openai` npm package against a running `vt serve`, used as a user
// would. Usage: node openai_client.mjs BASE_URL API_KEY
// Prints one line per failed check and "N passed, M failed"; exits 1 on failure.
import OpenAI from 'openai';

const [baseURL, apiKey] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 30000 });
let passed = 0, failed = 0;
function check(cond, what) {
  if (cond) passed++;
  else { failed++; console.log(`FAIL ${what}`); }
}
async function expectError(what, status, fn) {
  try {
    await fn();
    check(false, `${what}: no error`);
  } catch (e) {
    check(e instanceof OpenAI.APIError && e.status === status,
          `${what}: got ${e.constructor.name} status ${e.status} (${e.message}), want ${status}`);
    return e;
  }
}

const story = [{ role: 'system', content: 'You tell stories.' },
               { role: 'user', content: 'Tell me about a cat.' }];

// models
const models = await client.models.list();
const model = models.data[0]?.id;
check(model === 'stories260K.gguf', `models.list: ${JSON.stringify(models.data)}`);

// chat, whole
const chat = await client.chat.completions.create({ model, messages: story, max_tokens: 24, temperature: 0 });
const chatText = chat.choices[0].message.content;
check(chat.object === 'chat.completion' && chat.choices.length === 1, 'chat: object and one choice');
check(chat.choices[0].message.role === 'assistant' && typeof chatText === 'string' && chatText.length > 0,
      `chat: assistant content ${JSON.stringify(chatText)}`);
check(['stop', 'length'].includes(chat.choices[0].finish_reason), `chat: finish ${chat.choices[0].finish_reason}`);
check(chat.usage.prompt_tokens > 0 && chat.usage.completion_tokens > 0 && chat.usage.completion_tokens <= 24 &&
      chat.usage.total_tokens === chat.usage.prompt_tokens + chat.usage.completion_tokens,
      `chat: usage ${JSON.stringify(chat.usage)}`);
check(chat.timings && chat.timings.prompt_n > 0 && chat.timings.predicted_n === chat.usage.completion_tokens,
      `chat: timings ${JSON.stringify(chat.timings)}`);

// chat, streamed: the same greedy text, role first, finish last, then usage
const stream = await client.chat.completions.create({
  model, messages: story, max_tokens: 24, temperature: 0, stream: true, stream_options: { include_usage: true } });
let streamed = '', chunks = 0, firstRole = null, finish = null, usage = null, afterFinish = 0;
for await (const c of stream) {
  chunks++;
  if (c.usage) { usage = c.usage; check(c.choices.length === 0, 'chat stream: usage chunk has no choices'); continue; }
  const ch = c.choices[0];
  if (chunks === 1) firstRole = ch.delta.role;
  if (finish) afterFinish++;
  if (ch.delta.content) streamed += ch.delta.content;
  if (ch.finish_reason) finish = ch.finish_reason;
  check(c.object === 'chat.completion.chunk', `chat stream: object ${c.object}`);
}
check(firstRole === 'assistant', `chat stream: first delta role ${firstRole}`);
check(streamed === chatText, `chat stream text ${JSON.stringify(streamed)} != whole ${JSON.stringify(chatText)}`);
check(finish === chat.choices[0].finish_reason && afterFinish === 0, `chat stream: finish ${finish}`);
check(usage && usage.completion_tokens === chat.usage.completion_tokens && usage.prompt_tokens === chat.usage.prompt_tokens,
      `chat stream: usage ${JSON.stringify(usage)}`);
check(chunks >= 4, `chat stream: ${chunks} chunks`);

// completions, whole and streamed
const prompt = 'Once upon a time';
const comp = await client.completions.create({ model, prompt, max_tokens: 20, temperature: 0 });
const compText = comp.choices[0].text;
check(comp.object === 'text_completion' && compText.length > 0, `completion: ${JSON.stringify(comp.choices)}`);
check(comp.usage.completion_tokens === 20 && comp.choices[0].finish_reason === 'length',
      `completion: usage ${JSON.stringify(comp.usage)} finish ${comp.choices[0].finish_reason}`);
let compStreamed = '', compFinish = null;
for await (const c of await client.completions.create({ model, prompt, max_tokens: 20, temperature: 0, stream: true })) {
  compStreamed += c.choices[0]?.text ?? '';
  if (c.choices[0]?.finish_reason) compFinish = c.choices[0].finish_reason;
}
check(compStreamed === compText, `completion stream ${JSON.stringify(compStreamed)} != ${JSON.stringify(compText)}`);
check(compFinish === 'length', `completion stream finish ${compFinish}`);

// token-id prompt gives the same as the text prompt
const toks = await (await fetch(baseURL.replace(/\/v1$/, '') + '/tokenize', {
  method: 'POST', headers: { Authorization: `Bearer ${apiKey}` },
  body: JSON.stringify({ content: prompt, add_special: true }) })).json();
const compIds = await client.completions.create({ model, prompt: toks.tokens, max_tokens: 20, temperature: 0 });
check(compIds.choices[0].text === compText, `token-id prompt: ${JSON.stringify(compIds.choices[0].text)}`);

// stop strings: the text before the match is kept, finish_reason stop
const stopped = await client.completions.create({ model, prompt, max_tokens: 60, temperature: 0, stop: ['.'] });
const full = await client.completions.create({ model, prompt, max_tokens: 60, temperature: 0 });
const dot = full.choices[0].text.indexOf('.');
check(dot > 0 && stopped.choices[0].text === full.choices[0].text.slice(0, dot) &&
      stopped.choices[0].finish_reason === 'stop',
      `stop: ${JSON.stringify(stopped.choices[0])} vs ${JSON.stringify(full.choices[0].text)}`);

// logprobs (chat: bool + top_logprobs; completions: integer)
const lp = await client.chat.completions.create({ model, messages: story, max_tokens: 8, temperature: 0,
                                                  logprobs: true, top_logprobs: 3 });
const content = lp.choices[0].logprobs?.content ?? [];
check(content.length === lp.usage.completion_tokens, `chat logprobs: ${content.length} entries`);
check(content.every(e => e.logprob <= 0 && e.top_logprobs.length === 3 && Array.isArray(e.bytes) &&
                          e.top_logprobs[0].logprob >= e.top_logprobs[2].logprob &&
                          Math.abs(e.top_logprobs[0].logprob - e.logprob) < 1e-4),
      `chat logprobs entries: ${JSON.stringify(content[0])}`);
const clp = await client.completions.create({ model, prompt, max_tokens: 5, temperature: 0, logprobs: 2 });
const l = clp.choices[0].logprobs;
check(l && l.tokens.length === 5 && l.token_logprobs.length === 5 && l.top_logprobs.length === 5 &&
      Object.keys(l.top_logprobs[0]).length >= 1 && l.text_offset[0] === 0,
      `completion logprobs: ${JSON.stringify(l)}`);

// n choices, seeded sampling is reproducible
const nres = await client.completions.create({ model, prompt, max_tokens: 12, temperature: 1, seed: 5, n: 3 });
const nres2 = await client.completions.create({ model, prompt, max_tokens: 12, temperature: 1, seed: 5, n: 3 });
check(nres.choices.length === 3 && nres.choices.map(c => c.index).join() === '0,1,2', 'n=3: three choices');
check(nres.choices.map(c => c.text).join('|') === nres2.choices.map(c => c.text).join('|'), 'seeded n=3 reproducible');
check(nres.usage.completion_tokens === 36, `n=3 usage ${JSON.stringify(nres.usage)}`);

// errors come back as the SDK's typed errors
const e400 = await expectError('temperature 5', 400, () =>
  client.chat.completions.create({ model, messages: story, temperature: 5 }));
check(e400 && /temperature/.test(e400.message), `400 message names the field: ${e400?.message}`);
await expectError('wrong key', 401, () =>
  new OpenAI({ baseURL, apiKey: 'wrong', maxRetries: 0 }).models.list());

// a client that gives up mid-stream: the server carries on
const ac = new AbortController();
try {
  const s = await client.chat.completions.create({ model, messages: story, max_tokens: 400, temperature: 0,
                                                   stream: true }, { signal: ac.signal });
  let n = 0;
  for await (const c of s) { if (++n === 3) ac.abort(); }
} catch (e) { /* the abort surfaces as an error */ }
const after = await client.completions.create({ model, prompt, max_tokens: 20, temperature: 0 });
check(after.choices[0].text === compText, 'after an aborted stream the server answers the same');

// concurrent streamed greedy requests return the same text as each alone
const prompts = ['Once upon a time', 'The little dog', 'Lily wanted to', 'One day, a boy', 'The sun was',
                 'Tom and Sue', 'A big red ball', 'In the park'];
const alone = [];
for (const p of prompts) {
  alone.push((await client.completions.create({ model, prompt: p, max_tokens: 40, temperature: 0 })).choices[0].text);
}
const together = await Promise.all(prompts.map(async p => {
  let t = '';
  for await (const c of await client.completions.create({ model, prompt: p, max_tokens: 40, temperature: 0, stream: true })) {
    t += c.choices[0]?.text ?? '';
  }
  return t;
}));
prompts.forEach((p, i) => check(together[i] === alone[i],
  `concurrent '${p}': ${JSON.stringify(together[i])} != alone ${JSON.stringify(alone[i])}`));

console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
