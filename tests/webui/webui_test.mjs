// The chat page in headless Chromium (Debian's chromium, driven by
// puppeteer-core) against real `hearth serve` processes on 127.0.0.1:
// streamed text grows and finishes, stop cancels the request and the slot goes
// idle, the model picker, conversations survive a reload, model text with
// markup renders as text (no script runs), the API-key prompt, --no-webui,
// the page's size and first paint, and a screenshot.
// Prints one line per test and "N passed, N failed".
import { mkdtempSync, rmSync, statSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import puppeteer from 'puppeteer-core';
import { SHARED, assert, sleep, waitFor, startServer as serve, mkmodel, runTests } from '../lib/hearth.mjs';

const OUT = process.env.HEARTH_BUILD_ROOT || tmpdir();
const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';
const STORIES = path.join(SHARED, 'models', 'stories260K.gguf');
const TMP = mkdtempSync(path.join(tmpdir(), 'hearth-webui-test-'));
process.on('exit', () => rmSync(TMP, { recursive: true, force: true }));

const startServer = (extra = [], models = [STORIES]) =>
  serve([...models.flatMap((m) => ['-m', m]), '-t', '1', '-np', '2', '--prompt-cache', 'off', ...extra]);

// a random-weight model big enough that a reply streams for seconds (the
// stop test acts while it runs); its vocabulary is stories260K's
const slowModel = () => mkmodel(path.join(TMP, 'slow.gguf'), ['--arch', 'llama', '--embd', '1024', '--layers', '6',
  '--heads', '8', '--ff', '2816', '--ctx', '32768', '--mix', 'Q4_0', '--vocab-gguf', STORIES, '--name', 'slow']);

// ---- the browser ----------------------------------------------------------------
const browser = await puppeteer.launch({
  executablePath: CHROMIUM,
  headless: true,
  userDataDir: path.join(TMP, 'profile'),
  args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
    '--disable-component-update', '--disable-sync', '--disable-dev-shm-usage'],
});
process.on('exit', () => { try { browser.process()?.kill('SIGKILL'); } catch { /* gone */ } });

async function openPage(s) {
  const page = await browser.newPage();
  page.errors = [];
  page.on('pageerror', (e) => page.errors.push(String(e)));
  page.on('console', (m) => { if (m.type() === 'error') page.errors.push(m.text()); });
  await page.goto(s.base + '/', { waitUntil: 'load' });
  return page;
}
const text = (page, sel) => page.$eval(sel, (e) => e.textContent).catch(() => '');
const lastReply = (page) => page.evaluate(() => {
  const m = [...document.querySelectorAll('#messages .msg')].pop();
  if (!m) return { text: '', stats: '', cls: '' };
  const c = m.querySelector('.content');
  return { text: c ? c.textContent : '', stats: (m.querySelector('.stats') || {}).textContent || '', cls: m.className };
});
async function sendMessage(page, msg) {
  await page.click('#input');
  await page.type('#input', msg);
  await page.keyboard.press('Enter');
}
async function slotsBusy(s) {
  const r = await fetch(s.base + '/slots');
  const slots = await r.json();
  return slots.filter((x) => (x.is_processing !== undefined ? x.is_processing : x.state === 1)).length;
}

// ---- tests ----------------------------------------------------------------------
const tests = [];
const test = (name, fn) => tests.push({ name, fn });
let main;

test('page loads under its CSP with no errors, small, painted', async () => {
  const r = await fetch(main.base + '/');
  const csp = r.headers.get('content-security-policy') || '';
  assert(/script-src 'self'/.test(csp) && !/unsafe-inline/.test(csp), `CSP: ${csp}`);
  let total = (await r.arrayBuffer()).byteLength;
  for (const f of ['/webui/app.js', '/webui/style.css']) {
    const a = await fetch(main.base + f);
    assert(a.status === 200, `${f}: ${a.status}`);
    total += (await a.arrayBuffer()).byteLength;
  }
  assert(total < 100 * 1024, `page is ${total} bytes`);
  const page = await openPage(main);
  await waitFor(() => page.$eval('#model', (e) => e.options.length).catch(() => 0), 10000, 'the model list');
  // on a loaded machine the paint entry can come after the model list: wait for it
  const readPaint = () => page.evaluate(() => {
    const p = performance.getEntriesByType('paint').find((e) => e.name === 'first-contentful-paint') ||
      performance.getEntriesByType('paint')[0];
    return p ? p.startTime : 0;
  });
  const paint = await waitFor(readPaint, 10000, 'a paint entry');
  assert(paint > 0, 'no paint entry');
  console.log(`  page ${total} bytes, first paint ${paint.toFixed(0)} ms`);
  assert(page.errors.length === 0, `page errors: ${page.errors.join('; ')}`);
  await page.close();
});

