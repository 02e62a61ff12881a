// Tests of `hearth serve` against real server processes (127.0.0.1, ephemeral
// ports): curl for every endpoint, the official `openai` npm client for chat
// and completions, llama.vim's /infill requests, disconnects, auth, bad
// input, shutdown. Prints one line per test and "N passed, N failed".
// Usage: node server_test.mjs [name-filter]
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync, readFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import net from 'node:net';
import path from 'node:path';
import { BIN, SHARED, AssertionError, assert, sleep, waitFor, startServer as serve } from '../lib/hearth.mjs';

const STORIES = path.join(SHARED, 'models', 'stories260K.gguf');
const QWEN3 = path.join(SHARED, 'fixtures', 'qwen3-tiny-Q4_K_M.gguf');
const REFERENCE = JSON.parse(readFileSync(path.join(SHARED, 'fixtures', 'reference.json'), 'utf8'));
const FILTER = process.argv[2] || '';
const TMP = mkdtempSync(path.join(tmpdir(), 'hearth-server-test-'));

let OpenAI = null;
if (process.env.HEARTH_NO_OPENAI !== '1') {
  try { OpenAI = (await import('openai')).default; } catch { OpenAI = null; }
}

// ---- small helpers ---------------------------------------------------------
function eq(a, b, msg) {
  const ja = JSON.stringify(a), jb = JSON.stringify(b);
  if (ja !== jb) throw new AssertionError(`${msg}: got ${ja.slice(0, 300)}, want ${jb.slice(0, 300)}`);
}

// ---- servers -----------------------------------------------------------------
process.on('exit', () => rmSync(TMP, { recursive: true, force: true }));

// one model (stories260K unless given; null: none), one thread, no prompt cache unless asked
function startServer(extra = [], model = STORIES, env = {}) {
  const args = [...(model ? ['-m', model] : []), '-t', '1', ...extra];
  if (!extra.includes('--prompt-cache')) args.push('--prompt-cache', 'off');
  return serve(args, env);
}

async function stopClean(s) {
  const e = await s.stop();
  assert(e.code === 0, `server exit ${JSON.stringify(e)}; stderr tail:\n${s.err.slice(-1500)}`);
}

// ---- curl --------------------------------------------------------------------------
// curl(server, [path or url, ...curl args]) -> {status, headers, body}
function curl(s, args, input) {
  const url = args[0].startsWith('http') ? args[0] : s.base + args[0];
  const argv = ['-sS', '-i', '--max-time', '120', url, ...args.slice(1)];
  if (input !== undefined) argv.push('--data-binary', '@-');
  return new Promise((resolve, reject) => {
    const p = spawn('curl', argv, { stdio: ['pipe', 'pipe', 'pipe'] });
    const out = [];
    let err = '';
    p.stdout.on('data', (d) => out.push(d));
    p.stderr.on('data', (d) => { err += d; });
    p.on('error', reject);
    p.on('exit', (code) => {
      let raw = Buffer.concat(out).toString('latin1');
      let status = 0, headers = {};
      for (;;) {   // skip "100 Continue" blocks
        const end = raw.indexOf('\r\n\r\n');
        if (!raw.startsWith('HTTP/') || end < 0) break;
        const lines = raw.slice(0, end).split('\r\n');
        status = Number(lines[0].split(' ')[1]);
        headers = {};
        for (const l of lines.slice(1)) {
          const i = l.indexOf(':');
          headers[l.slice(0, i).toLowerCase()] = l.slice(i + 1).trim();
        }
        raw = raw.slice(end + 4);
        if (status !== 100) break;
      }
      resolve({ status, headers, body: Buffer.from(raw, 'latin1').toString('utf8'), code, err });
    });
    if (input !== undefined) p.stdin.end(input); else p.stdin.end();
  });
}
async function post(s, p, body, extra = []) {
  const r = await curl(s, [p, '-H', 'Content-Type: application/json', ...extra],
    typeof body === 'string' || Buffer.isBuffer(body) ? body : JSON.stringify(body));
  try { r.json = JSON.parse(r.body); } catch { r.json = null; }
  return r;
}
async function get(s, p, extra = []) {
  const r = await curl(s, [p, ...extra]);
  try { r.json = JSON.parse(r.body); } catch { r.json = null; }
  return r;
}
// SSE body -> [{data}|{comment}]
function sse(body) {
  const evs = [];
  for (const block of body.split('\n\n')) {
    if (!block.trim()) continue;
    for (const line of block.split('\n')) {
      if (line.startsWith(':')) evs.push({ comment: line.slice(1).trim() });
      else if (line.startsWith('data: ')) evs.push({ data: line.slice(6) });
      else throw new AssertionError(`not an SSE line: ${JSON.stringify(line)}`);
    }
  }
  return evs;
}
function dataJson(evs) { return evs.filter((e) => e.data && e.data !== '[DONE]').map((e) => JSON.parse(e.data)); }

function assertError(r, status, param, msg) {
  eq(r.status, status, `${msg}: status (body ${r.body.slice(0, 200)})`);
  assert(r.json && r.json.error, `${msg}: no error object in ${r.body.slice(0, 200)}`);
  const e = r.json.error;
  for (const k of ['message', 'type', 'param', 'code']) assert(k in e, `${msg}: error.${k} missing`);
  assert(typeof e.message === 'string' && e.message.length > 0, `${msg}: empty message`);
  if (param !== undefined) eq(e.param, param, `${msg}: error.param`);
}

// A raw HTTP/1.1 request on its own socket, for disconnect tests.
function rawRequest(port, method, p, body) {
  const sock = net.connect(port, '127.0.0.1');
  const payload = body === undefined ? '' : JSON.stringify(body);
  const st = { sock, data: '', closed: false };
  sock.on('data', (d) => { st.data += d.toString('utf8'); });
  sock.on('close', () => { st.closed = true; });
  sock.on('error', () => {});
  sock.write(`${method} ${p} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(payload)}\r\n\r\n${payload}`);
  return st;
}

