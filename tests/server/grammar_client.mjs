// Structured output through the official `openai` npm package against vt serve:
// response_format json_schema (whole and streamed), json_object, a GBNF grammar,
// and tool_choice forcing a call ("required" and a named function), at
// temperature 1 so that the grammar alone makes the shape. Usage:
// node grammar_client.mjs BASE_URL [tools] (tools: only the forced tool calls,
// for a server whose template has another tool-call format). Prints one line
// per failed check and "N passed, M failed"; exits 1 on failure.
import OpenAI from 'openai';

const [baseURL, only] = process.argv.slice(2);
const all = only !== 'tools';
const client = new OpenAI({ baseURL, apiKey: 'none', maxRetries: 0, timeout: 60000 });
let passed = 0, failed = 0;
function check(cond, what) {
  if (cond) passed++;
  else { failed++; console.log(`FAIL ${what}`); }
}
const messages = [{ role: 'user', content: 'Describe a person.' }];
const base = { model: 'm', messages, max_tokens: 600, temperature: 1 };
const schema = {
  type: 'object',
  properties: {
    name: { type: 'string', maxLength: 10 },
    age: { type: 'integer' },
    role: { enum: ['admin', 'user'] },
    tags: { type: 'array', items: { type: 'string', maxLength: 5 }, maxItems: 2 },
  },
  required: ['name', 'age', 'role'],
  additionalProperties: false,
};
function valid(o) {
  return o && typeof o === 'object' && typeof o.name === 'string' && [...o.name].length <= 10 &&
    Number.isInteger(o.age) && ['admin', 'user'].includes(o.role) &&
    (o.tags === undefined || (Array.isArray(o.tags) && o.tags.length <= 2)) &&
    Object.keys(o).every(k => ['name', 'age', 'role', 'tags'].includes(k));
}
const rf = { type: 'json_schema', json_schema: { name: 'person', schema, strict: true } };
for (let seed = 1; all && seed <= 5; seed++) {
  const r = await client.chat.completions.create({ ...base, seed, response_format: rf });
  let o = null;
  try { o = JSON.parse(r.choices[0].message.content); } catch (e) { /* checked below */ }
  check(valid(o), `json_schema seed ${seed}: ${r.choices[0].message.content}`);
  check(r.choices[0].finish_reason === 'stop', `json_schema seed ${seed}: finish ${r.choices[0].finish_reason}`);
}
if (all) {
  const stream = await client.chat.completions.create({ ...base, seed: 9, response_format: rf, stream: true });
  let text = '';
  for await (const c of stream) text += c.choices[0]?.delta?.content || '';
  let o = null;
  try { o = JSON.parse(text); } catch (e) { /* checked below */ }
  check(valid(o), `json_schema streamed: ${text}`);
}
if (all) {
  const r = await client.chat.completions.create({ ...base, seed: 3, response_format: { type: 'json_object' },
    logit_bias: { '1': 5 } });
  let o = null;
  try { o = JSON.parse(r.choices[0].message.content); } catch (e) { /* checked below */ }
  check(o !== null && typeof o === 'object' && !Array.isArray(o) || r.choices[0].finish_reason === 'length',
        `json_object: ${r.choices[0].message.content}`);
}
if (all) {
  const r = await client.completions.create({ model: 'm', prompt: 'Answer:', max_tokens: 50, temperature: 1, seed: 4,
    grammar: 'root ::= ("yes" | "no") " because " [a-z]{1,8} "."' });
  check(/^(yes|no) because [a-z]{1,8}\.$/.test(r.choices[0].text), `grammar: ${JSON.stringify(r.choices[0].text)}`);
}
const tools = [
  { type: 'function', function: { name: 'get_weather', description: 'Weather of a city',
    parameters: { type: 'object', properties: { city: { type: 'string', maxLength: 12 },
      unit: { enum: ['C', 'F'] } }, required: ['city', 'unit'] } } },
  { type: 'function', function: { name: 'get_time', description: 'The time' } },
];
for (const [what, tool_choice] of [['required', 'required'],
  ['named', { type: 'function', function: { name: 'get_weather' } }]]) {
  for (let seed = 1; seed <= 3; seed++) {
    const r = await client.chat.completions.create({ ...base, seed, tools, tool_choice });
    const c = r.choices[0], calls = c.message.tool_calls || [];
    check(c.finish_reason === 'tool_calls' && calls.length === 1, `${what} ${seed}: ${JSON.stringify(c)}`);
    if (!calls.length) continue;
    const f = calls[0].function;
    let a = null;
    try { a = JSON.parse(f.arguments); } catch (e) { /* checked below */ }
    const ok = f.name === 'get_weather' ? a && typeof a.city === 'string' && ['C', 'F'].includes(a.unit)
      : f.name === 'get_time' && a && Object.keys(a).length === 0;
    check(ok && (what === 'required' || f.name === 'get_weather'), `${what} ${seed}: ${f.name} ${f.arguments}`);
  }
}
// streamed: the call arrives as deltas
{
  const stream = await client.chat.completions.create({ ...base, seed: 5, tools, stream: true,
    tool_choice: { type: 'function', function: { name: 'get_weather' } } });
  let name = '', args = '', finish = null;
  for await (const c of stream) {
    const d = c.choices[0]?.delta;
    for (const t of d?.tool_calls || []) {
      if (t.function?.name) name += t.function.name;
      if (t.function?.arguments) args += t.function.arguments;
    }
    if (c.choices[0]?.finish_reason) finish = c.choices[0].finish_reason;
  }
  let a = null;
  try { a = JSON.parse(args); } catch (e) { /* checked below */ }
  check(name === 'get_weather' && a && typeof a.city === 'string' && finish === 'tool_calls',
        `named streamed: ${name} ${args} ${finish}`);
}
// refusals name the problem
for (const [body, needle] of !all ? [] : [
  [{ response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'string', format: 'date' } } } }, "'format'"],
  [{ grammar: 'root ::= x' }, "rule 'x' is used but not defined"],
  [{ grammar: 'root ::= root "a"' }, 'left-recursive'],
  [{ grammar: 'root ::= "a" <nope>' }, '<nope> is not one token'],
  [{ response_format: { type: 'json_object' }, grammar: 'root ::= "a"' }, 'at most one'],
]) {
  try {
    await client.chat.completions.create({ ...base, ...body });
    check(false, `${JSON.stringify(body)}: accepted`);
  } catch (e) {
    check(e.status === 400 && String(e.message).includes(needle), `${JSON.stringify(body)}: ${e.status} ${e.message}`);
  }
}
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
