/* `hearth chat`: a conversation in the terminal. The model runs in this
 * process on the batch engine (one slot, so each turn reuses the resident
 * KV of the conversation so far and prefills only the new messages); the
 * messages go through the model's own chat template. Ctrl-C stops the reply
 * being written and returns to the prompt; Ctrl-D or /exit leaves. */
#include "server/commands.h"
#include "server/cli_args.h"
#include "server/line_edit.h"
#include "server/utf8.h"
#include "server/prompt.h"
#include "engine/sched/engine.h"
#include "engine/synth/demo_model.h"
#include "engine/text/chat_template.h"
#include "engine/text/tokenizer.h"
#include "runtime/pool.h"
#include <cjson/cJSON.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static volatile sig_atomic_t interrupted;
static void on_sigint(int sig) { (void)sig; interrupted = 1; }

static void usage(void) {
    fprintf(stderr,
        "usage: hearth chat [-m MODEL.gguf] [options]\n"
        "  -m, --model PATH       GGUF model (default: the built-in demo model)\n"
        "  -s, --system TEXT      system prompt\n"
        "  --chat-template NAME|FILE  a built-in template or a Jinja file (default: the model's own)\n"
        "  -n, --n-predict N      most tokens per reply (default: until the model ends its turn)\n"
        "  -c, --ctx-size N       context length (default 4096, at most the model's)\n"
        "  -t, --threads N        compute threads (default: physical cores)\n"
        SAMPLING_FLAGS_HELP
        "In the chat: /system TEXT, /clear, /save FILE, /load FILE, /help, /exit.\n"
        "Ctrl-C stops a reply; Ctrl-D or /exit leaves.\n");
}

/* ---- one reply: engine events arrive on the engine thread ------------------ */
typedef struct reply {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool done;
    char *text;
    size_t len, cap;
    int n_prompt, n_cached, n_generated;
    double t_gen_ms;
    finish_reason finish;
} reply;

static void reply_append(reply *r, const char *s, size_t n) {
    if (r->len + n + 1 > r->cap) {
        size_t cap = (r->len + n + 1) * 2;
        char *t = realloc(r->text, cap);
        if (!t) return;
        r->text = t;
        r->cap = cap;
    }
    memcpy(r->text + r->len, s, n);
    r->len += n;
    r->text[r->len] = 0;
}

static void on_event(void *user, const job_event *ev) {
    reply *r = user;
    pthread_mutex_lock(&r->mu);
    if (ev->text_len) {
        fwrite(ev->text, 1, ev->text_len, stdout);
        fflush(stdout);
        reply_append(r, ev->text, ev->text_len);
    }
    if (ev->type == JOB_EV_DONE) {
        r->n_prompt = ev->n_prompt;
        r->n_cached = ev->n_cached;
        r->n_generated = ev->n_generated;
        r->t_gen_ms = ev->t_gen_ms;
        r->finish = ev->finish;
        r->done = true;
        pthread_cond_signal(&r->cv);
    }
    pthread_mutex_unlock(&r->mu);
}

/* ---- the conversation ---------------------------------------------------- */
typedef struct chat {
    const model *m;
    engine *e;
    chat_template *tpl;
    cJSON *messages;          /* [{role, content}], the system message first if any */
    job_params params;
} chat;

static cJSON *message(const char *role, const char *content) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "role", role);
    cJSON_AddStringToObject(o, "content", content);
    return o;
}

static void set_system(chat *c, const char *text) {
    cJSON *first = cJSON_GetArrayItem(c->messages, 0);
    cJSON *role = first ? cJSON_GetObjectItem(first, "role") : NULL;
    bool has = role && cJSON_IsString(role) && !strcmp(role->valuestring, "system");
    if (has) cJSON_DeleteItemFromArray(c->messages, 0);
    if (*text) cJSON_InsertItemInArray(c->messages, 0, message("system", text));
}

static void clear_turns(chat *c) {
    cJSON *first = cJSON_GetArrayItem(c->messages, 0);
    cJSON *role = first ? cJSON_GetObjectItem(first, "role") : NULL;
    int keep = role && cJSON_IsString(role) && !strcmp(role->valuestring, "system");
    while (cJSON_GetArraySize(c->messages) > keep) cJSON_DeleteItemFromArray(c->messages, keep);
}

static void save_chat(const chat *c, const char *path) {
    char *text = cJSON_Print(c->messages);
    FILE *f = text ? fopen(path, "w") : NULL;
    bool ok = f && fputs(text, f) >= 0;
    if (f) ok = fclose(f) == 0 && ok;
    if (ok) fprintf(stderr, "saved %d messages to %s\n", cJSON_GetArraySize(c->messages), path);
    else fprintf(stderr, "could not save to %s\n", path);
    free(text);
}