async function slots(s) { return (await get(s, '/slots')).json; }
async function metric(s, name) {
  const r = await get(s, '/metrics');
  // a model's series carry {model="..."}: the first one (one model served here)
  const m = r.body.match(new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)$`, 'm'));
  return m ? Number(m[1]) : NaN;
}

// ---- the test list -----------------------------------------------------------
const tests = [];
function test(name, fn) { tests.push({ name, fn }); }

// One server on stories260K for most tests; others start their own.
let S = null;
async function stories() {
  if (!S || S.exited) S = await startServer(['-np', '2', '-c', '512', '--sse-keepalive', '0']);
  return S;
}

test('health, models, props, slots', async () => {
  const s = await stories();
  const h = await get(s, '/health');
  eq(h.status, 200, 'health'); eq(h.json, { status: 'ok' }, 'health body');
  const m = await get(s, '/v1/models');
  eq(m.status, 200, 'models'); eq(m.json.object, 'list', 'object');
  eq(m.json.data.map((d) => d.id), ['stories260K'], 'ids');
  eq((await get(s, '/models')).status, 200, '/models alias');
  eq((await get(s, '/v1/models/stories260K')).json.id, 'stories260K', 'model by id');
  assertError(await get(s, '/v1/models/nope'), 404, 'model', 'unknown model id');
  const p = await get(s, '/props');
  eq(p.json.total_slots, 2, 'total_slots'); eq(p.json.n_ctx, 512, 'n_ctx');
  assert(p.json.chat_template.includes('<|im_start|>'), 'fallback template: chatml source');
  const sl = await slots(s);
  eq(sl.length, 2, 'slots'); eq(sl.map((x) => x.is_processing), [false, false], 'idle');
  eq(sl[0].n_ctx, 512, 'slot n_ctx');
});

test('routes: 404, 405, OPTIONS, HEAD', async () => {
  const s = await stories();
  assertError(await get(s, '/v1/nothing'), 404, null, '404');
  // the 404 quotes the decoded path: one line of UTF-8 whatever it holds
  const odd = await get(s, '/v1/%ff%0a%c3');
  assertError(odd, 404, null, '404 odd path');
  assert(!odd.body.includes('\uFFFD') && !/[\x00-\x1f]/.test(odd.json.error.message), `404 odd path: ${odd.body.slice(0, 200)}`);
  const r = await get(s, '/v1/chat/completions');
  assertError(r, 405, null, '405');
  eq(r.headers.allow, 'POST', 'Allow header');
  assertError(await post(s, '/health', {}), 405, null, 'POST /health');
  const o = await curl(s, ['/v1/chat/completions', '-X', 'OPTIONS']);
  eq(o.status, 204, 'preflight');
  eq((await curl(s, ['/health', '-I'])).status, 200, 'HEAD');
});

test('bad bodies: JSON, UTF-8, types, 413', async () => {
  const s = await stories();
  assertError(await post(s, '/v1/chat/completions', '{"messages": ['), 400, null, 'truncated JSON');
  assertError(await post(s, '/v1/chat/completions', '[1,2]'), 400, null, 'not an object');
  assertError(await post(s, '/v1/chat/completions', ''), 400, null, 'empty body');
  assertError(await post(s, '/v1/chat/completions', '{"a":1} x'), 400, null, 'trailing garbage');
  const bad = Buffer.concat([Buffer.from('{"messages":[{"role":"user","content":"'), Buffer.from([0xff, 0xfe, 0xc3]), Buffer.from('"}]}')]);
  assertError(await post(s, '/v1/chat/completions', bad), 400, null, 'invalid UTF-8');
  const overlong = Buffer.concat([Buffer.from('{"prompt":"'), Buffer.from([0xc0, 0xaf]), Buffer.from('"}')]);
  assertError(await post(s, '/completion', overlong), 400, null, 'overlong UTF-8');
  const msg = [{ role: 'user', content: 'hi' }];
  const cases = [
    [{ messages: msg, temperature: 'hot' }, 'temperature'],
    [{ messages: msg, temperature: -1 }, 'temperature'],
    [{ messages: msg, top_p: 2 }, 'top_p'],
    [{ messages: msg, max_tokens: 1.5 }, 'max_tokens'],
    [{ messages: msg, max_tokens: 0 }, 'max_tokens'],
    [{ messages: msg, max_tokens: 1000000000 }, 'max_tokens'],
    [{ messages: msg, max_completion_tokens: 100000 }, 'max_completion_tokens'],
    [{ messages: msg, n: 17 }, 'n'],
    [{ messages: msg, stop: [1, 2] }, 'stop'],
    [{ messages: msg, stop: Array(257).fill('x') }, 'stop'],
    [{ messages: msg, seed: 'x' }, 'seed'],
    [{ messages: msg, stream: 'yes' }, 'stream'],
    [{ messages: msg, stream_options: { include_usage: true } }, 'stream_options'],
    [{ messages: msg, logprobs: 1 }, 'logprobs'],
    [{ messages: msg, top_logprobs: 3 }, 'top_logprobs'],
    [{ messages: msg, logprobs: true, top_logprobs: 21 }, 'top_logprobs'],
    [{ messages: msg, logit_bias: { 99999: 1 } }, 'logit_bias'],
    [{ messages: msg, logit_bias: { 5: 'x' } }, 'logit_bias'],
    [{ messages: msg, logit_bias: Object.fromEntries(Array.from({ length: 1025 }, (_, i) => [i, 1])) }, 'logit_bias'],
    [{ messages: msg, tools: [{ type: 'function', function: { name: 'f g' } }] }, 'tools[0]'],
    [{ messages: msg, tools: { type: 'function' } }, 'tools'],
    [{ messages: msg, tools: [{ type: 'retrieval' }] }, 'tools[0]'],
    [{ messages: msg, tools: [{ type: 'function', function: { name: 'f', parameters: 'x' } }] }, 'tools[0]'],
    [{ messages: msg, tools: [{ type: 'function', function: { name: 'f' } }, { type: 'function', function: { name: 'f' } }] }, 'tools[1]'],
    [{ messages: msg, tool_choice: 'required' }, 'tool_choice'],
    [{ messages: msg, tool_choice: 'sometimes', tools: [{ type: 'function', function: { name: 'f' } }] }, 'tool_choice'],
    [{ messages: msg, tool_choice: { type: 'function', function: { name: 'g' } }, tools: [{ type: 'function', function: { name: 'f' } }] }, 'tool_choice'],
    [{ messages: msg, parallel_tool_calls: 'yes' }, 'parallel_tool_calls'],
    [{ messages: msg, reasoning_format: 'verbose' }, 'reasoning_format'],
    [{ messages: msg, chat_template_kwargs: [1] }, 'chat_template_kwargs'],
    [{ messages: msg, enable_thinking: 'no' }, 'enable_thinking'],
    [{ messages: [{ role: 'user', content: 'x' }, { role: 'assistant', tool_calls: { id: 'a' } }] }, 'messages[1].tool_calls'],
    [{ messages: [{ role: 'user', content: 'x' }, { role: 'assistant', tool_calls: [{ id: 'a', type: 'function', function: { arguments: '{}' } }] }] }, 'messages[1].tool_calls[0]'],
    [{ messages: [{ role: 'user', content: 'x', tool_calls: [] }] }, 'messages[0].tool_calls'],
    [{ messages: [{ role: 'tool', tool_call_id: 7, content: 'x' }] }, 'messages[0].tool_call_id'],
    [{ messages: msg, response_format: { type: 'xml' } }, 'response_format'],
    [{ messages: msg, response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'strin' } } } }, 'response_format'],
    [{ messages: msg, grammar: 'root ::= foo' }, 'grammar'],
    [{ messages: msg, json_schema: { $ref: '#/nope' } }, 'json_schema'],
    [{ messages: msg, grammar: 'root ::= "a"', json_schema: { type: 'string' } }, 'grammar'],
    [{ messages: msg, model: 42 }, 'model'],
    [{ messages: 'hi' }, 'messages'],
    [{ messages: [] }, 'messages'],
    [{}, 'messages'],
    [{ messages: [{ role: 'wizard', content: 'x' }] }, 'messages[0].role'],
    [{ messages: [{ role: 'user', content: 5 }] }, 'messages[0].content'],
    [{ messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'x' } }] }] }, 'messages[0].content[0]'],
  ];
  for (const [body, param] of cases) assertError(await post(s, '/v1/chat/completions', body), 400, param, JSON.stringify(body).slice(0, 80));
  eq((await post(s, '/v1/completions', { prompt: [[1, 2], [3, 4]], max_tokens: 2 })).json.choices.length, 2, 'a list of prompts');
  assertError(await post(s, '/v1/completions', { prompt: [1, 99999] }), 400, 'prompt', 'token out of range');
  assertError(await post(s, '/completion', { prompt: 'x', n_probs: 'a' }), 400, 'n_probs', 'n_probs type');
  assertError(await post(s, '/completion', { prompt: 'x', samplers: ['top_k', 'warp_drive'] }), 400, 'samplers', 'samplers');
  assertError(await post(s, '/completion', { prompt: 'x', mirostat: 3 }), 400, 'mirostat', 'mirostat 3');
  assertError(await post(s, '/completion', { prompt: 'x', id_slot: 7 }), 400, 'id_slot', 'id_slot');
  assertError(await post(s, '/completion', {}), 400, 'prompt', 'no prompt');
  assertError(await post(s, '/tokenize', { content: 5 }), 400, 'content', 'tokenize content');
  assertError(await post(s, '/detokenize', { tokens: [1, -1] }), 400, 'tokens', 'detokenize range');
  // found by fuzz_prompt: ids past int32 were cast before the range check (UB),
  // and a quoted role cut at 40 bytes inside a character left invalid UTF-8
  assertError(await post(s, '/detokenize', { tokens: [1, 1e10] }), 400, 'tokens', 'detokenize 1e10');
  assertError(await post(s, '/v1/completions', { prompt: [1, 1e10] }), 400, 'prompt', 'prompt id 1e10');
  const cut = await post(s, '/v1/chat/completions', { messages: [{ role: 'r'.repeat(39) + 'é', content: 'x' }] });
  assertError(cut, 400, 'messages[0].role', 'role cut mid-character');
  assert(!cut.body.includes('\uFFFD'), `role cut mid-character: not UTF-8: ${cut.body.slice(0, 200)}`);
  // unknown fields are ignored
  const ok = await post(s, '/v1/chat/completions', { messages: msg, max_tokens: 2, frobnicate: { x: 1 }, user: 'u' });
  eq(ok.status, 200, 'unknown fields ignored');
  // 50 MB: with "Expect: 100-continue" (curl's default) and without
  const big = path.join(TMP, 'big.json');
  writeFileSync(big, '{"prompt":"' + 'a'.repeat(50 << 20) + '"}');
  const r1 = await curl(s, ['/completion', '-H', 'Content-Type: application/json', '--data-binary', '@' + big]);
  r1.json = JSON.parse(r1.body);
  assertError(r1, 413, null, '50 MB with Expect');
  const r2 = await curl(s, ['/completion', '-H', 'Content-Type: application/json', '-H', 'Expect:', '--data-binary', '@' + big]);
  r2.json = JSON.parse(r2.body);
  assertError(r2, 413, null, '50 MB without Expect');
  const r3 = await fetch(s.base + '/completion', { method: 'POST', body: readFileSync(big) });
  eq(r3.status, 413, 'fetch 50 MB');
  assert((await r3.json()).error.message, '413 body');
  rmSync(big);
  eq((await get(s, '/health')).status, 200, 'still serving');
});

test('prompt over the context: 400, never truncated', async () => {
  const s = await stories();
  const ids = Array.from({ length: 600 }, (_, i) => 10 + (i % 400));
  const r = await post(s, '/completion', { prompt: ids, n_predict: 4 });
  assertError(r, 400, 'prompt', 'token prompt over 512');
  eq(r.json.error.code, 'context_length_exceeded', 'code');
  const r2 = await post(s, '/v1/chat/completions', { messages: [{ role: 'user', content: 'once upon a time '.repeat(200) }], max_tokens: 4 });
  assertError(r2, 400, 'messages', 'chat over 512');
  const huge = await post(s, '/v1/completions', { prompt: 'a'.repeat(3 << 20), max_tokens: 1 });
  assertError(huge, 400, 'prompt', 'megabytes of prompt');
  eq(huge.json.error.code, 'context_length_exceeded', 'code');
  // 512 ids leave no room to generate in a 512-token slot; 511 leave one
  assertError(await post(s, '/v1/completions', { prompt: ids.slice(0, 512), max_tokens: 4 }), 400, 'prompt', '512 tokens');
  const r4 = await post(s, '/v1/completions', { prompt: ids.slice(0, 511), max_tokens: 4 });
  eq(r4.status, 200, '511 tokens fit');
  eq(r4.json.choices[0].finish_reason, 'length', 'cut by the context');
  eq(r4.json.usage.completion_tokens, 1, 'one token of room');
});

test('/completion greedy reproduces the reference', async () => {
  const s = await stories();
  for (const c of REFERENCE.filter((x) => x.model === 'stories260K.gguf' && x.prompt)) {
    const r = await post(s, '/completion', { prompt: c.prompt, n_predict: c.tokens.length, temperature: 0, return_tokens: true });
    eq(r.status, 200, 'status');
    eq(r.json.tokens, c.tokens, `tokens for ${c.prompt}`);
    eq(r.json.content, c.text, 'text');
    eq(r.json.tokens_evaluated, c.prompt_tokens.length, 'prompt tokens');
    eq(r.json.stop_type, 'limit', 'stop_type');
    eq(r.json.stop, true, 'stop');
    // streamed: the same text in pieces, a final event with stop, no [DONE]
    const st = await post(s, '/completion', { prompt: c.prompt, n_predict: c.tokens.length, temperature: 0, stream: true });
    eq(st.headers['content-type'], 'text/event-stream', 'content type');
    const evs = sse(st.body);
    assert(!evs.some((e) => e.data === '[DONE]'), 'llama.cpp streams end without [DONE]');
    const js = dataJson(evs);
    eq(js.map((j) => j.content).join(''), c.text, 'streamed text');
    assert(js.slice(0, -1).every((j) => j.stop === false), 'stop false until the end');
    eq(js[js.length - 1].stop, true, 'last event');
    eq(js[js.length - 1].tokens_predicted, c.tokens.length, 'tokens_predicted');
  }
  // token ids as the prompt give the same
  const c = REFERENCE.find((x) => x.model === 'stories260K.gguf' && x.prompt);
  const r = await post(s, '/completion', { prompt: c.prompt_tokens, n_predict: 8, temperature: 0, return_tokens: true });
  eq(r.json.tokens, c.tokens.slice(0, 8), 'ids prompt');
});

test('stop strings across token boundaries', async () => {
  const s = await stories();
  const c = REFERENCE.find((x) => x.model === 'stories260K.gguf' && x.prompt === 'Once upon a time');
  const pieces = (await post(s, '/tokenize', { content: c.text, with_pieces: true })).json.tokens.map((t) => t.piece);
  // a stop string made of the end of one piece and the start of the next
  let k = pieces.findIndex((p, i) => i > 3 && p.length >= 3 && pieces[i + 1] && pieces[i + 1].length >= 3);
  const stop = pieces[k].slice(-2) + pieces[k + 1].slice(0, 2);
  const at = c.text.indexOf(stop);
  assert(at > 0, 'stop string is in the reference text');
  for (const stream of [false, true]) {
    const r = await post(s, '/completion', { prompt: c.prompt, n_predict: 64, temperature: 0, stop: ['zzzz', stop], stream });
    const text = stream ? dataJson(sse(r.body)).map((j) => j.content).join('') : r.json.content;
    const last = stream ? dataJson(sse(r.body)).pop() : r.json;
    eq(text, c.text.slice(0, at), `text before the stop string (stream ${stream})`);
    eq(last.stop_type, 'word', 'stop_type');
    eq(last.stopping_word, stop, 'stopping_word');
  }
  const oa = await post(s, '/v1/chat/completions', { messages: [{ role: 'user', content: 'x' }], max_tokens: 30, temperature: 0 });
  const full = oa.json.choices[0].message.content;
  const cut = full.slice(5, 9);
  const ob = await post(s, '/v1/chat/completions', { messages: [{ role: 'user', content: 'x' }], max_tokens: 30, temperature: 0, stop: cut });
  eq(ob.json.choices[0].message.content, full.slice(0, full.indexOf(cut)), 'chat stop');
  eq(ob.json.choices[0].finish_reason, 'stop', 'finish_reason stop');
});

test('chat via curl: whole and streamed, usage', async () => {
  const s = await stories();
  const body = { model: 'stories260K', messages: [{ role: 'system', content: 'be brief' }, { role: 'user', content: [{ type: 'text', text: 'Tell ' }, { type: 'text', text: 'a story' }] }], max_tokens: 12, temperature: 0 };
  const r = await post(s, '/v1/chat/completions', body);
  eq(r.status, 200, 'status');
  const j = r.json;
  eq(j.object, 'chat.completion', 'object');
  assert(/^chatcmpl-/.test(j.id), 'id');
  eq(j.choices[0].message.role, 'assistant', 'role');
  eq(j.choices[0].finish_reason, 'length', 'finish_reason');
  eq(j.usage.completion_tokens, 12, 'completion_tokens');
  eq(j.usage.total_tokens, j.usage.prompt_tokens + 12, 'total');
  assert(typeof j.usage.prompt_tokens_details.cached_tokens === 'number', 'cached_tokens');
  const st = await post(s, '/v1/chat/completions', { ...body, stream: true, stream_options: { include_usage: true } });
  const evs = sse(st.body);
  eq(evs[evs.length - 1].data, '[DONE]', '[DONE] last');
  const chunks = dataJson(evs);
  const ids = new Set(chunks.map((c) => c.id));
  eq(ids.size, 1, 'one id in every chunk');
  eq(chunks[0].choices[0].delta.role, 'assistant', 'role in the first delta');
  const usage = chunks[chunks.length - 1];
  eq(usage.choices, [], 'usage chunk has no choices');
  eq(usage.usage.completion_tokens, 12, 'usage chunk');
  const fin = chunks[chunks.length - 2];
  eq(fin.choices[0].finish_reason, 'length', 'finish in the last choice chunk');
  assert(chunks.slice(0, -2).every((c) => c.choices[0].finish_reason === null && c.usage === null), 'null until the end');
  eq(chunks.map((c) => (c.choices[0] && c.choices[0].delta.content) || '').join(''), j.choices[0].message.content, 'same text');
  // the second identical request reuses the resident prompt
  const again = await post(s, '/v1/chat/completions', body);
  assert(again.json.usage.prompt_tokens_details.cached_tokens > 0, 'cached tokens on a repeat');
});

test('logprobs: chat and completions', async () => {
  const s = await stories();
  const r = await post(s, '/v1/chat/completions', { messages: [{ role: 'user', content: 'a' }], max_tokens: 6, temperature: 0, logprobs: true, top_logprobs: 3 });
  const lp = r.json.choices[0].logprobs.content;
  eq(lp.length, 6, 'one entry per token');
  for (const e of lp) {
    eq(e.top_logprobs.length, 3, 'top 3');
    assert(e.logprob <= 0, 'logprob <= 0');
    assert(e.top_logprobs[0].logprob >= e.top_logprobs[1].logprob && e.top_logprobs[1].logprob >= e.top_logprobs[2].logprob, 'sorted');
    eq(e.token, e.top_logprobs[0].token, 'greedy picks the top token');
    assert(Math.abs(e.logprob - e.top_logprobs[0].logprob) < 1e-5, 'same logprob');
    eq(Buffer.from(e.bytes).toString('utf8'), e.token, 'bytes');
  }
  const st = await post(s, '/v1/chat/completions', { messages: [{ role: 'user', content: 'a' }], max_tokens: 6, temperature: 0, logprobs: true, stream: true });
  const per = dataJson(sse(st.body)).filter((c) => c.choices[0] && c.choices[0].logprobs).flatMap((c) => c.choices[0].logprobs.content);
  eq(per.map((e) => e.token), lp.map((e) => e.token), 'streamed logprobs');
  const c = await post(s, '/v1/completions', { prompt: 'Once upon', max_tokens: 5, temperature: 0, logprobs: 2 });
  const l = c.json.choices[0].logprobs;
  eq(l.tokens.length, 5, 'tokens'); eq(l.token_logprobs.length, 5, 'token_logprobs');
  eq(Object.keys(l.top_logprobs[0]).length <= 2, true, 'top 2');
  eq(l.text_offset[0], 0, 'offset');
  eq(l.tokens.join(''), c.json.choices[0].text, 'tokens spell the text');
  const n = await post(s, '/completion', { prompt: 'Once upon', n_predict: 3, temperature: 0, n_probs: 2 });
  eq(n.json.completion_probabilities.length, 3, 'completion_probabilities');
  eq(n.json.completion_probabilities[0].top_logprobs.length, 2, 'n_probs');
});

test('completions: echo, ids, seeds, logit_bias', async () => {
  const s = await stories();
  const r = await post(s, '/v1/completions', { prompt: 'Once upon a time', max_tokens: 8, temperature: 0, echo: true });
  const t = r.json.choices[0].text;
  assert(t.startsWith('Once upon a time'), 'echo');
  eq(r.json.object, 'text_completion', 'object');
  const a = await post(s, '/v1/completions', { prompt: 'Lily', max_tokens: 16, temperature: 1, seed: 7 });
  const b = await post(s, '/v1/completions', { prompt: 'Lily', max_tokens: 16, temperature: 1, seed: 7, stream: true });
  eq(dataJson(sse(b.body)).map((c) => c.choices[0] ? c.choices[0].text : '').join(''), a.json.choices[0].text, 'same seed: same text, whole or streamed');
  // banning the greedy first token changes it
  const g = await post(s, '/completion', { prompt: 'Once upon a time', n_predict: 1, temperature: 0, return_tokens: true });
  const first = g.json.tokens[0];
  const ban = await post(s, '/v1/completions', { prompt: 'Once upon a time', max_tokens: 1, temperature: 0, logit_bias: { [first]: -100 }, logprobs: 0 });
  assert(ban.json.choices[0].logprobs.tokens[0] !== g.json.content, 'logit_bias bans the token');
  const ban2 = await post(s, '/completion', { prompt: 'Once upon a time', n_predict: 1, temperature: 0, logit_bias: [[first, false]], return_tokens: true });
  assert(ban2.json.tokens[0] !== first, 'llama.cpp logit_bias form');
});

test('tokenize, detokenize, apply-template', async () => {
  const s = await stories();
  const t = await post(s, '/tokenize', { content: 'Once upon a time' });
  eq(t.json.tokens, REFERENCE.find((x) => x.prompt === 'Once upon a time').prompt_tokens.slice(1), 'tokens (no BOS by default)');
  const tb = await post(s, '/tokenize', { content: 'Once upon a time', add_special: true });
  eq(tb.json.tokens.length, t.json.tokens.length + 1, 'add_special adds BOS');
  const d = await post(s, '/detokenize', { tokens: t.json.tokens });
  eq(d.json.content.trim(), 'Once upon a time', 'round trip');
  const p = await post(s, '/tokenize', { content: 'Lily', with_pieces: true });
  assert(p.json.tokens.every((x) => typeof x.id === 'number' && x.piece !== undefined), 'pieces');
  const a = await post(s, '/apply-template', { messages: [{ role: 'user', content: 'hi' }] });
  eq(a.json.prompt, '<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n', 'chatml');
});

test('metrics and access log', async () => {
  const s = await stories();
  await post(s, '/v1/completions', { prompt: 'x', max_tokens: 3 });
  const m = await get(s, '/metrics');
  eq(m.status, 200, 'status');
  assert(m.headers['content-type'].startsWith('text/plain'), 'content type');
  for (const name of ['hearth_requests_total{endpoint="completions",status="200"}', 'hearth_prompt_tokens_total',
    'hearth_generated_tokens_total', 'hearth_time_to_first_token_seconds_bucket{le="+Inf"}',
    'hearth_inter_token_latency_seconds_count', 'hearth_slots_busy', 'hearth_queue_depth', 'hearth_kv_cells_used'])
    assert(m.body.includes(name), `metrics has ${name}`);
  assert(/hearth_requests_total\{endpoint="other",status="404"\} [1-9]/.test(m.body), '404s counted');
  assert(await metric(s, 'hearth_generated_tokens_total') >= 3, 'generated tokens counted');
  assert(/POST \/v1\/completions 200 prompt=\d+ gen=3 [\d.]+ms/.test(s.err), 'access log line');
});

test('openai client: chat, completions, streams, errors', async () => {
  if (!OpenAI) return 'skip';
  const s = await stories();
  const client = new OpenAI({ baseURL: s.base + '/v1', apiKey: 'none', maxRetries: 0, timeout: 60000 });
  const c = await client.chat.completions.create({ model: 'stories260K', messages: [{ role: 'user', content: 'Hello' }], max_tokens: 8, temperature: 0 });
  eq(c.choices[0].message.role, 'assistant', 'role');
  eq(c.usage.completion_tokens, 8, 'usage');
  const stream = await client.chat.completions.create({ model: 'stories260K', messages: [{ role: 'user', content: 'Hello' }], max_tokens: 8, temperature: 0, stream: true, stream_options: { include_usage: true } });
  let text = '', usage = null, finish = null;
  for await (const ch of stream) {
    if (ch.usage) usage = ch.usage;
    if (ch.choices[0]) { text += ch.choices[0].delta.content || ''; finish = ch.choices[0].finish_reason || finish; }
  }
  eq(text, c.choices[0].message.content, 'streamed text');
  eq(usage.completion_tokens, 8, 'stream usage'); eq(finish, 'length', 'finish');
  const ref = REFERENCE.find((x) => x.model === 'stories260K.gguf' && x.prompt === 'Lily and Tom were');
  const k = await client.completions.create({ model: 'stories260K', prompt: ref.prompt, max_tokens: ref.tokens.length, temperature: 0 });
  eq(k.choices[0].text, ref.text, 'completions reproduce the reference');
  const ks = await client.completions.create({ model: 'stories260K', prompt: ref.prompt, max_tokens: 10, temperature: 0, stream: true });
  let kt = '';
  for await (const ch of ks) kt += ch.choices[0] ? ch.choices[0].text : '';
  eq(kt, ref.text.slice(0, kt.length), 'streamed completion');
  assert(kt.length > 0, 'some text');
  const lp = await client.chat.completions.create({ model: 'stories260K', messages: [{ role: 'user', content: 'Hi' }], max_tokens: 3, logprobs: true, top_logprobs: 2 });
  eq(lp.choices[0].logprobs.content.length, 3, 'logprobs');
  const expectErr = async (p, cls, status, param) => {
    try { await p; } catch (e) {
      assert(e instanceof cls, `${cls.name} expected, got ${e.constructor.name}: ${e.message}`);
      eq(e.status, status, 'status');
      if (param !== undefined) eq(e.param, param, 'param');
      return;
    }
    throw new AssertionError(`${cls.name} expected, none thrown`);
  };
  await expectErr(client.chat.completions.create({ model: 'stories260K', messages: [{ role: 'user', content: 'x' }], temperature: 'hot' }), OpenAI.BadRequestError, 400, 'temperature');
  await expectErr(client.chat.completions.create({ model: 'gpt-unknown', messages: [{ role: 'user', content: 'x' }] }), OpenAI.NotFoundError, 404, 'model');
  await expectErr(client.chat.completions.create({ model: 'stories260K', messages: [{ role: 'user', content: 'x' }], n: 17 }), OpenAI.BadRequestError, 400, 'n');
  await expectErr(client.completions.create({ model: 'stories260K', prompt: 'x'.repeat(3000) }), OpenAI.BadRequestError, 400, 'prompt');
  await expectErr(client.models.retrieve('nope'), OpenAI.NotFoundError, 404);
  const models = await client.models.list();
  eq(models.data.map((m) => m.id), ['stories260K'], 'models.list');
});

test('embeddings: openai client, token ids, base64, /embedding, errors', async () => {
  const s = await stories();
  const norm = (v) => Math.sqrt(v.reduce((a, x) => a + x * x, 0));
  const one = await post(s, '/v1/embeddings', { model: 'stories260K', input: 'Once upon a time', encoding_format: 'float' });
  eq(one.status, 200, 'status'); eq(one.json.object, 'list', 'object');
  const v = one.json.data[0].embedding;
  eq(one.json.data[0].object, 'embedding', 'item object'); eq(one.json.data[0].index, 0, 'index');
  eq(v.length, 64, 'stories260K has 64 dimensions');
  assert(Math.abs(norm(v) - 1) < 1e-5, `unit length (${norm(v)})`);
  const tok = await post(s, '/tokenize', { content: 'Once upon a time', add_special: true });
  eq(one.json.usage.prompt_tokens, tok.json.tokens.length, 'usage.prompt_tokens');
  eq(one.json.usage.total_tokens, tok.json.tokens.length, 'usage.total_tokens');
  // the same text as token ids, as a list of lists, and in a batch of three
  const ids = await post(s, '/v1/embeddings', { input: tok.json.tokens });
  eq(ids.json.data[0].embedding, v, 'token ids == text');
  const many = await post(s, '/v1/embeddings', { input: ['Lily and Tom were', 'Once upon a time', 'The cat'] });
  eq(many.json.data.map((d) => d.index), [0, 1, 2], 'indexes in order');
  eq(many.json.data[1].embedding, v, 'batched beside others == alone');
  assert(JSON.stringify(many.json.data[0].embedding) !== JSON.stringify(v), 'another text, another vector');
  const lists = await post(s, '/v1/embeddings', { input: [tok.json.tokens, [1, 403, 407]] });
  eq(lists.json.data[0].embedding, v, 'lists of token ids');
  // base64: little-endian float32, what the openai client asks for by default
  const b = await post(s, '/v1/embeddings', { input: 'Once upon a time', encoding_format: 'base64' });
  const buf = Buffer.from(b.json.data[0].embedding, 'base64');
  eq(buf.length, 4 * 64, 'base64 bytes');
  const fromB64 = Array.from({ length: 64 }, (_, i) => buf.readFloatLE(4 * i));
  assert(fromB64.every((x, i) => Math.abs(x - v[i]) <= 1e-6 * Math.max(1, Math.abs(v[i]))), 'base64 == float');
  // llama-server's /embedding: content, [{index, embedding: [vector]}]
  const l = await post(s, '/embedding', { content: 'Once upon a time' });
  eq(l.status, 200, '/embedding'); eq(l.json[0].index, 0, '/embedding index'); eq(l.json[0].embedding[0], v, '/embedding vector');
  if (OpenAI) {
    const client = new OpenAI({ baseURL: s.base + '/v1', apiKey: 'none', maxRetries: 0, timeout: 60000 });
    const e = await client.embeddings.create({ model: 'stories260K', input: ['Once upon a time', 'The cat'] });
    eq(e.data.length, 2, 'client: two vectors'); eq(e.data[0].embedding.length, 64, 'client: dimensions');
    assert(e.data[0].embedding.every((x, i) => Math.abs(x - v[i]) <= 1e-6), 'client (base64 decoded) == float');
    eq(e.usage.prompt_tokens, tok.json.tokens.length + (await post(s, '/tokenize', { content: 'The cat', add_special: true })).json.tokens.length, 'client usage');
    const f = await client.embeddings.create({ model: 'stories260K', input: 'Once upon a time', encoding_format: 'float' });
    eq(f.data[0].embedding, v, 'client float');
    try {
      await client.embeddings.create({ model: 'stories260K', input: 'x', dimensions: 8 });
      throw new AssertionError('dimensions 8 accepted');
    } catch (err) { assert(err instanceof OpenAI.BadRequestError && err.param === 'dimensions', `dimensions: ${err.message}`); }
  }
  assertError(await post(s, '/v1/embeddings', { input: 'x', dimensions: 8 }), 400, 'dimensions', 'dimensions refused');
  eq((await post(s, '/v1/embeddings', { input: 'x', dimensions: 64 })).status, 200, 'dimensions == n_embd');
  assertError(await post(s, '/v1/embeddings', { input: [] }), 400, 'input', 'empty list');
  assertError(await post(s, '/v1/embeddings', {}), 400, 'input', 'no input');
  assertError(await post(s, '/v1/embeddings', { input: [1.5] }), 400, 'input', 'not a token id');
  assertError(await post(s, '/v1/embeddings', { input: [99999] }), 400, 'input', 'token id out of range');
  assertError(await post(s, '/v1/embeddings', { input: [1, 'a'] }), 400, 'input', 'mixed list');
  assertError(await post(s, '/v1/embeddings', { input: [{}] }), 400, 'input', 'object item');
  assertError(await post(s, '/v1/embeddings', { input: 'x', encoding_format: 'hex' }), 400, 'encoding_format', 'bad format');
  assertError(await post(s, '/v1/embeddings', { input: 'x '.repeat(3000) }), 400, 'input', 'over the context');
});

// Tools and reasoning (server/tool_request.c, tool_parse.c, fmt_tools.c). A
// random-weight model never writes a tool call by itself: these check the
// request side, the history through the template, and that streamed and whole
// answers read the same text the same way (content, reasoning, calls).
const WEATHER = { type: 'function', function: { name: 'get_weather', description: 'The weather in a city',
  parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } } };
const TIME = { type: 'function', function: { name: 'get_time', parameters: { type: 'object', properties: {} } } };

test('tools: openai client, history with tool calls and results, stream == whole', async () => {
  if (!OpenAI) return 'skip';
  const s = await startServer(['-np', '2', '-c', '1024', '--sse-keepalive', '0'], QWEN3);
  const client = new OpenAI({ baseURL: s.base + '/v1', apiKey: 'none', maxRetries: 0, timeout: 300000 });
  const history = [
    { role: 'system', content: 'You call tools.' },
    { role: 'user', content: 'Weather in Paris and the time?' },
    { role: 'assistant', content: null, tool_calls: [
      { id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city": "Paris"}' } },
      { id: 'call_2', type: 'function', function: { name: 'get_time', arguments: '{}' } }] },
    { role: 'tool', tool_call_id: 'call_1', content: '{"temp": 18}' },
    { role: 'tool', tool_call_id: 'call_2', content: '12:00' },
  ];
  // few tokens: under ASan a step of this 151k-token vocabulary takes about half a second
  for (const [tool_choice, parallel_tool_calls] of [['auto', true], ['none', false]]) {
    {
      const req = { model: 'qwen3-tiny-Q4_K_M', messages: history, tools: [WEATHER, TIME], tool_choice, parallel_tool_calls, max_tokens: 8, temperature: 1, seed: 11 };
      const whole = await client.chat.completions.create(req);
      const m = whole.choices[0].message;
      eq(m.role, 'assistant', 'role');
      assert(['stop', 'length', 'tool_calls'].includes(whole.choices[0].finish_reason), `finish ${whole.choices[0].finish_reason}`);
      assert(m.content === null || typeof m.content === 'string', 'content string or null');
      sameAsWhole(await streamed(client, req), whole, `${tool_choice}, ${parallel_tool_calls}`);
    }
  }
  // chat_template_kwargs and enable_thinking are accepted; reasoning_format per request
  for (const extra of [{ chat_template_kwargs: { enable_thinking: false }, reasoning_effort: 'low' }, { enable_thinking: true, reasoning_format: 'none' }]) {
    const r = await post(s, '/v1/chat/completions', { messages: history, tools: [WEATHER], max_tokens: 1, ...extra });
    eq(r.status, 200, `accepted: ${JSON.stringify(extra)} ${r.body.slice(0, 200)}`);
  }
  // top-level enable_thinking reaches the template as chat_template_kwargs does (qwen3 closes an empty <think>)
  const pt = async (extra) => (await post(s, '/v1/chat/completions', { messages: [{ role: 'user', content: 'hi' }], max_tokens: 1, ...extra })).json.usage.prompt_tokens;
  const off = await pt({ enable_thinking: false }), kwOff = await pt({ chat_template_kwargs: { enable_thinking: false } }), on = await pt({ enable_thinking: true });
  eq(off, kwOff, 'enable_thinking false == chat_template_kwargs');
  assert(off > on, `thinking off adds the empty think block (${off} vs ${on})`);
  try {
    await client.chat.completions.create({ model: 'qwen3-tiny-Q4_K_M', messages: history, tool_choice: 'required', max_tokens: 2 });
    throw new AssertionError('tool_choice required without tools accepted');
  } catch (e) {
    assert(e instanceof OpenAI.BadRequestError, `400 expected, got ${e.message}`);
    eq(e.param, 'tool_choice', 'param');
  }
  await stopClean(s);
});

// The client's view of a stream: content, reasoning and tool calls rebuilt from the deltas.
async function streamed(client, req) {
  let content = '', reasoning = '', finish = null;
  const calls = [];
  for await (const ch of await client.chat.completions.create({ ...req, stream: true })) {
    const d = ch.choices[0] ? ch.choices[0].delta : {};
    content += d.content || '';
    reasoning += d.reasoning_content || '';
    for (const tc of d.tool_calls || []) {
      if (tc.id) { eq(tc.index, calls.length, 'a new call takes the next index'); calls[tc.index] = { id: tc.id, type: tc.type, function: { name: tc.function.name, arguments: '' } }; }
      calls[tc.index].function.arguments += tc.function.arguments || '';
    }
    finish = (ch.choices[0] && ch.choices[0].finish_reason) || finish;
  }
  return { content, reasoning, calls, finish };
}

function sameAsWhole(st, whole, what) {
  const m = whole.choices[0].message;
  eq(st.content, m.content || '', `${what}: streamed content`);
  eq(st.reasoning, m.reasoning_content || '', `${what}: streamed reasoning`);
  const noId = (cs) => cs.map(({ id, ...rest }) => (assert(typeof id === 'string' && id, 'an id'), rest));   // ids differ per answer
  eq(noId(st.calls), noId(m.tool_calls || []), `${what}: streamed tool calls`);
  eq(st.finish, whole.choices[0].finish_reason, `${what}: finish`);
}

test('tools: tool_choice required and named are forced through the grammar, then a tool-result turn', async () => {
  if (!OpenAI) return 'skip';
  // stories260K: a 512-token vocabulary keeps this fast under ASan; its chat
  // template has no tool format, so calls come back as the generic JSON answer
  const s = await stories();
  const client = new OpenAI({ baseURL: s.base + '/v1', apiKey: 'none', maxRetries: 0, timeout: 300000 });
  const CITY = { type: 'function', function: { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string', enum: ['Paris', 'Oslo'] } }, required: ['city'] } } };
  const CLOCK = { type: 'function', function: { name: 'get_time', parameters: { type: 'object', properties: {} } } };
  const messages = [{ role: 'user', content: 'Weather?' }];   // stories260K's context is 512 tokens
  const cases = [
    // one short tool: stories260K's 512-token context holds little more
    { tool_choice: 'required', parallel_tool_calls: false, seed: 1, tools: [CLOCK] },
    { tool_choice: { type: 'function', function: { name: 'get_time' } }, seed: 4, tools: [CLOCK] },
  ];
  for (const c of cases) {
    const req = { model: 'stories260K', messages, tools: c.tools, max_tokens: 300, ...c };
    const what = JSON.stringify(c);
    const whole = await client.chat.completions.create(req);
    const m = whole.choices[0].message;
    eq(whole.choices[0].finish_reason, 'tool_calls', `${what}: finish`);
    eq(m.content, null, `${what}: content null with only calls`);
    assert(m.tool_calls.length >= 1, `${what}: a call`);
    if (c.parallel_tool_calls === false || typeof c.tool_choice === 'object') eq(m.tool_calls.length, 1, `${what}: one call`);
    for (const tc of m.tool_calls) {
      assert(/^call_[A-Za-z0-9]{24}$/.test(tc.id), `${what}: id ${tc.id}`);
      eq(tc.type, 'function', 'type');
      const args = JSON.parse(tc.function.arguments);
      if (typeof c.tool_choice === 'object') eq(tc.function.name, 'get_time', `${what}: the named function`);
      if (tc.function.name === 'get_weather') assert(['Paris', 'Oslo'].includes(args.city), `${what}: city ${args.city}`);
      else { eq(tc.function.name, 'get_time', `${what}: a known function`); eq(args, {}, `${what}: no arguments`); }
    }
    sameAsWhole(await streamed(client, req), whole, what);
    // the calls and their results go back as the next turn
    const next = [...messages, m, ...m.tool_calls.map((tc, i) => ({ role: 'tool', tool_call_id: tc.id, content: `result ${i}` }))];
    const turn = await client.chat.completions.create({ model: 'stories260K', messages: next, max_tokens: 4 });   // no tools: the context is short
    eq(turn.choices[0].message.role, 'assistant', `${what}: the tool-result turn answers`);
  }
  const bad = await post(s, '/v1/chat/completions', { messages, tools: [CITY], tool_choice: 'required', response_format: { type: 'json_object' } });
  assertError(bad, 400, 'tool_choice', 'forced calls and response_format');
});

test('tools: the model\'s own format read back through the route (output held to a grammar)', async () => {
  if (!OpenAI) return 'skip';
  // the grammar field makes the random model write exactly this text in
  // qwen3's Hermes format; the route must read it as a real answer's. Few
  // requests: under ASan each of these tokens costs about a second
  const s = await startServer(['-np', '1', '-c', '1024', '--sse-keepalive', '0'], QWEN3);
  const client = new OpenAI({ baseURL: s.base + '/v1', apiKey: 'none', maxRetries: 0, timeout: 300000 });
  const lit = (t) => JSON.stringify(t);   // a GBNF string literal
  const text = '<think>\nTwo calls.\n</think>\n\nOK.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>\n' +
    '<tool_call>\n{"name": "get_time", "arguments": {}}\n</tool_call>';
  const base = { model: 'qwen3-tiny-Q4_K_M', messages: [{ role: 'user', content: 'Weather and time in Paris?' }], tools: [WEATHER, TIME], max_tokens: 300 };
  const req = { ...base, grammar: `root ::= ${lit(text)}` };
  const whole = await client.chat.completions.create(req);
  const m = whole.choices[0].message;
  eq(whole.choices[0].finish_reason, 'tool_calls', 'finish');
  eq(m.content, 'OK.', 'content before the calls');
  eq(m.reasoning_content, 'Two calls.', 'reasoning');
  eq(m.tool_calls.map((c) => [c.function.name, JSON.parse(c.function.arguments)]),
    [['get_weather', { city: 'Paris' }], ['get_time', {}]], 'two parallel calls');
  assert(m.tool_calls[0].id !== m.tool_calls[1].id, 'distinct ids');
  sameAsWhole(await streamed(client, req), whole, 'hermes');
  // a broken call is given back as content
  const broken = '<tool_call>{"name": b}</tool_call>';
  const b = await client.chat.completions.create({ ...base, grammar: `root ::= ${lit(broken)}` });
  eq(b.choices[0].message.content, broken, 'broken call: content');
  eq(b.choices[0].finish_reason, 'stop', 'broken call: stop');
  // tool_choice none (OpenAI: the model calls no tool): the tools are not
  // rendered and a call the model writes anyway is content
  const none = await client.chat.completions.create({ ...req, tool_choice: 'none' });
  eq(none.choices[0].finish_reason, 'stop', 'none: finish');
  assert(!none.choices[0].message.tool_calls, 'none: no tool_calls');
  eq(none.choices[0].message.content, text.slice(text.indexOf('OK.')), 'none: the calls are content');
  const at = async (body) => (await post(s, '/apply-template', body)).json.prompt;
  const bare = await at({ messages: base.messages });
  eq(await at({ messages: base.messages, tools: base.tools, tool_choice: 'none' }), bare, 'none: the prompt has no tools');
  assert((await at({ messages: base.messages, tools: base.tools })).includes('<tools>'), 'auto: the prompt has the tools');
  await stopClean(s);
});

test('reasoning: --reasoning-format none and auto on one stream', async () => {
  // the random model's text as it is, then through the parser: the same bytes
  // end up in content (none) or in content + reasoning (auto)
  const s = await startServer(['-np', '1', '-c', '512', '--sse-keepalive', '0', '--reasoning-format', 'none'], QWEN3);
  const req = { messages: [{ role: 'user', content: 'think' }], max_tokens: 12, temperature: 1, seed: 5 };
  const raw = await post(s, '/v1/chat/completions', req);
  eq(raw.status, 200, 'none');
  assert(raw.json.choices[0].message.reasoning_content === undefined, 'no reasoning_content with none');
  const auto = await post(s, '/v1/chat/completions', { ...req, reasoning_format: 'auto' });
  const m = auto.json.choices[0].message;
  const text = raw.json.choices[0].message.content;
  if (m.reasoning_content !== undefined) assert(text.includes(m.reasoning_content), 'reasoning comes from the text');
  else eq(m.content, text, 'no think block: the content is the text');
  await stopClean(s);
  const bad = spawn(BIN, ['serve', '-m', QWEN3, '--port', '0', '--reasoning-format', 'loud'], { stdio: ['ignore', 'ignore', 'pipe'] });
  let err = '';
  bad.stderr.on('data', (d) => { err += d; });
  eq(await new Promise((res) => bad.on('exit', res)), 2, 'a bad --reasoning-format exits 2');
  assert(/reasoning-format/.test(err), 'names the flag');
});

test('structured output: response_format, json_schema, grammar', async () => {
  const s = await stories();
  const schema = { type: 'object', properties: { color: { enum: ['red', 'blue'] }, n: { type: 'integer' }, ok: { type: 'boolean' } },
                   required: ['color', 'n', 'ok'], additionalProperties: false };
  const valid = (o) => o && ['red', 'blue'].includes(o.color) && Number.isInteger(o.n) && typeof o.ok === 'boolean' &&
                       Object.keys(o).join() === 'color,n,ok';
  if (OpenAI) {
    const client = new OpenAI({ baseURL: s.base + '/v1', apiKey: 'none', maxRetries: 0, timeout: 60000 });
    for (const seed of [1, 2, 3]) {
      const c = await client.chat.completions.create({ model: 'stories260K', messages: [{ role: 'user', content: 'Give me JSON' }],
        max_tokens: 400, temperature: 1, seed, response_format: { type: 'json_schema', json_schema: { name: 'thing', schema, strict: true } } });
      eq(c.choices[0].finish_reason, 'stop', 'finish');
      assert(valid(JSON.parse(c.choices[0].message.content)), `schema: ${c.choices[0].message.content}`);
    }
    const st = await client.chat.completions.create({ model: 'stories260K', messages: [{ role: 'user', content: 'JSON' }], max_tokens: 400,
      temperature: 0.8, seed: 9, stream: true, response_format: { type: 'json_schema', json_schema: { name: 'thing', schema } } });
    let text = '';
    for await (const ch of st) text += ch.choices[0] ? ch.choices[0].delta.content || '' : '';
    assert(valid(JSON.parse(text)), `streamed: ${text}`);
  }
  // llama.cpp's fields on /completion
  const yn = await post(s, '/completion', { prompt: 'Is it?', grammar: 'root ::= ("yes" | "no") "."', n_predict: 20, temperature: 1, seed: 4 });
  eq(yn.status, 200, 'grammar status');
  assert(['yes.', 'no.'].includes(yn.json.content), `grammar: ${yn.json.content}`);
  const js = await post(s, '/completion', { prompt: 'Data:', json_schema: schema, n_predict: 400, temperature: 1, seed: 5 });
  assert(valid(JSON.parse(js.json.content)), `json_schema: ${js.json.content}`);
  const oc = await post(s, '/v1/completions', { prompt: 'Data:', response_format: { type: 'json_object', schema }, max_tokens: 400, seed: 6 });
  assert(valid(JSON.parse(oc.json.choices[0].text)), `completions json_object+schema: ${oc.json.choices[0].text}`);
  const ob = await post(s, '/v1/chat/completions', { messages: [{ role: 'user', content: 'x' }], response_format: { type: 'json_object' }, max_tokens: 300, seed: 7 });
  const txt = ob.json.choices[0].message.content;
  if (ob.json.choices[0].finish_reason === 'stop') assert(JSON.parse(txt) && txt.trim()[0] === '{', `json_object: ${txt}`);
  else assert(txt.trimStart()[0] === '{', `json_object (cut by length): ${txt}`);
  // errors name the place
  const bad = await post(s, '/completion', { prompt: 'x', grammar: 'root ::= "a"\nx ::= [b' });
  assertError(bad, 400, 'grammar', 'bad grammar');
  assert(bad.json.error.message.includes('line 2'), bad.json.error.message);
  const badSchema = await post(s, '/completion', { prompt: 'x', json_schema: { type: 'object', properties: { a: { type: 'nope' } } } });
  assertError(badSchema, 400, 'json_schema', 'bad schema');
  // a pattern is enforced; one a grammar cannot match is a 400 that says why
  const pat = await post(s, '/completion', { prompt: 'Code:', json_schema: { type: 'string', pattern: '^[A-Z]{2}-\\d{3}$' }, n_predict: 30, temperature: 1, seed: 6 });
  assert(/^[A-Z]{2}-\d{3}$/.test(JSON.parse(pat.json.content)), `pattern: ${pat.json.content}`);
  const badPattern = await post(s, '/v1/chat/completions', { messages: [{ role: 'user', content: 'hi' }], response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'string', pattern: '(a)\\1' } } } });
  assertError(badPattern, 400, 'response_format', 'backreference');
  assert(/pattern: backreferences/.test(badPattern.json.error.message), `message: ${badPattern.json.error.message}`);
  assert(badSchema.json.error.message.includes('/properties/a'), badSchema.json.error.message);
});

test('auth: bearer keys, /health stays open', async () => {
  const keyfile = path.join(TMP, 'keys');
  writeFileSync(keyfile, '# keys\nfile-key-1\n\n  file-key-2  \n');
  const s = await startServer(['--api-key', 'sekrit', '--api-key-file', keyfile]);
  eq((await get(s, '/health')).status, 200, 'health open');
  assertError(await get(s, '/v1/models'), 401, null, 'no key');
  assertError(await get(s, '/v1/models', ['-H', 'Authorization: Bearer sekrix']), 401, null, 'wrong key');
  assertError(await get(s, '/v1/models', ['-H', 'Authorization: Bearer sekri']), 401, null, 'prefix of the key');
  assertError(await get(s, '/v1/models', ['-H', 'Authorization: Bearer sekritt']), 401, null, 'longer key');
  assertError(await post(s, '/v1/chat/completions', { messages: [] }), 401, null, 'auth before validation');
  eq((await get(s, '/v1/models', ['-H', 'Authorization: Bearer sekrit'])).status, 200, 'right key');
  eq((await get(s, '/metrics', ['-H', 'Authorization: Bearer file-key-2'])).status, 200, 'key from the file');
  eq((await get(s, '/slots', ['-H', 'X-Api-Key: file-key-1'])).status, 200, 'X-Api-Key');
  if (OpenAI) {
    const bad = new OpenAI({ baseURL: s.base + '/v1', apiKey: 'wrong', maxRetries: 0 });
    try { await bad.models.list(); throw new AssertionError('no error'); } catch (e) {
      assert(e instanceof OpenAI.AuthenticationError, `AuthenticationError, got ${e.constructor.name}`);
    }
    const good = new OpenAI({ baseURL: s.base + '/v1', apiKey: 'sekrit', maxRetries: 0 });
    eq((await good.chat.completions.create({ model: 'stories260K', messages: [{ role: 'user', content: 'x' }], max_tokens: 2 })).usage.completion_tokens, 2, 'authorized chat');
  }
  await stopClean(s);
});

test('odd values in every field: 200 or an error object, never a crash', async () => {
  const s = await stories();
  let seed = 12345;
  const rnd = (n) => { seed = (seed * 1103515245 + 12345) & 0x7fffffff; return seed % n; };
  const odd = [null, true, false, -1, 0, 1, 0.5, 1e308, -1e308, 2 ** 53, 'x', '', [], {}, [1, 'a'], [[1, 2]], { a: 1 }, '\u0000', 'é✓'];
  const bases = [
    ['/v1/chat/completions', { messages: [{ role: 'user', content: 'hi' }], max_tokens: 3 }],
    ['/v1/completions', { prompt: 'Once', max_tokens: 3 }],
    ['/completion', { prompt: 'Once', n_predict: 3 }],
    ['/infill', { input_prefix: 'a', input_suffix: 'b', n_predict: 3 }],
    ['/tokenize', { content: 'Once' }],
    ['/detokenize', { tokens: [1, 2] }],
    ['/apply-template', { messages: [{ role: 'user', content: 'hi' }] }],
  ];
  const fields = ['messages', 'prompt', 'max_tokens', 'n_predict', 'temperature', 'top_p', 'top_k', 'min_p', 'seed', 'stop',
    'logit_bias', 'logprobs', 'top_logprobs', 'n_probs', 'stream', 'stream_options', 'echo', 'suffix', 'n', 'samplers',
    'repeat_penalty', 'presence_penalty', 'frequency_penalty', 'repeat_last_n', 'id_slot', 'cache_prompt', 'n_indent',
    'response_fields', 'input_extra', 'input_prefix', 'content', 'tokens', 'with_pieces', 'model', 't_max_predict_ms', 'ignore_eos'];
  for (let i = 0; i < 300; i++) {
    const [p, base] = bases[rnd(bases.length)];
    const body = JSON.parse(JSON.stringify(base));
    for (let k = 1 + rnd(3); k > 0; k--) body[fields[rnd(fields.length)]] = odd[rnd(odd.length)];
    if (body.max_tokens === 1e308 || body.n_predict === -1 || body.n_predict === 2 ** 53) body.ignore_eos = false;
    const r = await post(s, p, body);
    const ok = r.status === 200 || ((r.status === 400 || r.status === 404) && r.json && r.json.error && r.json.error.message);
    assert(ok, `${p} ${JSON.stringify(body).slice(0, 200)} -> ${r.status} ${r.body.slice(0, 200)}`);
  }
  // byte-level damage to a valid body
  const good = Buffer.from(JSON.stringify({ messages: [{ role: 'user', content: 'héllo' }], max_tokens: 2 }));
  for (let i = 0; i < 100; i++) {
    const b = Buffer.from(good);
    for (let k = 1 + rnd(4); k > 0; k--) b[rnd(b.length)] = rnd(256);
    const r = await post(s, '/v1/chat/completions', b);
    assert(r.status === 200 || (r.status >= 400 && r.status < 500 && r.json && r.json.error), `damaged body -> ${r.status} ${r.body.slice(0, 200)}`);
  }
  eq((await get(s, '/health')).status, 200, 'still healthy');
  eq((await slots(s)).every((x) => !x.is_processing), true, 'slots idle');
});

test('concurrent requests: each the same as alone', async () => {
  const s = await stories();
  const prompts = ['Once upon a time', 'Lily and Tom were', 'The cat', 'One day', 'Tim had a'];
  const alone = [];
  for (const p of prompts) alone.push((await post(s, '/completion', { prompt: p, n_predict: 24, temperature: 0 })).json.content);
  const together = await Promise.all(prompts.map((p, i) => i % 2
    ? post(s, '/completion', { prompt: p, n_predict: 24, temperature: 0, stream: true }).then((r) => dataJson(sse(r.body)).map((j) => j.content).join(''))
    : post(s, '/completion', { prompt: p, n_predict: 24, temperature: 0 }).then((r) => r.json.content)));
  eq(together, alone, 'batched == alone');
});

test('options: alias, CORS, JSON log, prompt cache', async () => {
  const db = path.join(TMP, 'pc.db');
  const s = await startServer(['--alias', 'my-model', '--cors-origin', 'https://app.example', '--log-format', 'json', '--prompt-cache', db]);
  const m = await get(s, '/v1/models');
  eq(m.json.data[0].id, 'my-model', 'alias');
  eq(m.headers['access-control-allow-origin'], 'https://app.example', 'CORS header');
  const o = await curl(s, ['/v1/chat/completions', '-X', 'OPTIONS', '-H', 'Origin: https://app.example']);
  eq(o.status, 204, 'preflight');
  assert(/Authorization/.test(o.headers['access-control-allow-headers']), 'allowed headers');
  eq((await post(s, '/v1/chat/completions', { model: 'my-model', messages: [{ role: 'user', content: 'x' }], max_tokens: 2 })).status, 200, 'alias accepted');
  eq((await post(s, '/v1/chat/completions', { model: 'stories260K', messages: [{ role: 'user', content: 'x' }], max_tokens: 2 })).status, 200, 'file name accepted');
  const c = await get(s, '/cache');
  eq(c.json.enabled, true, 'cache on');
  eq((await curl(s, ['/cache', '-X', 'DELETE'])).status, 200, 'DELETE /cache');
  const line = s.err.split('\n').find((l) => l.startsWith('{') && l.includes('"method":"POST"'));
  assert(line, 'a JSON access log line');
  const j = JSON.parse(line);
  eq([j.method, j.path, j.status, j.generated_tokens], ['POST', '/v1/chat/completions', 200, 2], 'log fields');
  await stopClean(s);
  assert(existsSync(db), 'the prompt cache file exists');
});

// English as the demo model writes it: mostly common words of its stories
function looksEnglish(text) {
  const words = text.toLowerCase().match(/[a-z']+/g) || [];
  const common = new Set(['the', 'a', 'was', 'to', 'and', 'she', 'he', 'they', 'it', 'her', 'his', 'in', 'with',
    'said', 'day', 'one', 'time', 'there', 'little', 'big', 'play', 'saw', 'of', 'had', 'wanted', 'very', 'happy']);
  return words.length >= 8 && words.filter((w) => common.has(w)).length >= words.length / 5 &&
    /^[\x20-\x7e\n]*$/.test(text);
}

test('no --model: the demo model speaks English', async () => {
  const cache = path.join(TMP, 'cache');
  const s = await startServer(['-c', '256'], null, { XDG_CACHE_HOME: cache });
  const r = await post(s, '/v1/chat/completions', {
    messages: [{ role: 'user', content: 'Tell me a story.' }], max_tokens: 60, temperature: 0 });
  eq(r.status, 200, 'chat with the demo model');
  const text = r.json.choices[0].message.content;
  assert(looksEnglish(text), `English text from the demo model: ${JSON.stringify(text)}`);
  const c = await post(s, '/v1/completions', { prompt: 'Once upon a time', max_tokens: 20, temperature: 0 });
  eq(c.status, 200, 'completion with the demo model');
  assert(c.json.choices[0].text.startsWith(', there was a little girl named Lily.'), `the reference story: ${c.json.choices[0].text}`);
  const m = await get(s, '/v1/models');
  eq(m.json.data[0].id, 'stories260K', 'the demo model by name');
  assert(/demo model stories260K/.test(s.err), 'says it serves the demo model');
  assert(!existsSync(path.join(cache, 'hearth')), 'nothing written: the model loads from the binary');
  await stopClean(s);
});

// ---- a slow model for prefill/decode timing ------------------------------------------
// One small llama shape, written once per context length asked for.
const SMALL = new Map();
async function smallModel(name, ctx) {
  if (SMALL.has(name)) return SMALL.get(name);
  const out = path.join(TMP, `${name}.gguf`);
  await new Promise((res, rej) => {
    const p = spawn(BIN, ['mkmodel', '-o', out, '--arch', 'llama', '--embd', '256', '--layers', '4', '--heads', '4',
      '--kv-heads', '4', '--ff', '768', '--vocab', '512', '--ctx', String(ctx), '--mix', 'Q8_0', '--seed', '5'], { stdio: 'inherit' });
    p.on('exit', (c) => (c === 0 ? res() : rej(new AssertionError(`mkmodel exit ${c}`))));
  });
  SMALL.set(name, out);
  return out;
}
const slowModel = () => smallModel('slow', 8192);
// The same shape with a 32768-token context, for a stream that must still be
// running when the test acts on it: slowModel's 6000 tokens take about 2 s,
// which a test process starved by other tests can miss.
const longContextModel = () => smallModel('long', 32768);
const longPrompt = (n) => Array.from({ length: n }, (_, i) => 3 + ((i * 7) % 500));

test('disconnect in prefill and in decode frees the slot', async () => {
  const s = await startServer(['-np', '1', '-c', '8192', '-b', '16', '--sse-keepalive', '0'], await slowModel());
  const busy = async () => (await slots(s))[0].is_processing;
  const state = async () => (await slots(s))[0].state;
  // prefill, non-streaming (the request waits, suspended)
  for (const stream of [false, true]) {
    const c = rawRequest(s.port, 'POST', '/completion', { prompt: longPrompt(6000), n_predict: 4, stream });
    await waitFor(async () => (await state()) === 'prefill', 20000, 'prefill');
    c.sock.destroy();
    await waitFor(async () => !(await busy()), 10000, `slot free after a disconnect in prefill (stream ${stream})`);
  }
  // decode, streaming and not
  for (const stream of [true, false]) {
    const c = rawRequest(s.port, 'POST', '/completion', { prompt: longPrompt(20), n_predict: 6000, stream, ignore_eos: true });
    await waitFor(async () => (await state()) === 'generate' && (await slots(s))[0].n_decoded > 3, 20000, 'decode');
    c.sock.destroy();
    await waitFor(async () => !(await busy()), 10000, `slot free after a disconnect in decode (stream ${stream})`);
  }
  await waitFor(async () => (await metric(s, 'hearth_slots_busy')) === 0, 5000, 'metrics: no busy slot');
  assert(/ 499 /.test(s.err), 'access log shows 499 for a client that left');
  await stopClean(s);
});

test('keep-alive comments during a long prefill', async () => {
  const s = await startServer(['-np', '1', '-c', '8192', '-b', '16', '--sse-keepalive', '0.05'], await slowModel());
  const r = await post(s, '/completion', { prompt: longPrompt(1500), n_predict: 2, stream: true });
  eq(r.status, 200, 'status');
  const evs = sse(r.body);
  const firstData = evs.findIndex((e) => e.data);
  assert(firstData > 0 && evs.slice(0, firstData).some((e) => e.comment === 'keep-alive'), 'keep-alive before the first token');
  eq(dataJson(evs).pop().stop, true, 'ends normally');
  await stopClean(s);
});

test('queue full: 503 with Retry-After', async () => {
  const s = await startServer(['-np', '1', '--queue', '1', '-c', '8192', '-b', '16'], await slowModel());
  const a = rawRequest(s.port, 'POST', '/completion', { prompt: longPrompt(20), n_predict: 6000, ignore_eos: true });
  await waitFor(async () => (await slots(s))[0].is_processing, 20000, 'first job running');
  const b = rawRequest(s.port, 'POST', '/completion', { prompt: longPrompt(20), n_predict: 4 });
  await waitFor(async () => (await metric(s, 'hearth_queue_depth')) === 1, 10000, 'second job queued');
  const r = await post(s, '/completion', { prompt: 'x', n_predict: 2 });
  assertError(r, 503, null, 'queue full');
  eq(r.headers['retry-after'], '1', 'Retry-After');
  if (OpenAI) {
    const client = new OpenAI({ baseURL: s.base + '/v1', apiKey: 'x', maxRetries: 0 });
    try { await client.completions.create({ model: 'slow', prompt: 'x', max_tokens: 2 }); throw new AssertionError('no error'); } catch (e) {
      assert(e instanceof OpenAI.InternalServerError || e instanceof OpenAI.APIError, `APIError, got ${e.constructor.name}`);
      eq(e.status, 503, 'status');
    }
  }
  a.sock.destroy();
  await waitFor(() => b.data.includes('"stop":true'), 20000, 'the queued job runs once the slot frees');
  b.sock.destroy();
  await stopClean(s);
});

test('shutdown with a stream running: error event, exit 0', async () => {
  const s = await startServer(['-np', '1', '-c', '32768', '-b', '16'], await longContextModel());
  const c = rawRequest(s.port, 'POST', '/v1/completions', { prompt: longPrompt(20), max_tokens: 32000, stream: true });
  await waitFor(() => (c.data.match(/data: /g) || []).length > 3, 20000, 'streaming');
  await stopClean(s);
  await waitFor(() => c.closed, 5000, 'the stream closed');
  assert(/"error":\{[^}]*"message"/.test(c.data), 'an error event before the end');
  assert(/shutting down/.test(s.err), 'log says so');
  if (!OpenAI) return;
  // the openai client turns the error event into an exception
  const s2 = await startServer(['-np', '1', '-c', '32768', '-b', '16'], await longContextModel());
  const client = new OpenAI({ baseURL: s2.base + '/v1', apiKey: 'x', maxRetries: 0 });
  const stream = await client.completions.create({ model: 'long', prompt: longPrompt(20), max_tokens: 32000, stream: true });
  let n = 0, err = null, stopping = null;
  try {
    for await (const ch of stream) if (++n === 3) stopping = s2.stop();
  } catch (e) { err = e; }
  const ex = await stopping;
  eq(ex.code, 0, 'exit 0');
  assert(err instanceof OpenAI.APIError, `APIError from the stream, got ${err}`);
  assert(/shutting down/.test(err.message), `message: ${err.message}`);
});

test('/infill as llama.vim sends it, with cache warm-up (qwen3)', async () => {
  const s = await startServer(['-np', '1', '-c', '2048', '-b', '512'], QWEN3);
  const extra = [{ filename: 'util.py', text: 'def add(a, b):\n    return a + b\n' }, { filename: 'main.py', text: 'import util\nprint(util.add(1, 2))\n' }];
  const fields = ['content', 'timings/prompt_n', 'timings/prompt_ms', 'timings/prompt_per_token_ms', 'timings/prompt_per_second',
    'timings/predicted_n', 'timings/predicted_ms', 'timings/predicted_per_token_ms', 'timings/predicted_per_second', 'truncated', 'tokens_cached'];
  // the ring-buffer warm-up: n_predict 0, response_fields [""]
  const w = await post(s, '/infill', { input_prefix: '', input_suffix: '', input_extra: extra, prompt: '', n_predict: 0, samplers: [],
    cache_prompt: true, t_max_prompt_ms: 1, t_max_predict_ms: 1, response_fields: [''] });
  eq(w.status, 200, `warm-up status ${w.body}`);
  eq(w.json, {}, 'warm-up answers the empty field set');
  const req = { id_slot: 0, input_prefix: 'def mul(a, b):\n', input_suffix: '\n\nprint(mul(2, 3))\n', input_extra: extra, prompt: '    ',
    n_predict: 16, n_indent: 4, top_k: 40, top_p: 0.99, stream: false, samplers: ['top_k', 'top_p', 'infill'], cache_prompt: true,
    t_max_prompt_ms: 500, t_max_predict_ms: 1000, response_fields: fields };
  const r = await post(s, '/infill', req);
  eq(r.status, 200, `infill status ${r.body}`);
  eq(Object.keys(r.json).sort(), [...fields].sort(), 'exactly the response_fields');
  eq(r.json.truncated, false, 'truncated');
  assert(r.json.tokens_cached > r.json['timings/prompt_n'], 'the warm-up prefix was reused');
  assert(typeof r.json.content === 'string', 'content');
  const st = await post(s, '/infill', { ...req, stream: true, response_fields: undefined });
  const js = dataJson(sse(st.body));
  eq(js[js.length - 1].stop, true, 'streamed infill ends with stop');
  const f = await post(s, '/v1/completions', { prompt: 'def f(x):\n', suffix: '\n    return y\n', max_tokens: 4 });
  eq(f.status, 200, 'completions with suffix');
  // a deterministic stream equals the whole answer, whatever bytes the random model makes
  const a = await post(s, '/v1/chat/completions', { messages: [{ role: 'user', content: 'héllo wörld ✓' }], max_tokens: 24, temperature: 1, seed: 3 });
  const b = await post(s, '/v1/chat/completions', { messages: [{ role: 'user', content: 'héllo wörld ✓' }], max_tokens: 24, temperature: 1, seed: 3, stream: true });
  eq(dataJson(sse(b.body)).map((c) => (c.choices[0] && c.choices[0].delta.content) || '').join(''), a.json.choices[0].message.content, 'stream == whole');
  assert((await get(s, '/props')).json.chat_template.includes('enable_thinking'), "the model's own template");
  await stopClean(s);
});

test('/infill without FIM tokens: 400', async () => {
  const s = await stories();
  assertError(await post(s, '/infill', { input_prefix: 'a', input_suffix: 'b' }), 400, 'input_suffix', 'no FIM tokens');
  assertError(await post(s, '/v1/completions', { prompt: 'a', suffix: 'b' }), 400, 'suffix', 'no FIM tokens');
  assertError(await post(s, '/infill', { input_prefix: 5 }), 400, 'input_prefix', 'type');
});

test('loading: /health 503 until the model is in, then 200', async () => {
  // the listening line comes before the model loads; poll right away
  const proc = spawn(BIN, ['serve', '-m', QWEN3, '--port', '0', '--prompt-cache', 'off', '-t', '1'], { stdio: ['ignore', 'ignore', 'pipe'] });
  const s = { proc, err: '' };
  proc.stderr.on('data', (d) => { s.err += d; });
  const exited = new Promise((res) => proc.on('exit', (code) => res(code)));
  try {
    const port = await waitFor(() => { const m = s.err.match(/listening on http:\/\/127\.0\.0\.1:(\d+)/); return m && Number(m[1]); }, 20000, 'listening');
    const base = { base: `http://127.0.0.1:${port}` };
    const first = await get(base, '/health');
    assert(first.status === 503 || first.status === 200, 'health answers while loading');
    if (first.status === 503) assertError(first, 503, null, 'loading');
    await waitFor(async () => (await get(base, '/health')).status === 200, 60000, 'loaded');
    proc.kill('SIGTERM');
    eq(await exited, 0, 'SIGTERM exits 0');
  } finally {
    if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGKILL');   // a failed check leaves no server behind
  }
});

