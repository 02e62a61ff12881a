// Several models in one `hearth serve` (real servers on 127.0.0.1): two
// fixtures served at once with interleaved streams (each equal to the same
// request alone), /v1/models and its states, 404 naming the models, eviction
// under --max-loaded 1 and the reload of an evicted model, keep_alive and
// --keep-alive unloading idle models, --models-dir, a load that does not
// stall another model's stream or /health, RSS and file descriptors back
// to their baseline after a load/unload loop, an embedding request holding
// its model loaded, and /metrics with every loaded model's figures.
// Prints one line per test and "N passed, N failed".
import { mkdtempSync, rmSync, readFileSync, readdirSync, copyFileSync, mkdirSync, truncateSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { SHARED, assert, sleep, waitFor, startServer as serve, mkmodel as mk, runTests } from '../lib/hearth.mjs';

const STORIES = path.join(SHARED, 'models', 'stories260K.gguf');
const QWEN2 = path.join(SHARED, 'fixtures', 'qwen2-tiny-Q8_0.gguf');
const LLAMA3 = path.join(SHARED, 'fixtures', 'llama3-tiny-Q4_0.gguf');
const TMP = mkdtempSync(path.join(tmpdir(), 'hearth-models-test-'));
process.on('exit', () => rmSync(TMP, { recursive: true, force: true }));

const startServer = (args) => serve(['-t', '1', '-np', '2', '--prompt-cache', 'off', ...args]);
const mkmodel = (name, args) => mk(path.join(TMP, name), args);
async function post(s, route, body) {
  const r = await fetch(s.base + route, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) });
  return { status: r.status, json: await r.json() };
}
async function states(s) {
  const j = await (await fetch(s.base + '/v1/models')).json();
  return Object.fromEntries(j.data.map((m) => [m.id, m.status.value]));
}
// a streamed completion: its text and the gaps between its chunks (ms)
async function stream(s, body) {
  const t0 = Date.now();
  const r = await fetch(s.base + '/v1/completions', { method: 'POST', headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ ...body, stream: true }) });
  assert(r.status === 200, `stream status ${r.status}`);
  const reader = r.body.getReader();
  const dec = new TextDecoder();
  let buf = '', text = '', last = 0, gaps = [];
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buf += dec.decode(value, { stream: true });
    let nl;
    while ((nl = buf.indexOf('\n\n')) >= 0) {
      const ev = buf.slice(0, nl); buf = buf.slice(nl + 2);
      if (!ev.startsWith('data: ') || ev === 'data: [DONE]') continue;
      const j = JSON.parse(ev.slice(6));
      if (j.choices && j.choices[0]) {
        const now = Date.now() - t0;
        if (last) gaps.push(now - last);
        last = now;
        text += j.choices[0].text || '';
      }
    }
  }
  return { text, gaps };
}
function procStats(pid) {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const rss = Number(status.match(/VmRSS:\s+(\d+)/)[1]) * 1024;
  return { rss, fds: readdirSync(`/proc/${pid}/fd`).length };
}

const tests = [];
const test = (name, fn) => tests.push({ name, fn });
const greedy = { temperature: 0, max_tokens: 24 };

