// Shared by the node tests (tests/server, tests/webui, tests/models): assertions, waiting,
// `hearth serve` processes on 127.0.0.1 with ephemeral ports, and `hearth
// mkmodel`. Servers still running when the process exits are killed.
import { spawn } from 'node:child_process';

export const BIN = process.env.HEARTH_BIN;
export const SHARED = process.env.HEARTH_SHARED;
if (!BIN || !SHARED) { console.error('HEARTH_BIN and HEARTH_SHARED must be set'); process.exit(1); }

export class AssertionError extends Error {}
export function assert(cond, msg) { if (!cond) throw new AssertionError(msg); }
export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
export async function waitFor(fn, ms, what) {
  const end = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > end) throw new AssertionError(`timed out waiting for ${what}`);
    await sleep(25);
  }
}

const servers = new Set();
process.on('exit', () => { for (const s of servers) s.proc.kill('SIGKILL'); });

// `hearth serve ARGS --port 0` (env: variables added to this process's),
// resolved once /health answers 200; s.stop() sends SIGINT and resolves with
// the exit {code, sig}.
export async function startServer(args, env = {}) {
  const proc = spawn(BIN, ['serve', '--port', '0', ...args], { stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, ...env } });
  const s = { proc, err: '', exited: null };
  s.exitP = new Promise((res) => proc.on('exit', (code, sig) => { s.exited = { code, sig }; servers.delete(s); res(s.exited); }));
  proc.stderr.on('data', (d) => { s.err += d; });
  servers.add(s);
  s.port = await waitFor(() => {
    if (s.exited) throw new AssertionError(`server exited early: ${s.err}`);
    const m = s.err.match(/listening on http:\/\/127\.0\.0\.1:(\d+)/);
    return m && Number(m[1]);
  }, 30000, 'the listening line');
  s.base = `http://127.0.0.1:${s.port}`;
  await waitFor(async () => {
    if (s.exited) throw new AssertionError(`server exited: ${s.err}`);
    try { return (await fetch(s.base + '/health')).status === 200; } catch { return false; }
  }, 120000, 'GET /health 200');
  s.stop = async () => {
    if (s.exited) return s.exited;
    proc.kill('SIGINT');
    const t = setTimeout(() => proc.kill('SIGKILL'), 30000);
    const e = await s.exitP;
    clearTimeout(t);
    return e;
  };
  return s;
}

// `hearth mkmodel -o OUT ARGS`, resolved with OUT
export function mkmodel(out, args) {
  return new Promise((res, rej) => {
    const p = spawn(BIN, ['mkmodel', '-o', out, ...args], { stdio: 'ignore' });
    p.on('exit', (c) => (c === 0 ? res(out) : rej(new AssertionError(`mkmodel exit ${c}`))));
  });
}

// runs the tests in order; prints one line each and "N passed, N failed"
export async function runTests(tests) {
  let passed = 0, failed = 0;
  for (const t of tests) {
    const t0 = Date.now();
    try { await t.fn(); passed++; console.log(`ok   ${t.name} (${Date.now() - t0} ms)`); }
    catch (e) { failed++; console.log(`FAIL ${t.name}: ${e.message}`); }
  }
  console.log(`${passed} passed, ${failed} failed`);
  return failed;
}