static void load_chat(chat *c, const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) { fprintf(stderr, "could not open %s\n", path); return; }
    char *buf = NULL;
    size_t n = 0, cap = 0;
    for (size_t k; (cap - n > 1 || (buf = realloc(buf, cap = cap * 2 + 4096))) &&
                   (k = fread(buf + n, 1, cap - n - 1, f)) > 0;) {
        n += k;
        if (n > (64u << 20)) break;
    }
    fclose(f);
    if (!buf) return;
    buf[n] = 0;
    cJSON *msgs = cJSON_Parse(buf);
    free(buf);
    bool ok = cJSON_IsArray(msgs);
    const cJSON *it;
    cJSON_ArrayForEach(it, msgs) {
        const cJSON *role = cJSON_GetObjectItem(it, "role"), *content = cJSON_GetObjectItem(it, "content");
        ok = ok && cJSON_IsString(role) && cJSON_IsString(content);
    }
    if (!ok) { fprintf(stderr, "%s is not a list of {role, content} messages\n", path); cJSON_Delete(msgs); return; }
    cJSON_Delete(c->messages);
    c->messages = msgs;
    fprintf(stderr, "loaded %d messages from %s\n", cJSON_GetArraySize(msgs), path);
}

/* Renders the conversation, generates the reply, and appends it. */
static void turn(chat *c) {
    char err[512];
    char *text = chat_template_apply(c->tpl, c->messages, NULL, NULL, true, err, sizeof err);
    if (!text) { fprintf(stderr, "hearth: chat template: %s\n", err); return; }
    const tokenizer *t = c->m->tok;
    int32_t *ids = NULL;
    int n = tokenizer_encode(t, text, strlen(text), true, true, &ids);
    free(text);
    int32_t bos = tokenizer_bos(t);
    if (n >= 2 && bos >= 0 && ids[0] == bos && ids[1] == bos) memmove(ids, ids + 1, (size_t)--n * sizeof *ids);
    reply r = { .mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER };
    uint64_t id;
    int rc = n > 0 ? engine_submit(c->e, ids, n, &c->params, on_event, &r, &id) : ENGINE_PROMPT_TOO_LONG;
    free(ids);
    if (rc != ENGINE_OK) {
        fprintf(stderr, rc == ENGINE_PROMPT_TOO_LONG ? "hearth: the conversation no longer fits the context: /clear starts again\n"
                                                     : "hearth: the engine refused the request (%d)\n", rc);
        cJSON_DeleteItemFromArray(c->messages, cJSON_GetArraySize(c->messages) - 1);
        return;
    }
    interrupted = 0;
    pthread_mutex_lock(&r.mu);
    bool cancelled = false;
    while (!r.done) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 50 * 1000000L;
        if (ts.tv_nsec >= 1000000000L) { ts.tv_sec++; ts.tv_nsec -= 1000000000L; }
        pthread_cond_timedwait(&r.cv, &r.mu, &ts);
        if (interrupted && !cancelled) { engine_cancel(c->e, id); cancelled = true; }
    }
    pthread_mutex_unlock(&r.mu);
    double tps = r.t_gen_ms > 0 ? r.n_generated * 1000.0 / r.t_gen_ms : 0;
    fprintf(stdout, "\n");
    fprintf(stderr, "[%d tokens, %.1f tok/s, prompt %d (%d cached)%s]\n", r.n_generated, tps, r.n_prompt,
            r.n_cached, r.finish == FINISH_CANCELLED ? ", stopped" : r.finish == FINISH_LENGTH ? ", length" : "");
    /* the model may write ill-formed UTF-8 (byte tokens): the history holds U+FFFD instead */
    char *clean = utf8_sanitize(r.text ? r.text : "", r.len, NULL);
    cJSON_AddItemToArray(c->messages, message("assistant", clean ? clean : ""));
    free(clean);
    free(r.text);
    pthread_mutex_destroy(&r.mu);
    pthread_cond_destroy(&r.cv);
}

static bool command(chat *c, const char *line) {   /* false: leave */
    const char *arg = strchr(line, ' ');
    arg = arg ? arg + 1 : "";
    while (*arg == ' ') arg++;
    if (!strcmp(line, "/exit") || !strcmp(line, "/quit")) return false;
    if (!strncmp(line, "/system", 7) && (line[7] == ' ' || !line[7])) {
        set_system(c, arg);
        fprintf(stderr, *arg ? "system prompt set\n" : "system prompt removed\n");
    } else if (!strcmp(line, "/clear")) {
        clear_turns(c);
        fprintf(stderr, "conversation cleared\n");
    } else if (!strncmp(line, "/save ", 6) && *arg) {
        save_chat(c, arg);
    } else if (!strncmp(line, "/load ", 6) && *arg) {
        load_chat(c, arg);
    } else {
        fprintf(stderr, "/system TEXT, /clear, /save FILE, /load FILE, /exit\n");
    }
    return true;
}