test('two models at once: /v1/models lists both, requests pick, streams interleave', async () => {
  const s = await startServer(['-m', STORIES, '-m', QWEN2]);
  try {
    let st = await states(s);
    assert(st.stories260K === 'loaded' && st['qwen2-tiny-Q8_0'] === 'unloaded', `states at start: ${JSON.stringify(st)}`);
    const aloneA = await post(s, '/v1/completions', { model: 'stories260K', prompt: 'Once upon a time', ...greedy });
    const aloneB = await post(s, '/v1/completions', { model: 'qwen2-tiny-Q8_0', prompt: 'Hello world', ...greedy });
    assert(aloneA.status === 200 && aloneB.status === 200, `alone: ${aloneA.status} ${aloneB.status}`);
    assert(aloneA.json.model === 'stories260K' && aloneB.json.model === 'qwen2-tiny-Q8_0', 'answers name their model');
    st = await states(s);
    assert(st.stories260K === 'loaded' && st['qwen2-tiny-Q8_0'] === 'loaded', `both loaded: ${JSON.stringify(st)}`);
    const runs = await Promise.all([
      stream(s, { model: 'stories260K', prompt: 'Once upon a time', ...greedy }),
      stream(s, { model: 'qwen2-tiny-Q8_0', prompt: 'Hello world', ...greedy }),
      stream(s, { model: 'stories260K', prompt: 'Once upon a time', ...greedy }),
      stream(s, { model: 'qwen2-tiny-Q8_0', prompt: 'Hello world', ...greedy }),
    ]);
    assert(runs[0].text === aloneA.json.choices[0].text && runs[2].text === aloneA.json.choices[0].text,
      `stories beside qwen2 != alone: ${JSON.stringify(runs[0].text)} vs ${JSON.stringify(aloneA.json.choices[0].text)}`);
    assert(runs[1].text === aloneB.json.choices[0].text && runs[3].text === aloneB.json.choices[0].text, 'qwen2 beside stories != alone');
    // the model field of /v1/chat/completions picks too, by GGUF name or file name
    const byFile = await post(s, '/v1/chat/completions', { model: 'qwen2-tiny-Q8_0.gguf', messages: [{ role: 'user', content: 'hi' }], max_tokens: 4 });
    assert(byFile.status === 200 && byFile.json.model === 'qwen2-tiny-Q8_0', `by file name: ${byFile.status}`);
    const one = await (await fetch(s.base + '/v1/models/qwen2-tiny-Q8_0')).json();
    assert(one.id === 'qwen2-tiny-Q8_0' && one.status.value === 'loaded', `GET /v1/models/ID: ${JSON.stringify(one)}`);
  } finally { assert((await s.stop()).code === 0, 'clean exit'); }
});

test('an unknown model is a 404 naming the available ones', async () => {
  const s = await startServer(['-m', STORIES, '-m', QWEN2]);
  try {
    const r = await post(s, '/v1/completions', { model: 'no-such-model', prompt: 'x', max_tokens: 2 });
    assert(r.status === 404 && r.json.error.code === 'model_not_found', `status ${r.status}`);
    assert(/stories260K/.test(r.json.error.message) && /qwen2-tiny-Q8_0/.test(r.json.error.message), r.json.error.message);
    const g = await fetch(s.base + '/v1/models/no-such-model');
    assert(g.status === 404, `GET status ${g.status}`);
  } finally { await s.stop(); }
});

test('--max-loaded 1: a request for another model evicts the idle one; the evicted one reloads', async () => {
  const s = await startServer(['-m', STORIES, '-m', QWEN2, '-m', LLAMA3, '--max-loaded', '1']);
  try {
    const a1 = await post(s, '/v1/completions', { model: 'stories260K', prompt: 'Once', ...greedy });
    const b = await post(s, '/v1/completions', { model: 'llama3-tiny-Q4_0', prompt: 'Hi', ...greedy });
    assert(b.status === 200, `llama3: ${b.status}`);
    let st = await states(s);
    assert(st['llama3-tiny-Q4_0'] === 'loaded' && st.stories260K === 'unloaded' && st['qwen2-tiny-Q8_0'] === 'unloaded',
      `after llama3: ${JSON.stringify(st)}`);
    const a2 = await post(s, '/v1/completions', { model: 'stories260K', prompt: 'Once', ...greedy });
    assert(a2.status === 200 && a2.json.choices[0].text === a1.json.choices[0].text, 'reloaded model answers the same');
    st = await states(s);
    assert(st.stories260K === 'loaded' && st['llama3-tiny-Q4_0'] === 'unloaded', `after reload: ${JSON.stringify(st)}`);
    assert(/unloading model stories260K to make room for llama3-tiny-Q4_0/.test(s.err), 'the log names the eviction');
  } finally { await s.stop(); }
});