test('a bad model path fails cleanly', async () => {
  const proc = spawn(BIN, ['serve', '-m', path.join(TMP, 'missing.gguf'), '--port', '0'], { stdio: ['ignore', 'ignore', 'pipe'] });
  let err = '';
  proc.stderr.on('data', (d) => { err += d; });
  const code = await new Promise((res) => proc.on('exit', res));
  eq(code, 1, 'exit status');
  assert(/missing\.gguf/.test(err), 'names the file');
});

test("chat templates: the model's own Jinja (qwen3): kwargs, thinking, tools, prefill, parts", async () => {
  const s = await startServer(['-np', '1', '-c', '2048'], QWEN3);
  const at = async (body) => { const r = await post(s, '/apply-template', body); eq(r.status, 200, `apply-template ${r.body}`); return r.json.prompt; };
  const user = [{ role: 'user', content: 'hi' }];
  eq(await at({ messages: user }), '<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n', 'plain');
  eq(await at({ messages: user, chat_template_kwargs: { enable_thinking: false } }),
     '<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n', 'enable_thinking false via the template');
  // an earlier turn's <think> block is dropped by the template
  const hist = await at({ messages: [{ role: 'user', content: 'a' }, { role: 'assistant', content: '<think>\nsecret\n</think>\n\nanswer' }, { role: 'user', content: 'b' }] });
  assert(!hist.includes('secret') && hist.includes('answer'), `think stripped: ${hist}`);
  // tools, an assistant tool call with arguments as a JSON string, the tool result
  const tools = [{ type: 'function', function: { name: 'get_weather', description: 'Weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } } }];
  const tp = await at({ tools, messages: [{ role: 'user', content: 'Paris?' },
    { role: 'assistant', content: null, tool_calls: [{ id: 'c1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } }] },
    { role: 'tool', tool_call_id: 'c1', content: '18C' }] });
  assert(tp.includes('<tools>') && tp.includes('"name": "get_weather"'), `tools in the prompt: ${tp}`);
  assert(tp.includes('<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'), `tool call in history: ${tp}`);
  assert(tp.includes('<tool_response>\n18C\n</tool_response>'), `tool result: ${tp}`);
  // text parts joined with "\n"
  const mp = await at({ messages: [{ role: 'user', content: [{ type: 'text', text: 'one' }, { type: 'text', text: 'two' }] }] });
  assert(mp.includes('one\ntwo'), `parts: ${mp}`);
  // a final assistant message is continued, not closed
  const pf = await at({ messages: [{ role: 'user', content: 'Count' }, { role: 'assistant', content: 'One, two,' }] });
  assert(pf.endsWith('One, two,'), `prefill: ${JSON.stringify(pf)}`);
  // the chat route renders the same prompt: same token count
  const body = { messages: [{ role: 'user', content: 'Paris?' }, { role: 'assistant', content: 'It is' }], chat_template_kwargs: { enable_thinking: false }, max_tokens: 1 };
  const tk = await post(s, '/tokenize', { content: await at(body), add_special: true, parse_special: true });
  const ch = await post(s, '/v1/chat/completions', body);
  eq(ch.json.usage.prompt_tokens, tk.json.tokens.length, 'chat prompt == apply-template prompt');
  // bad shapes are 400s
  assertError(await post(s, '/apply-template', { messages: user, chat_template_kwargs: 3 }), 400, 'chat_template_kwargs', 'kwargs type');
  assertError(await post(s, '/apply-template', { messages: user, tools: {} }), 400, 'tools', 'tools type');
  await stopClean(s);
});

test('--chat-template NAME|FILE, a template that does not parse, hearth template', async () => {
  const s = await startServer(['--chat-template', 'llama3'], QWEN3);
  const r = await post(s, '/apply-template', { messages: [{ role: 'user', content: 'hi' }] });
  assert(r.json.prompt.endsWith('<|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n'), `llama3: ${r.json.prompt}`);
  await stopClean(s);
  const file = path.join(TMP, 'mine.jinja');
  writeFileSync(file, '{% for m in messages %}[{{ m.role }}] {{ m.content }}\n{% endfor %}{% if add_generation_prompt %}[bot] {% endif %}');
  const s2 = await startServer(['--chat-template-file', file], QWEN3);
  eq((await post(s2, '/apply-template', { messages: [{ role: 'user', content: 'hi' }] })).json.prompt, '[user] hi\n[bot] ', 'file');
  await stopClean(s2);
  const bad = path.join(TMP, 'bad.jinja');
  writeFileSync(bad, 'ok\n{% for m in messages %}\n{{ m.content }\n{% endfor %}');
  const proc = spawn(BIN, ['serve', '-m', QWEN3, '--port', '0', '--prompt-cache', 'off', '--chat-template', bad], { stdio: ['ignore', 'ignore', 'pipe'] });
  let err = '';
  proc.stderr.on('data', (d) => { err += d; });
  eq(await new Promise((res) => proc.on('exit', res)), 1, 'a template that does not parse stops the server');
  assert(/line 3/.test(err), `names the line: ${err}`);
  // hearth template -m renders the model's own template, exactly
  const vars = path.join(TMP, 'vars.json');
  writeFileSync(vars, JSON.stringify({ messages: [{ role: 'user', content: 'hi' }], add_generation_prompt: true, enable_thinking: false }));
  const out = spawnSync(BIN, ['template', '-m', QWEN3, '--vars', vars], { encoding: 'utf8' });
  eq(out.status, 0, `hearth template: ${out.stderr}`);
  eq(out.stdout, '<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n', 'hearth template output');
  const e2 = spawnSync(BIN, ['template', '-f', bad], { encoding: 'utf8' });
  eq(e2.status, 1, 'exit 1 on a bad template');
  assert(/line 3/.test(e2.stderr) && e2.stdout === '', `error on stderr: ${e2.stderr}`);
});

// llama-server's clients and the SDKs' details (compat_test.mjs), on these helpers
(await import('./compat_test.mjs')).register({ test, assert, eq, post, get, curl, sse, dataJson, assertError, stories,
  startServer, stopClean, OpenAI, waitFor, slots, slowModel, longPrompt, rawRequest, QWEN3, metric });

// ---- run ------------------------------------------------------------------------------
let passed = 0, failed = 0, skipped = 0;
for (const t of tests) {
  if (FILTER && !t.name.includes(FILTER)) continue;
  const t0 = Date.now();
  try {
    const r = await t.fn();
    if (r === 'skip') { skipped++; console.log(`skip - ${t.name} (openai package missing)`); continue; }
    passed++;
    console.log(`ok   - ${t.name} (${Date.now() - t0} ms)`);
  } catch (e) {
    failed++;
    console.log(`FAIL - ${t.name}: ${e instanceof AssertionError ? e.message : e.stack}`);
  }
}
if (S && !S.exited) {
  try { await stopClean(S); } catch (e) { failed++; console.log(`FAIL - clean shutdown of the shared server: ${e.message}`); }
}
console.log(`${passed} passed, ${failed} failed`);
if (failed) process.exit(1);
if (!OpenAI) { console.log('SKIP: the openai npm package could not be installed (npm ci failed); its tests did not run'); process.exit(77); }
process.exit(0);
