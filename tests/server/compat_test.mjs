// Drop-in checks for llama-server's clients and the OpenAI SDKs: the literal
// request bodies of llama.vim, llama.vscode, Continue and Tabby; llama.cpp's
// sampler fields and values (-1 lengths, u64 seeds, many stop strings);
// browser preflights with the SDK's headers; /props, /slots and /metrics in
// llama-server's shapes; error details. Registered by server_test.mjs, whose
// helpers (h) it uses.

// llama-server's documented field names (tools/server/README.md).
const PROPS_FIELDS = ['default_generation_settings', 'total_slots', 'model_path', 'chat_template', 'build_info',
  'bos_token', 'eos_token', 'modalities'];
const SLOT_FIELDS = ['id', 'id_task', 'n_ctx', 'speculative', 'is_processing', 'params', 'prompt', 'next_token'];
const PARAMS_FIELDS = ['n_predict', 'seed', 'temperature', 'dynatemp_range', 'dynatemp_exponent', 'top_k', 'top_p',
  'min_p', 'xtc_probability', 'xtc_threshold', 'typical_p', 'repeat_last_n', 'repeat_penalty', 'presence_penalty',
  'frequency_penalty', 'dry_multiplier', 'dry_base', 'dry_allowed_length', 'dry_penalty_last_n',
  'dry_sequence_breakers', 'mirostat', 'mirostat_tau', 'mirostat_eta', 'stop', 'max_tokens', 'n_keep', 'n_discard',
  'ignore_eos', 'stream', 'n_probs', 'min_keep', 'grammar', 'samplers', 'timings_per_token'];
const NEXT_TOKEN_FIELDS = ['has_next_token', 'has_new_line', 'n_remain', 'n_decoded', 'stopping_word'];
const METRICS = ['llamacpp:prompt_tokens_total', 'llamacpp:prompt_seconds_total', 'llamacpp:tokens_predicted_total',
  'llamacpp:tokens_predicted_seconds_total', 'llamacpp:prompt_tokens_seconds', 'llamacpp:predicted_tokens_seconds',
  'llamacpp:kv_cache_usage_ratio', 'llamacpp:kv_cache_tokens', 'llamacpp:requests_processing',
  'llamacpp:requests_deferred', 'llamacpp:n_decode_total'];

// The headers the openai npm client sends from a browser (its preflight asks for them).
const SDK_HEADERS = 'authorization,content-type,x-stainless-arch,x-stainless-lang,x-stainless-os,' +
  'x-stainless-package-version,x-stainless-retry-count,x-stainless-runtime,x-stainless-runtime-version,x-stainless-timeout';