test('--max-loaded 1 with a stream running: the other model waits for it, then loads', async () => {
  const s = await startServer(['-m', STORIES, '-m', QWEN2, '--max-loaded', '1', '-c', '2048']);
  try {
    const long = stream(s, { model: 'stories260K', prompt: 'Once upon a time', temperature: 0, max_tokens: 1500 });
    await sleep(50);
    const other = await post(s, '/v1/completions', { model: 'qwen2-tiny-Q8_0', prompt: 'Hi', ...greedy });
    const l = await long;
    assert(other.status === 200 && l.text.length > 100, `other ${other.status}, stream ${l.text.length} chars`);
  } finally { await s.stop(); }
});

test('keep_alive 0 unloads a model once idle; --keep-alive unloads after its seconds', async () => {
  const s = await startServer(['-m', STORIES, '-m', QWEN2, '-m', LLAMA3, '--keep-alive', '1']);
  try {
    const r = await post(s, '/v1/completions', { model: 'qwen2-tiny-Q8_0', prompt: 'Hi', max_tokens: 2, keep_alive: 0 });
    assert(r.status === 200, `status ${r.status}`);
    await waitFor(async () => (await states(s))['qwen2-tiny-Q8_0'] === 'unloaded', 3000, 'keep_alive 0 to unload');
    await post(s, '/v1/completions', { model: 'llama3-tiny-Q4_0', prompt: 'Hi', max_tokens: 2 });
    assert((await states(s))['llama3-tiny-Q4_0'] === 'loaded', 'llama3 loaded');
    await waitFor(async () => (await states(s))['llama3-tiny-Q4_0'] === 'unloaded', 4000, '--keep-alive 1 to unload');
    assert((await states(s)).stories260K === 'loaded', 'the default model stays');
    const bad = await post(s, '/v1/completions', { model: 'qwen2-tiny-Q8_0', prompt: 'Hi', keep_alive: 'soon' });
    assert(bad.status === 400 && bad.json.error.param === 'keep_alive', `bad keep_alive: ${bad.status}`);
    const ok = await post(s, '/v1/completions', { model: 'qwen2-tiny-Q8_0', prompt: 'Hi', max_tokens: 2, keep_alive: '5m' });
    assert(ok.status === 200, `keep_alive 5m: ${ok.status}`);
  } finally { await s.stop(); }
});

test('--models-dir serves every .gguf in the folder', async () => {
  const dir = path.join(TMP, 'models');
  mkdirSync(dir);
  copyFileSync(STORIES, path.join(dir, 'a-stories.gguf'));
  copyFileSync(QWEN2, path.join(dir, 'b-qwen2.gguf'));
  const s = await startServer(['--models-dir', dir]);
  try {
    const ids = (await (await fetch(s.base + '/v1/models')).json()).data.map((m) => m.id);
    assert(JSON.stringify(ids) === JSON.stringify(['a-stories', 'b-qwen2']), `ids ${ids}`);
    const r = await post(s, '/v1/completions', { model: 'b-qwen2', prompt: 'Hi', max_tokens: 2 });
    assert(r.status === 200, `status ${r.status}`);
  } finally { await s.stop(); }
});

