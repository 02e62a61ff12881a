// hearth chat page. Talks only to this server (/v1/models, /v1/chat/completions,
// /slots, /metrics). Model text never becomes HTML: every node is built with
// createElement and textContent, so markup in a reply shows as text.
'use strict';

const $ = (id) => document.getElementById(id);
const STORE = 'hearth.conversations';
const KEY = 'hearth.apiKey';

const state = {
  conversations: [],   // {id, title, messages: [{role, content, reasoning, tool_calls, stats}]}
  current: null,
  abort: null,         // AbortController of the reply in flight
  statusTimer: null,
};

// ---- storage -----------------------------------------------------------------
function load() {
  try { state.conversations = JSON.parse(localStorage.getItem(STORE) || '[]'); } catch { state.conversations = []; }
  if (!Array.isArray(state.conversations)) state.conversations = [];
  state.current = state.conversations[0] || newConversation();
}
function save() {
  try { localStorage.setItem(STORE, JSON.stringify(state.conversations)); } catch (e) { showState('could not save: ' + e.message); }
}
function newConversation() {
  const c = { id: Date.now().toString(36) + Math.random().toString(36).slice(2, 6), title: 'New chat', messages: [] };
  state.conversations.unshift(c);
  return c;
}

// ---- requests ------------------------------------------------------------------
function headers() {
  const h = { 'Content-Type': 'application/json' };
  const k = sessionStorage.getItem(KEY);
  if (k) h.Authorization = 'Bearer ' + k;
  return h;
}
function askKey() {
  return new Promise((resolve) => {
    const d = $('key-dialog');
    $('key-form').onsubmit = () => {
      const v = $('key-input').value.trim();
      if (v) sessionStorage.setItem(KEY, v);
      resolve(!!v);
    };
    d.showModal();
  });
}
// fetch with the key; on 401 ask for one once and retry
async function api(path, opts = {}) {
  for (let attempt = 0; ; attempt++) {
    const r = await fetch(path, { ...opts, headers: headers() });
    if (r.status !== 401 || attempt > 0) return r;
    sessionStorage.removeItem(KEY);
    if (!(await askKey())) return r;
  }
}
async function errorText(r) {
  try { const j = await r.json(); return (j.error && j.error.message) || r.statusText; } catch { return r.status + ' ' + r.statusText; }
}

