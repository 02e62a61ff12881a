// Renders every template in tests/jinja/templates (and the chat templates in
// the shared models' tokenizer_config.json files) over every conversation in
// tests/jinja/vars with @huggingface/jinja, the reference renderer, and with
// `hearth template -f`, and fails on any byte that differs. A case the
// reference itself rejects must be rejected by hearth too (exit 1).
//   node compare.mjs HEARTH_BIN SHARED_DIR
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
// the reference comes from tests/server's node_modules (package-lock.json pins it)
const ref = path.join(here, '..', 'server', 'node_modules', '@huggingface', 'jinja', 'dist', 'index.js');
const { Template } = await import(ref);
const [bin, shared] = process.argv.slice(2);
if (!bin || !shared) { console.error('usage: node compare.mjs HEARTH_BIN SHARED_DIR'); process.exit(2); }

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'hearth-jinja-'));
const templates = [];
for (const f of fs.readdirSync(path.join(here, 'templates')).sort())
  if (f.endsWith('.jinja')) templates.push({ name: f, src: fs.readFileSync(path.join(here, 'templates', f), 'utf8') });
const models = path.join(shared, 'models');
for (const f of fs.readdirSync(models).sort()) {
  if (!f.endsWith('tokenizer_config.json')) continue;
  const cfg = JSON.parse(fs.readFileSync(path.join(models, f), 'utf8'));
  let t = cfg.chat_template;
  if (Array.isArray(t)) t = (t.find((x) => x.name === 'default') || t[0]).template;
  if (typeof t !== 'string') continue;
  const tok = (x) => (typeof x === 'string' ? x : x && x.content) || '';
  templates.push({ name: f, src: t, bos: tok(cfg.bos_token), eos: tok(cfg.eos_token) });
}
if (templates.length < 4) { console.error(`FAIL: only ${templates.length} templates found`); process.exit(1); }

const varsets = [];
for (const f of fs.readdirSync(path.join(here, 'vars')).sort())
  if (f.endsWith('.json')) varsets.push({ name: f, vars: JSON.parse(fs.readFileSync(path.join(here, 'vars', f), 'utf8')) });

// Pairs where the reference's output is not a prompt anyone wants, so the
// pair is left out: a dict joined to a string prints as "[object Map]"
// there (hearth prints its JSON, as llama-server's minja does).
const known = {
  'deepseek-r1-distill.jinja': { 'tools.json': 'tool arguments object + string' },
  'deepseek-v3.1.jinja': { 'tools.json': 'tool arguments object + string' },
};

let cases = 0, failed = 0, both_err = 0, lenient = 0;
for (const t of templates) {
  const tfile = path.join(tmp, 'tpl.jinja');
  fs.writeFileSync(tfile, t.src);
  let parsed = null, perr = null;
  try { parsed = new Template(t.src); } catch (e) { perr = e; }
  // a template may name the conversations it is for: {# vars: a.json b.json #}
  const only = /\{#-?\s*vars:([^#]*)#\}/.exec(t.src);
  const sets = only ? varsets.filter((v) => only[1].split(/\s+/).includes(v.name)) : varsets.filter((v) => !v.name.startsWith('x_'));
  for (const v of sets) {
    if (known[t.name] && known[t.name][v.name]) continue;
    const vars = { bos_token: t.bos ?? '<s>', eos_token: t.eos ?? '</s>', ...v.vars };
    let want = null, werr = null;
    if (parsed) {
      try { want = parsed.render(vars); } catch (e) { werr = e; }
    } else werr = perr;
    const vfile = path.join(tmp, 'vars.json');
    fs.writeFileSync(vfile, JSON.stringify(vars));
    let got = null, gerr = null;
    try {
      got = execFileSync(bin, ['template', '-f', tfile, '--vars', vfile], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
    } catch (e) { gerr = (e.stderr || '').toString().trim() || String(e); }
    cases++;
    const label = `${t.name} x ${v.name}`;
    if (werr) {
      // hearth may be more lenient than the reference (Python's Jinja2 renders
      // what the reference refuses, e.g. None in '~'); count, do not fail
      if (got !== null) { lenient++; if (process.env.VERBOSE) console.log(`note ${label}: only the reference fails: ${werr.message}`); }
      else both_err++;
      continue;
    }
    if (got === null) { failed++; console.log(`FAIL ${label}: hearth failed: ${gerr}`); continue; }
    if (got !== want) {
      failed++;
      let i = 0;
      while (i < got.length && got[i] === want[i]) i++;
      console.log(`FAIL ${label}: differs at byte ${i}\n  want: ${JSON.stringify(want.slice(Math.max(0, i - 60), i + 80))}\n  got:  ${JSON.stringify(got.slice(Math.max(0, i - 60), i + 80))}`);
    }
  }
}
fs.rmSync(tmp, { recursive: true, force: true });
console.log(`${cases} renders of ${templates.length} templates x ${varsets.length} conversations: ${cases - failed - both_err - lenient} identical ` +
            `(${both_err} rejected by both, ${lenient} rejected by the reference only), ${failed} different`);
process.exit(failed ? 1 : 0);