test('loading a model stalls neither another model\'s stream nor /health', async () => {
  const big = await mkmodel('big.gguf', ['--arch', 'llama', '--embd', '2048', '--layers', '4', '--heads', '16', '--ff', '5632',
    '--mix', 'Q8_0', '--vocab-gguf', STORIES, '--name', 'big']);
  const s = await startServer(['-m', STORIES, '-m', big, '-c', '2048']);
  try {
    const run = stream(s, { model: 'stories260K', prompt: 'Once upon a time', temperature: 0, max_tokens: 1200 });
    await sleep(30);
    const t0 = Date.now();
    const load = post(s, '/v1/completions', { model: 'big', prompt: 'Hi', max_tokens: 1 });
    await waitFor(async () => (await states(s)).big === 'loading', 5000, 'big to be loading');
    let worstHealth = 0;
    while ((await states(s)).big === 'loading') {
      const h0 = Date.now();
      const h = await fetch(s.base + '/health');
      worstHealth = Math.max(worstHealth, Date.now() - h0);
      assert(h.status === 200, `health ${h.status} while loading`);
      await sleep(20);
    }
    const loadMs = Date.now() - t0;
    const l = await run;
    assert((await load).status === 200, 'the big model answered');
    const worstGap = Math.max(...l.gaps);
    console.log(`  load ${loadMs} ms; worst /health ${worstHealth} ms; worst gap in the other model's stream ${worstGap} ms`);
    // a load on the loop would stall both for about the whole load; allow for
    // slow builds (sanitizers) and a busy machine, but well below that
    const limit = Math.max(250, loadMs / 5);
    assert(worstHealth < limit, `/health took ${worstHealth} ms during a ${loadMs} ms load`);
    assert(worstGap < limit, `the other stream stalled ${worstGap} ms during a ${loadMs} ms load`);
  } finally { await s.stop(); }
});

test('a load/unload loop leaks neither memory nor file descriptors', async () => {
  const s = await startServer(['-m', STORIES, '-m', QWEN2, '-m', LLAMA3, '--max-loaded', '2']);
  try {
    const cycle = async () => {
      for (const m of ['qwen2-tiny-Q8_0', 'llama3-tiny-Q4_0']) {
        const r = await post(s, '/v1/completions', { model: m, prompt: 'Hi', max_tokens: 2 });
        assert(r.status === 200, `${m}: ${r.status}`);
      }
    };
    await cycle(); await cycle();
    await waitFor(async () => Object.values(await states(s)).every((v) => v === 'loaded' || v === 'unloaded'), 5000, 'settled');
    const base = procStats(s.proc.pid);
    for (let i = 0; i < 10; i++) await cycle();
    await waitFor(async () => Object.values(await states(s)).every((v) => v === 'loaded' || v === 'unloaded'), 5000, 'settled');
    const after = procStats(s.proc.pid);
    console.log(`  after 20 loads: RSS ${(base.rss / 1048576).toFixed(1)} -> ${(after.rss / 1048576).toFixed(1)} MiB, fds ${base.fds} -> ${after.fds}`);
    assert(after.fds <= base.fds, `fds grew ${base.fds} -> ${after.fds}`);
    assert(after.rss < base.rss + 16 * 1048576, `RSS grew ${base.rss} -> ${after.rss}`);
  } finally { assert((await s.stop()).code === 0, 'clean exit'); }
});

test('a model that fails to load answers 500 and the server goes on', async () => {
  const bad = path.join(TMP, 'bad.gguf');
  copyFileSync(STORIES, bad);
  truncateSync(bad, 1000);
  const s = await startServer(['-m', STORIES, '-m', bad]);
  try {
    const r = await post(s, '/v1/completions', { model: 'bad', prompt: 'Hi', max_tokens: 2 });
    assert(r.status === 500 && r.json.error.code === 'model_load_failed', `status ${r.status} ${JSON.stringify(r.json)}`);
    const st = (await (await fetch(s.base + '/v1/models/bad')).json()).status;
    assert(st.value === 'unloaded' && st.error, `status ${JSON.stringify(st)}`);
    const ok = await post(s, '/v1/completions', { model: 'stories260K', prompt: 'Once', max_tokens: 2 });
    assert(ok.status === 200, 'the other model still answers');
  } finally { await s.stop(); }
});