test('a message streams a reply that grows and finishes, with stats', async () => {
  const page = await openPage(main);
  await page.evaluate(() => { document.getElementById('max_tokens').value = '40'; document.getElementById('temperature').value = '0'; });
  await page.evaluate(() => {
    window.__lengths = [];
    new MutationObserver(() => {
      const m = [...document.querySelectorAll('#messages .msg.assistant .content')].pop();
      if (m) window.__lengths.push(m.textContent.length);
    }).observe(document.getElementById('messages'), { childList: true, subtree: true, characterData: true });
  });
  await sendMessage(page, 'Once upon a time');
  await waitFor(async () => (await lastReply(page)).stats !== '', 180000, 'the reply to finish');
  const lengths = await page.evaluate(() => window.__lengths);
  const grew = new Set(lengths).size;
  const r = await lastReply(page);
  assert(r.text.length > 20, `reply too short: ${JSON.stringify(r.text)}`);
  assert(grew >= 5, `reply did not grow while streaming: ${[...new Set(lengths)].slice(0, 20)}`);
  assert(/tokens/.test(r.stats) && /tok\/s/.test(r.stats) && /first token \d+ ms/.test(r.stats) && /cached prompt/.test(r.stats), `stats: ${r.stats}`);
  await page.screenshot({ path: path.join(OUT, 'webui-chat.png') });
  const size = statSync(path.join(OUT, 'webui-chat.png')).size;
  assert(size > 10000, `screenshot is only ${size} bytes`);
  assert(page.errors.length === 0, `page errors: ${page.errors.join('; ')}`);
  await page.close();
});

test('stop mid-reply cancels the request: the slot goes idle', async () => {
  const page = await openPage(main);
  await page.evaluate(() => { document.getElementById('max_tokens').value = '8000'; });
  await sendMessage(page, 'Tell me a very long story');
  await waitFor(async () => (await lastReply(page)).text.length > 10, 120000, 'some streamed text');
  const during = await lastReply(page);
  assert(await slotsBusy(main) >= 1, `no slot busy while streaming (reply so far: ${JSON.stringify(during).slice(0, 300)})`);
  await page.click('#stop');
  await waitFor(async () => (await slotsBusy(main)) === 0, 5000, 'the slot to go idle after stop');
  const r = await lastReply(page);
  assert(/stopped/.test(r.stats), `stats after stop: ${r.stats}`);
  const hidden = await page.$eval('#stop', (e) => e.hidden);
  assert(hidden, 'stop button still shown');
  await page.close();
});

test('conversations survive a reload; new and delete', async () => {
  const page = await openPage(main);
  const before = await page.$$eval('#conversations li', (l) => l.length);
  assert(before >= 1, 'no conversation listed');
  const title = await text(page, '#conversations li.active');
  await page.reload({ waitUntil: 'load' });
  const after = await text(page, '#conversations li.active');
  assert(after === title, `after reload: ${after} != ${title}`);
  const msgs = await page.$$eval('#messages .msg', (l) => l.length);
  assert(msgs >= 2, `messages after reload: ${msgs}`);
  await page.click('#new-chat');
  assert((await page.$$eval('#conversations li', (l) => l.length)) === before + 1, 'new chat not listed');
  await page.click('#delete-chat');
  assert((await page.$$eval('#conversations li', (l) => l.length)) === before, 'delete did not remove it');
  await page.close();
});