int cmd_chat(int argc, char **argv) {
    const char *model_path = NULL, *system = NULL, *template_name = NULL, *v;
    int n_predict = -1, n_ctx = 4096, n_threads = pool_default_threads();
    job_params params;
    job_params_default(&params);
    for (int i = 1; i < argc; i++) {
        int r = arg_sampling(argc, argv, &i, &params.sampling);
        if (r < 0) return 2;
        if (r > 0) continue;
        if (arg_is(argc, argv, &i, "-m", "--model", &v)) { if (!(model_path = v)) return 2; }
        else if (arg_is(argc, argv, &i, "-s", "--system", &v)) { if (!(system = v)) return 2; }
        else if (arg_is(argc, argv, &i, "--chat-template", NULL, &v)) { if (!(template_name = v)) return 2; }
        else if (arg_is(argc, argv, &i, "-n", "--n-predict", &v)) { if (!arg_int("-n", v, -1, 1 << 24, &n_predict)) return 2; }
        else if (arg_is(argc, argv, &i, "-c", "--ctx-size", &v)) { if (!arg_int("-c", v, 16, 1 << 22, &n_ctx)) return 2; }
        else if (arg_is(argc, argv, &i, "-t", "--threads", &v)) { if (!arg_int("-t", v, 1, 1024, &n_threads)) return 2; }
        else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) { usage(); return 0; }
        else { fprintf(stderr, "hearth chat: unknown option '%s'\n", argv[i]); usage(); return 2; }
    }
    char err[512], demo[1024];
    if (!model_path) {
        if (demo_model_path(demo, sizeof demo, err, sizeof err)) { fprintf(stderr, "hearth: %s\n", err); return 1; }
        model_path = demo;
    }
    kernels_select();
    model *m = model_load(model_path, err, sizeof err);
    if (!m) { fprintf(stderr, "hearth: %s\n", err); return 1; }
    chat c = { .m = m, .params = params };
    c.params.max_tokens = n_predict;
    server_opts so = { .chat_template = template_name };   /* chosen as `hearth serve` chooses it */
    const char *what;
    c.tpl = prompt_load_template(&so, m, &what, err, sizeof err);
    if (!c.tpl) { fprintf(stderr, "hearth: chat template: %s\n", err); model_free(m); return 1; }
    engine_config ec;
    engine_config_default(&ec);
    ec.n_slots = 1;
    ec.n_ctx = n_ctx < m->p.n_ctx_train ? n_ctx : m->p.n_ctx_train;
    ec.n_threads = n_threads;
    ec.prompt_cache = NULL;
    c.e = engine_create(m, &ec, err, sizeof err);
    c.messages = cJSON_CreateArray();
    line_edit *le = line_edit_new();
    if (!c.e || !c.messages || !le) {
        fprintf(stderr, "hearth: %s\n", c.e ? "out of memory" : err);
        line_edit_free(le);
        cJSON_Delete(c.messages);
        engine_destroy(c.e);
        chat_template_free(c.tpl);
        model_free(m);
        return 1;
    }
    if (system) set_system(&c, system);
    struct sigaction sa = {0};
    sa.sa_handler = on_sigint;   /* no SA_RESTART: a wait wakes at once */
    sigaction(SIGINT, &sa, NULL);
    fprintf(stderr, "hearth chat: %s, %d tokens of context, %s chat template. /help lists the commands; Ctrl-D leaves.\n",
            m->name ? m->name : model_path, ec.n_ctx, what);
    for (;;) {
        char *line = NULL;
        line_status st = line_edit_read(le, "> ", &line);
        if (st == LINE_EOF) break;
        if (st == LINE_INTERRUPT) { fprintf(stderr, "(Ctrl-D or /exit leaves)\n"); continue; }
        line_edit_add_history(le, line);
        bool go_on = true;
        if (line[0] == '/') go_on = command(&c, line);
        else if (line[0]) { cJSON_AddItemToArray(c.messages, message("user", line)); turn(&c); }
        free(line);
        if (!go_on) break;
    }
    line_edit_free(le);
    cJSON_Delete(c.messages);
    engine_destroy(c.e);
    chat_template_free(c.tpl);
    model_free(m);
    return 0;
}