export function register(h) {
  const { test, assert, eq, post, get, curl, sse, dataJson, assertError, stories, startServer, stopClean, QWEN3,
    waitFor, slots, slowModel, longPrompt, rawRequest, OpenAI, metric } = h;
  let fim = null;   // a model with fill-in-the-middle tokens, for /infill
  const fimServer = async () => {
    if (!fim || fim.exited) fim = await startServer(['-np', '1', '-c', '2048'], QWEN3);
    return fim;
  };
  const has = (o, keys, what) => { for (const k of keys) assert(o && k in o, `${what}: no '${k}' in ${JSON.stringify(o).slice(0, 300)}`); };

  test('compat: llama.vim /infill body (input_extra, t_max_prompt_ms, response_fields)', async () => {
    const s = await fimServer();
    const r = await post(s, '/infill', {
      id_slot: 0, input_prefix: 'def f(x):\n    ', input_suffix: '\n    return y\n', prompt: '',
      input_extra: [{ filename: 'util.py', text: 'def g(y):\n    return y + 1\n' }],
      n_predict: 16, stop: [], n_indent: 4, top_k: 40, top_p: 0.99, stream: false,
      samplers: ['top_k', 'top_p', 'infill'], cache_prompt: true, t_max_prompt_ms: 500, t_max_predict_ms: 1000,
      response_fields: ['content', 'timings/prompt_n', 'timings/predicted_n', 'timings/predicted_ms', 'truncated', 'tokens_cached'],
    });
    eq(r.status, 200, `llama.vim infill: ${r.body.slice(0, 200)}`);
    has(r.json, ['content', 'timings/prompt_n', 'timings/predicted_n', 'truncated', 'tokens_cached'], 'response_fields');
    eq(Object.keys(r.json).length, 6, 'only the fields asked for');
  });

  test('compat: llama.vscode /infill stream and chat edit (max_tokens -1, samplers string, DRY/XTC/typical/mirostat)', async () => {
    const inf = await post(await fimServer(), '/infill', {
      input_prefix: 'Once upon', input_suffix: ' the end.', input_extra: [{ text: 'Lily went home.\n', time: 1733000000, filename: 'a.txt' }],
      prompt: '', n_predict: 12, top_k: 40, top_p: 0.99, stream: true, samplers: ['top_k', 'top_p', 'infill'],
      cache_prompt: true, t_max_prompt_ms: 500, t_max_predict_ms: 2500,
    });
    eq(inf.status, 200, `vscode infill: ${inf.body.slice(0, 200)}`);
    const evs = dataJson(sse(inf.body));
    assert(evs.length > 1 && evs[evs.length - 1].stop === true, 'a stream ending in stop: true');
    await stopClean(fim);
    const s = await stories();
    const edit = await post(s, '/v1/chat/completions', {
      messages: [{ role: 'system', content: 'You edit code.' }, { role: 'user', content: 'Rewrite: x = 1' }],
      stream: false, max_tokens: -1, samplers: 'edkypmxt', temperature: 0.8, top_k: 40, top_p: 0.95, min_p: 0.05,
      typical_p: 0.95, xtc_probability: 0.5, xtc_threshold: 0.1, dry_multiplier: 0.8, dry_base: 1.75,
      dry_allowed_length: 2, dry_penalty_last_n: -1, dry_sequence_breakers: ['\n', ':'], repeat_penalty: 1.1,
      mirostat: 0, mirostat_tau: 5, mirostat_eta: 0.1, tfs_z: 1, dynatemp_range: 0, seed: 7,
    });
    eq(edit.status, 200, `vscode chat edit: ${edit.body.slice(0, 300)}`);
    const ch = edit.json.choices[0];
    assert(['stop', 'length'].includes(ch.finish_reason), 'finished');
    // -1: until a stop or the context: the answer may be long but never past the slot
    assert(edit.json.usage.completion_tokens >= 1 && edit.json.usage.prompt_tokens + edit.json.usage.completion_tokens <= 512, 'within the context');
    // mirostat 2 and top_n_sigma are taken; an ignored field is named, never a 400
    const m2 = await post(s, '/completion', { prompt: 'Once', n_predict: 8, mirostat: 2, mirostat_tau: 3, top_n_sigma: 1.5, seed: 3 });
    eq(m2.status, 200, 'mirostat 2');
    const ign = await post(s, '/completion', { prompt: 'Once', n_predict: 2, tfs_z: 0.9, dynatemp_range: 0.5 });
    eq(ign.status, 200, 'ignored fields accepted');
    eq(ign.headers['x-hearth-ignored'], 'tfs_z, dynatemp_range', 'ignored fields named');
    eq((await post(s, '/completion', { prompt: 'Once', n_predict: 2 })).headers['x-hearth-ignored'], undefined, 'none named when none ignored');
    // the same seed, the same text, with every new sampler on
    const body = { prompt: 'Once upon a time', n_predict: 24, seed: 11, samplers: 'edkypmxt', typical_p: 0.9,
      xtc_probability: 0.5, xtc_threshold: 0.05, dry_multiplier: 1, top_k: 0, min_p: 0 };
    const a = await post(s, '/completion', body), b = await post(s, '/completion', body);
    eq(a.json.content, b.json.content, 'reproducible with DRY, XTC and typical on');
    assertError(await post(s, '/completion', { prompt: 'x', samplers: 'kq' }), 400, 'samplers', 'unknown sampler letter');
    assertError(await post(s, '/completion', { prompt: 'x', mirostat: 3 }), 400, 'mirostat', 'mirostat 3');
  });

  test('compat: Continue /completion stream and Tabby u64 seeds', async () => {
    const s = await stories();
    const c = await post(s, '/completion', {
      prompt: 'Once upon a time', stream: true, n_predict: 10, temperature: 0.2, top_k: 40, top_p: 0.9, min_p: 0.05,
      frequency_penalty: 0, presence_penalty: 0, stop: ['\n\n', '<|endoftext|>'], cache_prompt: true, mirostat: 0,
    });
    eq(c.status, 200, 'Continue stream');
    const evs = dataJson(sse(c.body));
    assert(evs.length >= 2 && evs.every((e) => typeof e.content === 'string'), 'content events');
    // seeds as llama-server keeps them: 32 bits, 2^32 - 1 (and so -1, 2^64 - 1) random
    const t = (seed) => post(s, '/completion', { prompt: 'Once', n_predict: 12, seed, temperature: 1, top_k: 0, min_p: 0, top_p: 1 });
    const big = await t(12345678901234567000);   // reduced modulo 2^32
    eq(big.status, 200, `u64 seed: ${big.body.slice(0, 200)}`);
    const low = 12345678901234567000 % 4294967296;
    eq((await t(big.json.generation_settings.seed)).json.content, big.json.content, 'the reported seed repeats the text');
    eq(big.json.generation_settings.seed, low, 'seed mod 2^32');
    for (const seed of [18446744073709551615, -1, 4294967295]) {
      const r = await t(seed);
      eq(r.status, 200, `seed ${seed}`);
      assert(r.json.generation_settings.seed < 4294967295, `seed ${seed}: a random one was chosen`);
    }
    eq((await t(-2)).json.generation_settings.seed, 4294967294, 'negative: two\'s complement');
    assertError(await post(s, '/completion', { prompt: 'x', seed: 1.5 }), 400, 'seed', 'fractional seed');
    // more than 16 stop strings, as llama-server takes
    const stops = Array.from({ length: 40 }, (_, i) => `zz${i}`).concat(['.']);
    const st = await post(s, '/completion', { prompt: 'Once upon a time', n_predict: 64, temperature: 0, stop: stops });
    eq(st.status, 200, `40 stop strings: ${st.body.slice(0, 200)}`);
    eq(st.json.stopping_word, '.', 'the last one fires');
    assertError(await post(s, '/completion', { prompt: 'x', stop: Array(300).fill('a') }), 400, 'stop', 'stop list bounded');
    // n_predict / max_tokens -1 on every endpoint; 0 stays an OpenAI error
    for (const [p, b] of [['/v1/completions', { prompt: 'Once', max_tokens: -1 }], ['/completion', { prompt: 'Once', n_predict: -1 }]]) {
      const r = await post(s, p, { ...b, temperature: 0 });
      eq(r.status, 200, `${p} -1`);
    }
    assertError(await post(s, '/v1/completions', { prompt: 'x', max_tokens: 0 }), 400, 'max_tokens', 'max_tokens 0');
  });

  test('compat: CORS preflight with the SDK headers, on every route; none by default', async () => {
    const s = await stories();   // no --cors-origin
    const pre = (srv, p, origin = 'https://app.example') => curl(srv, [p, '-X', 'OPTIONS', '-H', `Origin: ${origin}`,
      '-H', 'Access-Control-Request-Method: POST', '-H', `Access-Control-Request-Headers: ${SDK_HEADERS}`]);
    const none = await pre(s, '/v1/chat/completions');
    eq(none.headers['access-control-allow-origin'], undefined, 'no Allow-Origin by default');
    eq(none.headers['access-control-allow-headers'], undefined, 'no Allow-Headers by default');
    eq((await get(s, '/v1/models', ['-H', 'Origin: https://app.example'])).headers['access-control-allow-origin'], undefined, 'nor on answers');
    for (const origin of ['https://app.example', '*']) {
      const c = await startServer(['--cors-origin', origin]);
      for (const p of ['/v1/chat/completions', '/v1/completions', '/v1/models', '/completion', '/infill', '/props', '/slots', '/metrics', '/health', '/tokenize']) {
        const r = await pre(c, p);
        eq(r.status, 204, `${origin} ${p}: preflight`);
        eq(r.headers['access-control-allow-origin'], origin, `${origin} ${p}: Allow-Origin`);
        eq(r.headers['access-control-allow-headers'], SDK_HEADERS, `${origin} ${p}: the asked-for headers echoed`);
        assert(/POST/.test(r.headers['access-control-allow-methods']), `${origin} ${p}: methods`);
      }
      // odd Access-Control-Request-Headers values are not echoed
      const odd = await curl(c, ['/v1/models', '-X', 'OPTIONS', '-H', 'Access-Control-Request-Headers: a;b=c']);
      eq(odd.headers['access-control-allow-headers'], 'Authorization, Content-Type, X-Api-Key', 'not echoed');
      const a = await post(c, '/v1/chat/completions', { messages: [{ role: 'user', content: 'x' }], max_tokens: 2 }, ['-H', 'Origin: https://app.example']);
      eq(a.headers['access-control-allow-origin'], origin, `${origin}: on the answer`);
      await stopClean(c);
    }
  });

  test('compat: /props, /slots and --metrics-compat in llama-server\'s shapes', async () => {
    const s = await stories();
    const p = (await get(s, '/props')).json;
    has(p, PROPS_FIELDS, '/props');
    has(p.default_generation_settings, SLOT_FIELDS, 'default_generation_settings');
    has(p.default_generation_settings.params, PARAMS_FIELDS, 'default_generation_settings.params');
    has(p.default_generation_settings.next_token, NEXT_TOKEN_FIELDS, 'next_token');
    eq(p.total_slots, 2, 'total_slots');
    eq([p.bos_token, p.eos_token], ['<s>', '</s>'], 'bos/eos');
    assert(/stories260K\.gguf$/.test(p.model_path), 'model_path');
    assert(typeof p.chat_template === 'string' && p.chat_template.includes('{%'), 'chat_template: Jinja source');
    eq(p.default_generation_settings.params.seed, 4294967295, 'default seed: random');
    const sl = (await get(s, '/slots')).json;
    for (const x of sl) { has(x, SLOT_FIELDS, '/slots'); has(x.params, PARAMS_FIELDS, 'slot params'); has(x.next_token, NEXT_TOKEN_FIELDS, 'slot next_token'); }
    assertError(await get(s, '/v1/models/nope'), 404, 'model', 'model_not_found');
    eq((await get(s, '/v1/models/nope')).json.error.type, 'invalid_request_error', 'model_not_found: OpenAI\'s type');
    eq((await post(s, '/v1/completions', { model: 'nope', prompt: 'x' })).json.error.type, 'invalid_request_error', 'on a generation too');
    assert(!/llamacpp:/.test((await get(s, '/metrics')).body), 'no llamacpp:* names by default');
    const m = await startServer(['--metrics-compat']);
    await post(m, '/completion', { prompt: 'Once upon a time', n_predict: 5, ignore_eos: true });
    const body = (await get(m, '/metrics')).body;
    for (const n of METRICS) assert(new RegExp(`^# TYPE ${n} (counter|gauge)$`, 'm').test(body) && new RegExp(`^${n} [0-9.e+-]+$`, 'm').test(body), `metric ${n}`);
    assert(/^llamacpp:tokens_predicted_total 5$/m.test(body), 'predicted tokens counted');
    assert(/^hearth_generated_tokens_total 5$/m.test(body), 'hearth_* kept');
    await stopClean(m);
  });

  test('compat: the access log counts the tokens a cancelled request generated', async () => {
    const s = await startServer(['-np', '1', '-c', '8192', '--sse-keepalive', '0'], await slowModel());
    for (const stream of [true, false]) {
      const c = rawRequest(s.port, 'POST', '/completion', { prompt: longPrompt(20), n_predict: 6000, stream, ignore_eos: true });
      // is_processing too: the last job's n_decoded stays on an idle slot, and
      // a new request reaches its slot only once its prompt is made off the loop
      await waitFor(async () => { const x = (await slots(s))[0]; return x.is_processing && x.n_decoded > 3; }, 20000, 'decoding');
      c.sock.destroy();
      await waitFor(async () => !(await slots(s))[0].is_processing, 10000, 'slot free');
    }
    // a client that leaves n = 2 choices (one running, one queued) cancels both
    const g = rawRequest(s.port, 'POST', '/v1/completions', { prompt: longPrompt(20), n: 2, max_tokens: 6000, stream: true, ignore_eos: true });
    await waitFor(async () => { const x = (await slots(s))[0]; return x.is_processing && x.n_decoded > 3; }, 20000, 'decoding n=2');
    g.sock.destroy();
    await waitFor(async () => !(await slots(s))[0].is_processing, 10000, 'slot free after n=2');
    const lines = s.err.split('\n').filter((l) => / POST \/completion 499 /.test(l));
    eq(lines.length, 2, `two 499 lines in: ${s.err.slice(-600)}`);
    for (const l of lines) assert(/ gen=([1-9]\d*) /.test(l), `tokens generated before the cancel counted: ${l}`);
    await stopClean(s);
  });

  test('compat: n > 1 choices share one prefill, each as it would be alone', async () => {
    const s = await startServer(['-np', '4', '-c', '512', '--sse-keepalive', '0']);
    const prompt = longPrompt(200);
    const cmpl = (b) => post(s, '/v1/completions', { prompt, max_tokens: 10, cache_prompt: false, ...b });
    const text = async (b) => { const r = await cmpl(b); eq(r.status, 200, r.body.slice(0, 200)); return r.json.choices.map((c) => c.text); };
    const [alone] = await text({ temperature: 0 });
    const before = await metric(s, 'hearth_cached_prompt_tokens_total');
    eq(await text({ temperature: 0, n: 4 }), [alone, alone, alone, alone], 'greedy: every choice is the answer alone');
    // with no prefix reuse, only the sharing skips prompt tokens: 199 for each later choice
    eq(await metric(s, 'hearth_cached_prompt_tokens_total') - before, 3 * 199, 'the later choices took the first one\'s prefill');
    const seeded = await text({ temperature: 1, top_k: 0, top_p: 1, min_p: 0, seed: 40, n: 3 });
    for (let k = 0; k < 3; k++) eq(seeded[k], (await text({ temperature: 1, top_k: 0, top_p: 1, min_p: 0, seed: 40 + k }))[0], `choice ${k} == seed ${40 + k} alone`);
    assert(seeded[0] !== seeded[1] || seeded[1] !== seeded[2], 'the seeds differ');
    // streamed: each index adds up to the whole answer's choice
    const st = await cmpl({ temperature: 1, top_k: 0, top_p: 1, min_p: 0, seed: 40, n: 3, stream: true });
    const got = ['', '', ''];
    for (const ev of dataJson(sse(st.body))) for (const c of ev.choices || []) got[c.index] += c.text;
    eq(got, seeded, 'streamed n=3 == whole');
    await stopClean(s);
  });

  test('compat: echo with logprobs gives the prompt\'s logprobs (teacher forcing), max_tokens 0 scores a prompt', async () => {
    const s = await stories();
    const ids = [1, 300, 200, 450, 77, 401, 33, 5, 260];
    const cmpl = async (b) => {
      const r = await post(s, '/v1/completions', { temperature: 0, cache_prompt: false, ignore_eos: true, ...b });
      eq(r.status, 200, r.body.slice(0, 300));
      return r.json;
    };
    // teacher forcing, one request per prefix: the next prompt token forced by a bias
    // (a bias moves the pick, never the reported logprobs, which are the model's)
    const want = [null], wantTop = [null];
    for (let i = 1; i < ids.length; i++) {
      const r = await cmpl({ prompt: ids.slice(0, i), max_tokens: 1, logprobs: 3, logit_bias: { [ids[i]]: 100 } });
      const l = r.choices[0].logprobs;
      eq(r.usage.completion_tokens, 1, 'one forced token');
      want.push(l.token_logprobs[0]);
      wantTop.push(l.top_logprobs[0]);
    }
    for (const max_tokens of [0, 1, 4]) {
      const r = await cmpl({ prompt: ids, max_tokens, logprobs: 3, echo: true });
      const l = r.choices[0].logprobs;
      eq(l.tokens.length, ids.length + max_tokens, `max_tokens ${max_tokens}: a logprob entry per prompt and generated token`);
      eq(l.token_logprobs.slice(0, ids.length), want, `max_tokens ${max_tokens}: prompt logprobs == teacher forcing`);
      eq(l.top_logprobs.slice(0, ids.length), wantTop, `max_tokens ${max_tokens}: prompt top_logprobs == teacher forcing`);
      eq(l.text_offset[0], 0, 'first offset');
      assert(l.text_offset.every((o, i) => !i || o >= l.text_offset[i - 1]), `offsets ascend: ${l.text_offset}`);
      eq(r.choices[0].text, (await cmpl({ prompt: ids, max_tokens, echo: true })).choices[0].text, 'the text is the echo and the answer');
      if (max_tokens) eq(l.token_logprobs.slice(ids.length), (await cmpl({ prompt: ids, max_tokens, logprobs: 3 })).choices[0].logprobs.token_logprobs, 'generated logprobs unchanged');
      if (max_tokens === 0) eq(r.usage.completion_tokens, 0, 'nothing generated');
    }
    // streamed: the echo chunk carries the prompt's logprobs, then one chunk a token
    const st = await post(s, '/v1/completions', { prompt: ids, max_tokens: 3, logprobs: 3, echo: true, temperature: 0, stream: true });
    const evs = dataJson(sse(st.body)).filter((e) => e.choices.length);
    eq(evs[0].choices[0].logprobs.token_logprobs, want, 'the echo chunk: prompt logprobs');
    const whole = await cmpl({ prompt: ids, max_tokens: 3, logprobs: 3, echo: true });
    eq(evs.flatMap((e) => e.choices[0].logprobs ? e.choices[0].logprobs.token_logprobs : []), whole.choices[0].logprobs.token_logprobs, 'streamed == whole');
    eq(evs.map((e) => e.choices[0].text).join(''), whole.choices[0].text, 'streamed text == whole');
    // lm-eval-harness' loglikelihood body: token lists, max_tokens 0 or 1, logprobs 1, echo
    const ctx = [ids.slice(0, 5), ids];
    const lm = await cmpl({ model: 'stories260K', prompt: ctx, max_tokens: 0, logprobs: 1, echo: true, seed: 1234 });
    eq(lm.choices.map((c) => c.index), [0, 1], 'one choice per prompt');
    eq(lm.choices[0].logprobs.token_logprobs, want.slice(0, 5), 'prompt 0 scored');
    eq(lm.choices[1].logprobs.token_logprobs, want, 'prompt 1 scored');
    // n = 2: both choices carry the prompt's logprobs
    const two = await cmpl({ prompt: ids, max_tokens: 2, logprobs: 1, echo: true, n: 2 });
    for (const c of two.choices) eq(c.logprobs.token_logprobs.slice(0, ids.length), want, `choice ${c.index}: prompt logprobs`);
    // a text prompt: the tokens' texts in order, the first without a logprob
    const t = await cmpl({ prompt: 'Once upon a time', max_tokens: 0, logprobs: 2, echo: true });
    const tl = t.choices[0].logprobs;
    eq(t.choices[0].text, 'Once upon a time', 'echo text');
    eq(tl.tokens.length, t.usage.prompt_tokens, 'an entry per prompt token');
    eq(tl.token_logprobs[0], null, 'the first has none');
    eq(tl.top_logprobs[0], null, 'nor alternatives');
    assert(tl.token_logprobs.slice(1).every((x) => typeof x === 'number' && x <= 0), `logprobs: ${tl.token_logprobs}`);
    assert(tl.top_logprobs.slice(1).every((x) => Object.keys(x).length === 2), 'two alternatives each');
    // offsets into the echoed text (the tokenizer's added space before 'Once' is not in it)
    for (let i = 2; i < tl.tokens.length; i++)
      assert(t.choices[0].text.startsWith(tl.tokens[i], tl.text_offset[i]), `token ${i} '${tl.tokens[i]}' at ${tl.text_offset[i]}`);
  });

  // The documented shapes (OpenAI API reference: the chat completion chunk, the
  // legacy completion object) that the SDKs' stream types read, checked field by field.
  const isInt = (x) => Number.isInteger(x);
  const isNum = (x) => typeof x === 'number';
  const isStr = (x) => typeof x === 'string';
  const tokenLogprob = (t, top, what) => {
    assert(isStr(t.token) && isNum(t.logprob) && t.logprob <= 0, `${what}: token, logprob`);
    assert(t.bytes === null || (Array.isArray(t.bytes) && t.bytes.every((b) => isInt(b) && b >= 0 && b < 256)), `${what}: bytes`);
    if (top !== undefined) {
      assert(Array.isArray(t.top_logprobs) && t.top_logprobs.length === top, `${what}: ${top} top_logprobs`);
      t.top_logprobs.forEach((x, i) => tokenLogprob(x, undefined, `${what} top ${i}`));
    }
  };
  const chunkHead = (c, object, what) => {
    assert(isStr(c.id) && c.object === object && isInt(c.created) && isStr(c.model) && Array.isArray(c.choices), `${what}: id, object, created, model, choices`);
  };
  // A stream read the way the SDKs' stream helpers accumulate it: by choice index.
  const accumulate = (evs, chat) => {
    const acc = [];
    for (const ev of evs) for (const c of ev.choices) {
      const a = acc[c.index] || (acc[c.index] = { text: '', lp: [], finish: null, role: null });
      if (chat) {
        if (c.delta.role) a.role = c.delta.role;
        a.text += c.delta.content || '';
        if (c.logprobs && c.logprobs.content) a.lp.push(...c.logprobs.content);
      } else {
        a.text += c.text;
        if (c.logprobs) a.lp.push(...c.logprobs.tokens.map((t, i) => [t, c.logprobs.token_logprobs[i]]));
      }
      if (c.finish_reason) { assert(!a.finish, `index ${c.index}: one finish_reason`); a.finish = c.finish_reason; }
    }
    return acc;
  };

  test('compat: streamed n > 1 with logprobs in the documented chunk shapes, one id, == the whole answer', async () => {
    const s = await stories();
    const body = { messages: [{ role: 'user', content: 'Tell me a story' }], n: 3, seed: 9, max_tokens: 6, temperature: 1, logprobs: true, top_logprobs: 2 };
    const st = await post(s, '/v1/chat/completions', { ...body, stream: true, stream_options: { include_usage: true } });
    const raw = sse(st.body);
    eq(raw[raw.length - 1].data, '[DONE]', 'the stream ends with [DONE]');
    const evs = dataJson(raw);
    evs.forEach((c, i) => {
      chunkHead(c, 'chat.completion.chunk', `chunk ${i}`);
      for (const ch of c.choices) {
        assert(isInt(ch.index) && ch.index >= 0 && ch.index < 3, `chunk ${i}: index`);
        assert(ch.delta && typeof ch.delta === 'object', `chunk ${i}: delta`);
        assert(ch.delta.content === undefined || ch.delta.content === null || isStr(ch.delta.content), `chunk ${i}: content`);
        assert([null, 'stop', 'length'].includes(ch.finish_reason), `chunk ${i}: finish_reason ${ch.finish_reason}`);
        assert(ch.logprobs === null || Array.isArray(ch.logprobs.content), `chunk ${i}: logprobs`);
        if (ch.logprobs) ch.logprobs.content.forEach((t, k) => tokenLogprob(t, 2, `chunk ${i} lp ${k}`));
      }
    });
    eq(new Set(evs.map((c) => c.id)).size, 1, 'one id for every choice\'s chunks');
    const last = evs[evs.length - 1];
    eq(last.choices, [], 'the usage chunk has no choices');
    assert(isInt(last.usage.prompt_tokens) && last.usage.total_tokens === last.usage.prompt_tokens + last.usage.completion_tokens, 'usage');
    const acc = accumulate(evs, true);
    const whole = (await post(s, '/v1/chat/completions', body)).json;
    eq(acc.length, 3, 'three choices');
    whole.choices.forEach((c, i) => {
      eq(acc[i].role, 'assistant', `choice ${i}: role`);
      eq(acc[i].text, c.message.content, `choice ${i}: streamed text == whole`);
      eq(acc[i].lp, c.logprobs.content, `choice ${i}: streamed logprobs == whole`);
      eq(acc[i].lp.map((t) => t.token).join(''), c.message.content, `choice ${i}: the logprob tokens spell the text`);
      eq(acc[i].finish, c.finish_reason, `choice ${i}: finish`);
    });
    eq(last.usage.completion_tokens, whole.usage.completion_tokens, 'usage: streamed == whole');
    // the legacy endpoint: n = 2 with echo and logprobs
    const lb = { prompt: 'Once upon a time', n: 2, seed: 9, max_tokens: 5, temperature: 1, logprobs: 2, echo: true };
    const ls = dataJson(sse((await post(s, '/v1/completions', { ...lb, stream: true })).body));
    ls.forEach((c, i) => {
      chunkHead(c, 'text_completion', `legacy chunk ${i}`);
      for (const ch of c.choices) {
        assert(isStr(ch.text) && isInt(ch.index) && [null, 'stop', 'length'].includes(ch.finish_reason), `legacy chunk ${i}: text, index, finish`);
        const l = ch.logprobs;
        if (l === null) continue;
        const n = l.tokens.length;
        assert(l.token_logprobs.length === n && l.top_logprobs.length === n && l.text_offset.length === n, `legacy chunk ${i}: parallel arrays`);
        assert(l.tokens.every(isStr) && l.text_offset.every(isInt), `legacy chunk ${i}: tokens, offsets`);
        l.token_logprobs.forEach((x, k) => assert(x === null ? k === 0 && ch.text === lb.prompt : isNum(x), `legacy chunk ${i}: logprob ${k}`));
        l.top_logprobs.forEach((x, k) => assert(x === null || Object.values(x).every(isNum), `legacy chunk ${i}: top ${k}`));
      }
    });
    eq(new Set(ls.map((c) => c.id)).size, 1, 'legacy: one id');
    const la = accumulate(ls, false), lw = (await post(s, '/v1/completions', lb)).json;
    lw.choices.forEach((c, i) => {
      eq(la[i].text, c.text, `legacy choice ${i}: streamed text == whole`);
      eq(la[i].lp, c.logprobs.tokens.map((t, k) => [t, c.logprobs.token_logprobs[k]]), `legacy choice ${i}: logprobs`);
    });
  });

  test('compat: n > 1, prompt lists and streamed legacy logprobs through the openai client', async () => {
    if (!OpenAI) return 'skip';
    const s = await stories();
    const client = new OpenAI({ baseURL: `${s.base}/v1`, apiKey: 'none', maxRetries: 0 });
    const msgs = [{ role: 'user', content: 'Tell me a story' }];
    // n = 2: two choices, in order; choice k samples with seed + k
    const two = await client.chat.completions.create({ model: 'stories260K', messages: msgs, n: 2, seed: 5, max_tokens: 12, temperature: 1 });
    eq(two.choices.map((c) => c.index), [0, 1], 'chat n=2: indexes');
    const one = async (seed) => (await client.chat.completions.create({ model: 'stories260K', messages: msgs, seed, max_tokens: 12, temperature: 1 })).choices[0].message.content;
    eq(two.choices[0].message.content, await one(5), 'choice 0 = seed 5 alone');
    eq(two.choices[1].message.content, await one(6), 'choice 1 = seed 6 alone');
    const single = await client.chat.completions.create({ model: 'stories260K', messages: msgs, max_tokens: 12 });
    eq(two.usage.prompt_tokens, single.usage.prompt_tokens, 'the prompt counts once');
    eq(two.usage.completion_tokens, two.choices.length && two.usage.total_tokens - two.usage.prompt_tokens, 'completion tokens summed');
    // streamed n = 2: each index's deltas add up to the whole answer's choice
    const st = await client.chat.completions.create({ model: 'stories260K', messages: msgs, n: 2, seed: 5, max_tokens: 12, temperature: 1, stream: true, stream_options: { include_usage: true } });
    const got = ['', ''], fin = [null, null];
    let usage = null;
    for await (const ch of st) {
      for (const c of ch.choices) { got[c.index] += c.delta.content || ''; if (c.finish_reason) fin[c.index] = c.finish_reason; }
      if (ch.usage) usage = ch.usage;
    }
    eq(got, two.choices.map((c) => c.message.content), 'streamed n=2 == whole');
    assert(fin.every((f) => f), 'each choice finished');
    eq(usage && usage.completion_tokens, two.usage.completion_tokens, 'streamed usage summed');
    // a list of prompts: one choice per prompt, index in order, each as it would be alone
    const prompts = ['Once upon a time', 'The little dog', 'Lily went'];
    const list = await client.completions.create({ model: 'stories260K', prompt: prompts, max_tokens: 8, temperature: 0 });
    eq(list.choices.map((c) => c.index), [0, 1, 2], 'prompt list: indexes');
    for (let i = 0; i < prompts.length; i++) {
      const alone = await client.completions.create({ model: 'stories260K', prompt: prompts[i], max_tokens: 8, temperature: 0 });
      eq(list.choices[i].text, alone.choices[0].text, `prompt ${i} as alone`);
    }
    const ids = await client.completions.create({ model: 'stories260K', prompt: [[1, 300, 200], [1, 450]], max_tokens: 4, temperature: 0, n: 2 });
    eq(ids.choices.map((c) => c.index), [0, 1, 2, 3], 'token lists x n=2: prompt by prompt');
    // logprobs on the legacy endpoint in stream mode
    const ls = await client.completions.create({ model: 'stories260K', prompt: 'Once upon a time', max_tokens: 6, temperature: 0, logprobs: 2, stream: true });
    let n = 0, text = '';
    for await (const ch of ls) {
      const c = ch.choices[0];
      if (!c || !c.logprobs) continue;
      n += c.logprobs.tokens.length;
      text += c.text;
      eq(c.logprobs.tokens.length, c.logprobs.token_logprobs.length, 'tokens and logprobs');
      assert(c.logprobs.top_logprobs.every((t) => Object.keys(t).length === 2), 'two alternatives each');
    }
    eq(n, 6, 'a logprob per streamed token');
    const whole = await client.completions.create({ model: 'stories260K', prompt: 'Once upon a time', max_tokens: 6, temperature: 0, logprobs: 2 });
    eq(text, whole.choices[0].text, 'streamed == whole');
    eq(whole.choices[0].logprobs.tokens.length, 6, 'whole logprobs');
    assertError(await post(s, '/v1/chat/completions', { messages: msgs, n: 17 }), 400, 'n', 'n above the cap');
    assertError(await post(s, '/v1/completions', { prompt: Array(33).fill('x') }), 400, 'prompt', 'too many prompts');
  });
}