// ---- Markdown, safely: blocks and inline spans as DOM nodes ---------------------
function inline(parent, text) {
  // `code`, **bold**, *em* / _em_ (not inside a word: snake_case stays); everything else is text
  const re = /(`[^`\n]+`)|(\*\*[^*\n]+\*\*)|(\*[^*\s][^*\n]*\*)|((?<![\w])_[^_\n]+_(?![\w]))/g;
  let last = 0, m;
  while ((m = re.exec(text))) {
    if (m.index > last) parent.appendChild(document.createTextNode(text.slice(last, m.index)));
    const s = m[0];
    const el = document.createElement(m[1] ? 'code' : m[2] ? 'strong' : 'em');
    el.textContent = m[2] ? s.slice(2, -2) : s.slice(1, -1);
    parent.appendChild(el);
    last = m.index + s.length;
  }
  if (last < text.length) parent.appendChild(document.createTextNode(text.slice(last)));
}
function codeBlock(lang, code) {
  const pre = document.createElement('pre');
  const c = document.createElement('code');
  if (lang) c.dataset.lang = lang;
  c.textContent = code;
  const b = document.createElement('button');
  b.type = 'button'; b.className = 'copy'; b.textContent = 'Copy';
  b.addEventListener('click', async () => {
    try { await navigator.clipboard.writeText(code); b.textContent = 'Copied'; } catch { b.textContent = 'Select and copy'; }
    setTimeout(() => { b.textContent = 'Copy'; }, 1500);
  });
  pre.append(b, c);
  return pre;
}
function markdown(text) {
  const root = document.createDocumentFragment();
  const lines = text.split('\n');
  let para = [], list = null;
  const flushPara = () => {
    if (para.length) { const p = document.createElement('p'); inline(p, para.join('\n')); root.appendChild(p); para = []; }
  };
  const flushList = () => { if (list) { root.appendChild(list); list = null; } };
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i];
    const fence = line.match(/^\s*```\s*([\w+-]*)\s*$/);
    if (fence) {
      flushPara(); flushList();
      const body = [];
      for (i++; i < lines.length && !/^\s*```\s*$/.test(lines[i]); i++) body.push(lines[i]);
      root.appendChild(codeBlock(fence[1], body.join('\n')));   // an open fence runs to the end (streaming)
      continue;
    }
    const h = line.match(/^(#{1,6})\s+(.*)$/);
    const li = line.match(/^\s*(?:[-*+]|(\d+)[.)])\s+(.*)$/);
    if (h) {
      flushPara(); flushList();
      const el = document.createElement('h' + Math.min(6, h[1].length + 2));
      inline(el, h[2]); root.appendChild(el);
    } else if (li) {
      flushPara();
      const tag = li[1] ? 'ol' : 'ul';
      if (!list || list.tagName.toLowerCase() !== tag) { flushList(); list = document.createElement(tag); }
      const item = document.createElement('li'); inline(item, li[2]); list.appendChild(item);
    } else if (!line.trim()) {
      flushPara(); flushList();
    } else {
      flushList(); para.push(line);
    }
  }
  flushPara(); flushList();
  return root;
}

// ---- rendering -------------------------------------------------------------------
function renderList() {
  const ul = $('conversations');
  ul.replaceChildren();
  for (const c of state.conversations) {
    const li = document.createElement('li');
    li.textContent = c.title || 'Chat';
    li.dataset.id = c.id;
    if (c === state.current) li.className = 'active';
    li.addEventListener('click', () => { if (!state.abort) { state.current = c; renderAll(); } });
    ul.appendChild(li);
  }
}
function messageNode(m) {
  const div = document.createElement('div');
  div.className = 'msg ' + m.role;
  const role = document.createElement('div');
  role.className = 'role'; role.textContent = m.role;
  div.appendChild(role);
  fillMessage(div, m);
  return div;
}
function fillMessage(div, m) {
  while (div.childNodes.length > 1) div.removeChild(div.lastChild);
  if (m.reasoning) {
    const d = document.createElement('details');
    d.className = 'reasoning';
    const s = document.createElement('summary'); s.textContent = 'Reasoning';
    const body = document.createElement('div'); body.appendChild(markdown(m.reasoning));
    d.append(s, body);
    div.appendChild(d);
  }
  const body = document.createElement('div');
  body.className = 'content';
  body.appendChild(markdown(m.content || ''));
  div.appendChild(body);
  for (const t of m.tool_calls || []) {
    const tc = document.createElement('div');
    tc.className = 'tool-call';
    tc.textContent = 'tool call: ' + ((t.function && t.function.name) || '?') + '(' + ((t.function && t.function.arguments) || '') + ')';
    div.appendChild(tc);
  }
  if (m.stats) {
    const s = document.createElement('div');
    s.className = 'stats'; s.textContent = m.stats;
    div.appendChild(s);
  }
}
function renderMessages() {
  const box = $('messages');
  box.replaceChildren(...state.current.messages.map(messageNode));
  box.scrollTop = box.scrollHeight;
}
function renderAll() { renderList(); renderMessages(); }
function showState(t) { $('server-state').textContent = t; }

// ---- models ------------------------------------------------------------------------
async function loadModels() {
  try {
    const r = await api('/v1/models');
    if (!r.ok) { showState(await errorText(r)); return; }
    const j = await r.json();
    const sel = $('model');
    const keep = localStorage.getItem('hearth.model');
    sel.replaceChildren();
    for (const m of j.data || []) {
      const o = document.createElement('option');
      o.value = m.id; o.textContent = m.id;
      sel.appendChild(o);
    }
    if (keep && [...sel.options].some((o) => o.value === keep)) sel.value = keep;
    showState('');
  } catch (e) { showState('server unreachable: ' + e.message); }
}

// ---- a reply -----------------------------------------------------------------------
function requestBody() {
  const msgs = [];
  const sys = $('system').value.trim();
  if (sys) msgs.push({ role: 'system', content: sys });
  for (const m of state.current.messages) {
    if (m.role === 'user' || m.role === 'assistant') msgs.push({ role: m.role, content: m.content || '' });
  }
  const body = { model: $('model').value || undefined, messages: msgs, stream: true,
    stream_options: { include_usage: true } };
  const num = (id) => { const v = $(id).value; return v === '' ? undefined : Number(v); };
  body.temperature = num('temperature');
  body.top_p = num('top_p');
  body.max_tokens = num('max_tokens');
  const seed = num('seed');
  if (seed !== undefined && Number.isFinite(seed)) body.seed = seed;
  return body;
}

// yields the parsed JSON of each SSE data line until [DONE]
async function* sse(response) {
  const reader = response.body.getReader();
  const dec = new TextDecoder();
  let buf = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buf += dec.decode(value, { stream: true });
    let nl;
    while ((nl = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, nl).replace(/\r$/, '');
      buf = buf.slice(nl + 1);
      if (!line.startsWith('data:')) continue;
      const data = line.slice(5).trim();
      if (data === '[DONE]') return;
      try { yield JSON.parse(data); } catch { /* not JSON: ignore */ }
    }
  }
}

async function send(text) {
  const conv = state.current;
  conv.messages.push({ role: 'user', content: text });
  if (conv.title === 'New chat') conv.title = text.slice(0, 40);
  const reply = { role: 'assistant', content: '', reasoning: '', tool_calls: [] };
  conv.messages.push(reply);
  save(); renderAll();
  const node = $('messages').lastChild;
  const ctl = new AbortController();
  state.abort = ctl;
  setBusy(true);
  const t0 = performance.now();
  let tFirst = 0, usage = null, timings = null, n = 0, finish = '', model = '';
  try {
    const r = await fetch('/v1/chat/completions', { method: 'POST', headers: headers(), body: JSON.stringify(requestBody()), signal: ctl.signal });
    if (r.status === 401) {
      conv.messages.pop(); conv.messages.pop();
      sessionStorage.removeItem(KEY);
      if (await askKey()) { state.abort = null; setBusy(false); return send(text); }
      throw new Error('an API key is needed');
    }
    if (!r.ok) throw new Error(await errorText(r));
    for await (const chunk of sse(r)) {
      if (chunk.error) throw new Error(chunk.error.message || 'error');
      if (chunk.usage) usage = chunk.usage;
      if (chunk.model) model = chunk.model;
      if (chunk.timings) timings = chunk.timings;
      const ch = chunk.choices && chunk.choices[0];
      if (!ch) continue;
      const d = ch.delta || {};
      if (d.content || d.reasoning_content || d.tool_calls) { if (!tFirst) tFirst = performance.now(); n++; }
      if (d.content) reply.content += d.content;
      if (d.reasoning_content) reply.reasoning += d.reasoning_content;
      for (const t of d.tool_calls || []) {
        const i = t.index || 0;
        const cur = reply.tool_calls[i] || (reply.tool_calls[i] = { id: t.id, type: 'function', function: { name: '', arguments: '' } });
        if (t.function && t.function.name) cur.function.name += t.function.name;
        if (t.function && t.function.arguments) cur.function.arguments += t.function.arguments;
      }
      if (ch.finish_reason) finish = ch.finish_reason;
      fillMessage(node, reply);
      $('messages').scrollTop = $('messages').scrollHeight;
    }
  } catch (e) {
    if (e.name === 'AbortError') finish = 'stopped';
    else { reply.role = 'error'; reply.content = (reply.content ? reply.content + '\n\n' : '') + 'Error: ' + e.message; node.className = 'msg error'; }
  }
  const t1 = performance.now();
  const gen = (usage && usage.completion_tokens) || n;
  const cached = (usage && usage.prompt_tokens_details && usage.prompt_tokens_details.cached_tokens) ||
    (timings && timings.cache_n) || 0;
  const genMs = tFirst ? t1 - tFirst : 0;
  const tps = timings && timings.predicted_per_second ? timings.predicted_per_second : (genMs > 0 && gen > 1 ? (gen - 1) / (genMs / 1000) : 0);
  reply.stats = gen + ' tokens · first token ' + (tFirst ? Math.round(tFirst - t0) + ' ms' : '-') +
    ' · ' + tps.toFixed(1) + ' tok/s · cached prompt ' + cached + (finish ? ' · ' + finish : '') + (model ? ' · ' + model : '');
  if (!reply.reasoning) delete reply.reasoning;
  if (!reply.tool_calls.length) delete reply.tool_calls;
  fillMessage(node, reply);
  state.abort = null;
  setBusy(false);
  save(); renderList();
}

function setBusy(b) {
  $('send').hidden = b;
  $('stop').hidden = !b;
  $('input').disabled = false;
  document.body.dataset.busy = b ? '1' : '';
}

// ---- slots and metrics ------------------------------------------------------------
async function refreshStatus() {
  try {
    const [s, m] = await Promise.all([api('/slots'), api('/metrics')]);
    const tbody = $('slots-table').tBodies[0];
    tbody.replaceChildren();
    if (s.ok) {
      for (const slot of await s.json()) {
        const tr = document.createElement('tr');
        const busy = slot.is_processing !== undefined ? slot.is_processing : slot.state === 1;
        for (const v of [slot.id, busy ? 'processing' : 'idle', slot.id_task !== undefined ? slot.id_task : '', slot.n_ctx]) {
          const td = document.createElement('td'); td.textContent = String(v); tr.appendChild(td);
        }
        tbody.appendChild(tr);
      }
    }
    $('metrics-text').textContent = m.ok ? await m.text() : await errorText(m);
  } catch (e) { $('metrics-text').textContent = e.message; }
}
function toggleStatus() {
  const view = $('status-view');
  view.hidden = !view.hidden;
  $('toggle-status').setAttribute('aria-expanded', String(!view.hidden));
  clearInterval(state.statusTimer);
  if (!view.hidden) { refreshStatus(); state.statusTimer = setInterval(refreshStatus, 2000); }
}

// ---- wiring ------------------------------------------------------------------------
function init() {
  load();
  const settings = JSON.parse(localStorage.getItem('hearth.settings') || '{}');
  for (const id of ['system', 'temperature', 'top_p', 'max_tokens', 'seed']) {
    if (settings[id] !== undefined) $(id).value = settings[id];
    $(id).addEventListener('change', () => {
      const s = JSON.parse(localStorage.getItem('hearth.settings') || '{}');
      s[id] = $(id).value;
      localStorage.setItem('hearth.settings', JSON.stringify(s));
    });
  }
  $('model').addEventListener('change', () => localStorage.setItem('hearth.model', $('model').value));
  $('composer').addEventListener('submit', (e) => {
    e.preventDefault();
    const text = $('input').value.trim();
    if (!text || state.abort) return;
    $('input').value = '';
    send(text);
  });
  $('input').addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && !e.shiftKey) { e.preventDefault(); $('composer').requestSubmit(); }
  });
  $('stop').addEventListener('click', () => { if (state.abort) state.abort.abort(); });
  $('new-chat').addEventListener('click', () => { if (!state.abort) { state.current = newConversation(); save(); renderAll(); } });
  $('delete-chat').addEventListener('click', () => {
    if (state.abort) return;
    state.conversations = state.conversations.filter((c) => c !== state.current);
    state.current = state.conversations[0] || newConversation();
    save(); renderAll();
  });
  $('export-chat').addEventListener('click', () => {
    const blob = new Blob([JSON.stringify(state.current, null, 2)], { type: 'application/json' });
    const a = document.createElement('a');
    a.href = URL.createObjectURL(blob);
    a.download = 'hearth-chat-' + state.current.id + '.json';
    a.click();
    setTimeout(() => URL.revokeObjectURL(a.href), 1000);
  });
  $('toggle-status').addEventListener('click', toggleStatus);
  renderAll();
  loadModels();
}
document.addEventListener('DOMContentLoaded', init);
