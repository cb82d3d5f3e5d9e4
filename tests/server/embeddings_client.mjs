// /v1/embeddings through the official `openai` npm package against `vt serve
// --pooling mean` (stories260K): the SDK's default base64 encoding and "float"
// agree, vectors are L2-normalised, a batch answers each input as it is answered
// alone (in order, index = position), token-id inputs equal their text's, usage
// counts the prompt tokens, and refusals (dimensions, an unknown field) are 400s
// that name the field. Usage: node embeddings_client.mjs BASE_URL
// Prints one line per failed check and "N passed, M failed"; exits 1 on failure.
import OpenAI from 'openai';

const [baseURL] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey: 'none', maxRetries: 0, timeout: 30000 });
let passed = 0, failed = 0;
function check(cond, what) {
  if (cond) passed++;
  else { failed++; console.log(`FAIL ${what}`); }
}
const norm = (v) => Math.sqrt(v.reduce((a, x) => a + x * x, 0));
const cos = (a, b) => a.reduce((s, x, i) => s + x * b[i], 0) / (norm(a) * norm(b));
const texts = ['Once upon a time', 'There was a little girl named Lily.', 'hi'];

try {
  const one = await client.embeddings.create({ model: 'm', input: texts[0] }); // SDK default: base64
  check(one.object === 'list' && one.data.length === 1 && one.data[0].object === 'embedding', 'shape');
  const v0 = one.data[0].embedding;
  check(Array.isArray(v0) && v0.length === 64, `dimension ${v0.length}`);
  check(Math.abs(norm(v0) - 1) < 1e-5, `L2 norm ${norm(v0)}`);
  check(one.usage.prompt_tokens > 1 && one.usage.total_tokens === one.usage.prompt_tokens, 'usage');

  const f = await client.embeddings.create({ model: 'm', input: texts[0], encoding_format: 'float' });
  check(f.data[0].embedding.every((x, i) => Math.abs(x - v0[i]) < 1e-6), 'float == base64');

  const batch = await client.embeddings.create({ model: 'm', input: texts, encoding_format: 'float' });
  check(batch.data.length === 3 && batch.data.every((d, i) => d.index === i), 'batch indices');
  let sum = 0;
  for (let i = 0; i < texts.length; i++) {
    const alone = await client.embeddings.create({ model: 'm', input: texts[i], encoding_format: 'float' });
    sum += alone.usage.prompt_tokens;
    const c = cos(alone.data[0].embedding, batch.data[i].embedding);
    check(c > 0.99999, `batch[${i}] vs alone: cosine ${c}`);
  }
  check(batch.usage.prompt_tokens === sum, `batch usage ${batch.usage.prompt_tokens} vs ${sum}`);
  check(cos(batch.data[0].embedding, batch.data[2].embedding) < 0.999, 'different inputs differ');

  const tok = await (await fetch(`${baseURL.replace(/\/v1$/, '')}/tokenize`, {
    method: 'POST', body: JSON.stringify({ content: texts[1], add_special: true }) })).json();
  const ids = await client.embeddings.create({ model: 'm', input: [tok.tokens], encoding_format: 'float' });
  const c = cos(ids.data[0].embedding, batch.data[1].embedding);
  check(c > 0.99999, `token ids vs text: cosine ${c} (${JSON.stringify(tok.tokens)})`);
  const flat = await client.embeddings.create({ model: 'm', input: tok.tokens });
  check(flat.data.length === 1 && cos(flat.data[0].embedding, batch.data[1].embedding) > 0.99999, 'one id array');

  const same = await client.embeddings.create({ model: 'm', input: 'hi', dimensions: 64 });
  check(same.data[0].embedding.length === 64, 'dimensions = the model\'s');
  for (const [body, field] of [[{ input: 'hi', dimensions: 32 }, 'dimensions'], [{ input: 'hi', foo: 1 }, 'foo'],
                               [{ input: [] }, 'input']]) {
    try {
      await client.embeddings.create({ model: 'm', ...body });
      check(false, `${JSON.stringify(body)} was accepted`);
    } catch (e) {
      check(e.status === 400 && String(e.message).includes(`'${field}`), `${JSON.stringify(body)}: ${e.status} ${e.message}`);
    }
  }
} catch (e) {
  check(false, `exception: ${e.stack || e}`);
}
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