test('an embedding request holds its model loaded; keep_alive 0 unloads it only after', async () => {
  // big enough that the request outlasts several reaper rounds (250 ms): an
  // unload while its jobs run would end them (503)
  const emb = await mkmodel('emb.gguf', ['--arch', 'llama', '--embd', '512', '--layers', '2', '--heads', '8', '--ff', '1408',
    '--mix', 'Q8_0', '--vocab-gguf', STORIES, '--name', 'emb']);
  const s = await startServer(['-m', STORIES, '-m', emb, '-c', '1024']);
  try {
    const input = Array.from({ length: 8 }, (_, i) => Array.from({ length: 600 }, (_, k) => 1 + ((i * 31 + k * 7) % 500)));
    await post(s, '/v1/embeddings', { model: 'emb', input: 'warm up' });
    let polls = 0, seen = new Set();
    let done = false;
    const req = post(s, '/v1/embeddings', { model: 'emb', input, keep_alive: 0 }).finally(() => { done = true; });
    while (!done) {
      const st = (await states(s)).emb;
      if (!done) { polls++; seen.add(st); }
      await sleep(50);
    }
    const r = await req;
    console.log(`  ${polls} polls while the embedding ran: ${[...seen].join(', ')}`);
    assert(r.status === 200 && r.json.data.length === 8, `status ${r.status} ${JSON.stringify(r.json).slice(0, 200)}`);
    assert(polls >= 3, `the request ended too soon to show anything (${polls} polls)`);
    assert(seen.size === 1 && seen.has('loaded'), `the model was not held: ${[...seen]}`);
    await waitFor(async () => (await states(s)).emb === 'unloaded', 3000, 'keep_alive 0 to unload once the request ended');
  } finally { assert((await s.stop()).code === 0, 'clean exit'); }
});

test('/metrics reports every loaded model under its own label', async () => {
  const s = await startServer(['-m', STORIES, '-m', QWEN2, '-m', LLAMA3, '--metrics-compat']);
  try {
    const r = await post(s, '/v1/completions', { model: 'qwen2-tiny-Q8_0', prompt: 'Hello', max_tokens: 5, ignore_eos: true });
    assert(r.status === 200, `status ${r.status}`);
    // the engine counts a step after it has handed out the step's token: a
    // scrape right after the answer may come before the last count
    let body = '';
    const series = (name) => Object.fromEntries([...body.matchAll(new RegExp(`^${name}\\{model="([^"]*)"\\} (\\S+)$`, 'gm'))]
      .map((m) => [m[1], Number(m[2])]));
    for (let i = 0; i < 100; i++) {
      body = await (await fetch(s.base + '/metrics')).text();
      if (series('hearth_engine_generated_tokens_total')['qwen2-tiny-Q8_0'] >= 4) break;
      await new Promise((ok) => setTimeout(ok, 50));
    }
    const slots = series('hearth_slots_total');
    assert(JSON.stringify(Object.keys(slots)) === JSON.stringify(['stories260K', 'qwen2-tiny-Q8_0']) &&
      slots.stories260K === 2 && slots['qwen2-tiny-Q8_0'] === 2, `hearth_slots_total: ${JSON.stringify(slots)} (llama3 is not loaded)`);
    const gen = series('hearth_engine_generated_tokens_total');
    assert(gen['qwen2-tiny-Q8_0'] === 4 && gen.stories260K === 0, `engine tokens per model: ${JSON.stringify(gen)}`);
    const kv = series('hearth_kv_bytes');
    assert(kv.stories260K > 0 && kv['qwen2-tiny-Q8_0'] > 0 && kv.stories260K !== kv['qwen2-tiny-Q8_0'], `KV bytes: ${JSON.stringify(kv)}`);
    assert(body.match(/^# TYPE hearth_kv_bytes gauge$/gm).length === 1, 'one TYPE line a name');
    // llama-server's names stay unlabelled: the sums over the loaded models
    const steps = series('hearth_engine_steps_total');
    const decode = Number(body.match(/^llamacpp:n_decode_total (\S+)$/m)[1]);
    assert(decode === steps.stories260K + steps['qwen2-tiny-Q8_0'], `llamacpp:n_decode_total ${decode} vs ${JSON.stringify(steps)}`);
  } finally { await s.stop(); }
});

process.exit((await runTests(tests)) ? 1 : 0);