test('model text with markup renders as text: no script runs', async () => {
  const page = await openPage(main);
  const payload = 'Look: <img src=x onerror="window.__pwned=1"> and <script>window.__pwned=2</script> ' +
    '**bold** `code` snake_case_name\n```html\n<script>window.__pwned=3</script>\n```\n- <b onmouseover="window.__pwned=4">item</b>';
  await page.setRequestInterception(true);
  const canned = (req) => {
    if (!req.url().endsWith('/v1/chat/completions')) { req.continue(); return; }
    const chunks = [];
    for (let i = 0; i < payload.length; i += 7) {
      chunks.push('data: ' + JSON.stringify({ choices: [{ index: 0, delta: { content: payload.slice(i, i + 7) } }] }) + '\n\n');
    }
    chunks.push('data: ' + JSON.stringify({ choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] }) + '\n\n', 'data: [DONE]\n\n');
    req.respond({ status: 200, contentType: 'text/event-stream', body: chunks.join('') });
  };
  page.on('request', canned);
  await sendMessage(page, 'show markup');
  await waitFor(async () => (await lastReply(page)).stats !== '', 10000, 'the canned reply');
  await sleep(200);
  const res = await page.evaluate(() => {
    const m = [...document.querySelectorAll('#messages .msg')].pop();
    return { pwned: window.__pwned, imgs: m.querySelectorAll('img').length, scripts: m.querySelectorAll('script').length,
      bolds: m.querySelectorAll('b').length, strong: m.querySelectorAll('strong').length, pre: m.querySelectorAll('pre').length,
      text: m.textContent };
  });
  assert(res.pwned === undefined, `a payload ran: ${res.pwned}`);
  assert(res.imgs === 0 && res.scripts === 0 && res.bolds === 0, `markup became elements: ${JSON.stringify(res)}`);
  assert(res.text.includes('<img src=x onerror="window.__pwned=1">') && res.text.includes('<script>window.__pwned=2</script>'), 'payload not shown as text');
  assert(res.text.includes('snake_case_name'), 'intraword underscores became emphasis');
  assert(res.strong === 1 && res.pre === 1, `markdown not rendered: ${JSON.stringify(res)}`);
  // and after a reload (from localStorage) it is still inert
  page.off('request', canned);
  await page.setRequestInterception(false);
  await page.reload({ waitUntil: 'load' });
  await sleep(200);
  const again = await page.evaluate(() => ({ pwned: window.__pwned, imgs: document.querySelectorAll('#messages img').length }));
  assert(again.pwned === undefined && again.imgs === 0, `after reload: ${JSON.stringify(again)}`);
  await page.click('#delete-chat');
  await page.close();
});

