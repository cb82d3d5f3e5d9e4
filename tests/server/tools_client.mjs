// Tool calls and reasoning through the official `openai` npm package against a
// `vt serve` whose answers are canned (VT_TEST_CANNED_OUTPUT): the server's
// parser turns the format's output into tool_calls / reasoning_content, whole
// and streamed. Usage: node tools_client.mjs BASE_URL WANT_JSON
//   WANT_JSON: {"content": s|null, "reasoning": s|null, "calls": [[name, args], ...]}
// Prints one line per failed check and "N passed, M failed"; exits 1 on failure.
import OpenAI from 'openai';

const [baseURL, wantText] = process.argv.slice(2);
const want = JSON.parse(wantText);
const client = new OpenAI({ baseURL, apiKey: 'none', maxRetries: 0, timeout: 30000 });
let passed = 0, failed = 0;
function check(cond, what) {
  if (cond) passed++;
  else { failed++; console.log(`FAIL ${what}`); }
}
const tools = [
  { type: 'function', function: { name: 'get_weather', description: 'Weather of a city',
    parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } } },
  { type: 'function', function: { name: 'get_time', description: 'The time',
    parameters: { type: 'object', properties: {} } } },
];
const messages = [{ role: 'user', content: 'Weather in Paris?' }];
const base = { model: 'm', messages, tools, max_tokens: 64, temperature: 0 };
const wantFinish = want.calls.length ? 'tool_calls' : 'stop';

function same(what, gotContent, gotReasoning, gotCalls) {
  check((gotContent ?? null) === (want.content ?? null) || (want.content === null && gotContent === ''),
        `${what}: content ${JSON.stringify(gotContent)}, want ${JSON.stringify(want.content)}`);
  check((gotReasoning || null) === (want.reasoning || null),
        `${what}: reasoning ${JSON.stringify(gotReasoning)}, want ${JSON.stringify(want.reasoning)}`);
  check(gotCalls.length === want.calls.length, `${what}: ${gotCalls.length} calls, want ${want.calls.length}`);
  for (let i = 0; i < Math.min(gotCalls.length, want.calls.length); i++) {
    check(gotCalls[i].name === want.calls[i][0], `${what}: call ${i} name ${gotCalls[i].name}`);
    check(JSON.stringify(JSON.parse(gotCalls[i].arguments)) === JSON.stringify(want.calls[i][1]),
          `${what}: call ${i} arguments ${gotCalls[i].arguments}`);
    check(typeof gotCalls[i].id === 'string' && gotCalls[i].id.startsWith('call_'), `${what}: call ${i} id`);
  }
}

// whole
{
  const r = await client.chat.completions.create({ ...base, ignore_eos: true });
  const m = r.choices[0].message;
  same('whole', m.content, m.reasoning_content,
       (m.tool_calls || []).map(c => ({ id: c.id, name: c.function.name, arguments: c.function.arguments })));
  check(r.choices[0].finish_reason === wantFinish, `whole: finish_reason ${r.choices[0].finish_reason}`);
}
// streamed: deltas of function.arguments put together, as clients do
{
  const stream = await client.chat.completions.create({ ...base, ignore_eos: true, stream: true });
  let content = null, reasoning = null, finish = null, argChunks = 0;
  const calls = [];
  for await (const ch of stream) {
    const c = ch.choices[0];
    if (!c) continue;
    const d = c.delta || {};
    if (d.content) content = (content || '') + d.content;
    if (d.reasoning_content) reasoning = (reasoning || '') + d.reasoning_content;
    for (const t of d.tool_calls || []) {
      if (!calls[t.index]) calls[t.index] = { id: t.id, name: t.function?.name, arguments: '' };
      if (t.function?.arguments) { calls[t.index].arguments += t.function.arguments; argChunks++; }
    }
    if (c.finish_reason) finish = c.finish_reason;
  }
  same('stream', content, reasoning, calls);
  check(finish === wantFinish, `stream: finish_reason ${finish}`);
  if (want.calls.length) check(argChunks > want.calls.length, `stream: arguments came in ${argChunks} deltas`);
}
// tool_choice none: the same answer is not parsed for calls
if (want.calls.length) {
  const r = await client.chat.completions.create({ ...base, ignore_eos: true, tool_choice: 'none' });
  check(!r.choices[0].message.tool_calls && r.choices[0].finish_reason !== 'tool_calls',
        `tool_choice none: ${JSON.stringify(r.choices[0])}`);
}
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