test('reasoning is folded away and tool calls are shown', async () => {
  const page = await openPage(main);
  await page.setRequestInterception(true);
  const canned = (req) => {
    if (!req.url().endsWith('/v1/chat/completions')) { req.continue(); return; }
    const ev = (delta, finish) => 'data: ' + JSON.stringify({ model: 'canned', choices: [{ index: 0, delta, finish_reason: finish || null }] }) + '\n\n';
    const body = ev({ role: 'assistant', reasoning_content: 'Let me think ' }) + ev({ reasoning_content: 'about <b>it</b>.' }) +
      ev({ content: 'The weather:' }) +
      ev({ tool_calls: [{ index: 0, id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":' } }] }) +
      ev({ tool_calls: [{ index: 0, function: { arguments: '"Paris"}' } }] }) + ev({}, 'tool_calls') + 'data: [DONE]\n\n';
    req.respond({ status: 200, contentType: 'text/event-stream', body });
  };
  page.on('request', canned);
  await sendMessage(page, 'weather?');
  await waitFor(async () => (await lastReply(page)).stats !== '', 10000, 'the canned reply');
  const res = await page.evaluate(() => {
    const m = [...document.querySelectorAll('#messages .msg')].pop();
    const d = m.querySelector('details.reasoning');
    return { folded: d && !d.open, reasoning: d ? d.textContent : '', tool: (m.querySelector('.tool-call') || {}).textContent,
      content: m.querySelector('.content').textContent, bolds: m.querySelectorAll('b').length, stats: m.querySelector('.stats').textContent };
  });
  assert(res.folded && res.reasoning.includes('Let me think about <b>it</b>.'), `reasoning: ${JSON.stringify(res)}`);
  assert(res.bolds === 0, 'reasoning markup became elements');
  assert(res.tool === 'tool call: get_weather({"city":"Paris"})', `tool call: ${res.tool}`);
  assert(res.content === 'The weather:' && /tool_calls/.test(res.stats), `content/stats: ${JSON.stringify(res)}`);
  page.off('request', canned);
  await page.setRequestInterception(false);
  await page.click('#delete-chat');
  await page.close();
});

test('the model picker lists /v1/models; a switch sends the pick and the reply comes from it', async () => {
  const page = await openPage(main);
  const want = (await (await fetch(main.base + '/v1/models')).json()).data.map((m) => m.id);
  await waitFor(() => page.$eval('#model', (e) => e.options.length).catch(() => 0), 10000, 'the model list');
  const got = await page.$$eval('#model option', (l) => l.map((o) => o.value));
  assert(JSON.stringify(got) === JSON.stringify(want), `picker ${got} != ${want}`);
  assert(want.length === 2, `two models served: ${want}`);
  const pick = want[want.length - 1];
  await page.select('#model', pick);
  let sent = null;
  await page.setRequestInterception(true);
  page.on('request', (req) => {
    if (req.url().endsWith('/v1/chat/completions')) { sent = JSON.parse(req.postData()); }
    req.continue();
  });
  await page.evaluate(() => { document.getElementById('max_tokens').value = '8'; });
  await sendMessage(page, 'hello');
  await waitFor(async () => (await lastReply(page)).stats !== '', 120000, 'the reply');
  assert(sent && sent.model === pick && sent.stream === true, `request body: ${JSON.stringify(sent)}`);
  const stats = (await lastReply(page)).stats;
  assert(stats.endsWith(' · ' + pick), `the reply does not come from ${pick}: ${stats}`);
  // and back to the first model
  await page.select('#model', want[0]);
  await sendMessage(page, 'hello again');
  await waitFor(async () => { const r = await lastReply(page); return r.stats !== '' && r.stats.endsWith(' · ' + want[0]); }, 120000, 'a reply from the first model');
  await page.reload({ waitUntil: 'load' });
  await waitFor(() => page.$eval('#model', (e) => e.options.length).catch(() => 0), 10000, 'the model list');
  assert((await page.$eval('#model', (e) => e.value)) === want[0], 'the last pick was not kept over a reload');
  await page.close();
});

test('slots and metrics view refreshes while open', async () => {
  const page = await openPage(main);
  await page.click('#toggle-status');
  await waitFor(async () => (await page.$$eval('#slots-table tbody tr', (l) => l.length)) >= 1, 5000, 'slot rows');
  const m1 = await text(page, '#metrics-text');
  assert(/hearth_/.test(m1), `metrics: ${m1.slice(0, 100)}`);
  await fetch(main.base + '/health');
  await waitFor(async () => (await text(page, '#metrics-text')) !== m1, 6000, 'the metrics to refresh');
  await page.close();
});

test('with --api-key the page asks for the key once and uses it', async () => {
  const s = await startServer(['--api-key', 'sekrit-key']);
  try {
    assert((await fetch(s.base + '/')).status === 200, 'the page itself needs no key');
    const page = await openPage(s);
    await waitFor(() => page.$eval('#key-dialog', (d) => d.open), 10000, 'the key dialog');
    await page.type('#key-input', 'sekrit-key');
    await page.keyboard.press('Enter');
    await waitFor(() => page.$eval('#model', (e) => e.options.length).catch(() => 0), 10000, 'models after the key');
    const stored = await page.evaluate(() => sessionStorage.getItem('hearth.apiKey'));
    assert(stored === 'sekrit-key', 'key not kept in sessionStorage');
    const local = await page.evaluate(() => JSON.stringify(localStorage));
    assert(!local.includes('sekrit-key'), 'key leaked into localStorage');
    await page.evaluate(() => { document.getElementById('max_tokens').value = '8'; });
    await sendMessage(page, 'hi');
    await waitFor(async () => (await lastReply(page)).stats !== '', 120000, 'a reply with the key');
    assert(!(await lastReply(page)).cls.includes('error'), 'reply failed');
    await page.close();
  } finally { await s.stop(); }
});

test('--no-webui: / answers 404', async () => {
  const s = await startServer(['--no-webui']);
  try {
    const r = await fetch(s.base + '/');
    assert(r.status === 404, `status ${r.status}`);
    assert((await fetch(s.base + '/webui/app.js')).status === 404, 'app.js still served');
    assert((await fetch(s.base + '/health')).status === 200, 'health');
  } finally { await s.stop(); }
});

// ---- run --------------------------------------------------------------------------
mkdirSync(OUT, { recursive: true });
main = await startServer(['-c', '8192'], [await slowModel(), STORIES]);
const failed = await runTests(tests);
await main.stop();
await browser.close();
process.exit(failed ? 1 : 0);
