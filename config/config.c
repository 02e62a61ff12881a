/* The configuration layers (see config.h). */
#include "config/config.h"
#include <cjson/cJSON.h>
#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

/* Every setting of `hearth serve`: its flags, file key, variable, type,
 * range and default live here and nowhere else. */
const config_setting config_settings[] = {
    { "model", "--model", "-m", CFG_PATH, 0, 0, NULL, NULL, false,
      "GGUF model file; more than once to serve several (the first is the default; "
      "default: the built-in demo model)", NULL },
    { "models-dir", "--models-dir", NULL, CFG_PATH, 0, 0, NULL, NULL, false,
      "also serve every .gguf file in this folder, each loaded on first use", "DIR" },
    { "max-loaded", "--max-loaded", NULL, CFG_INT, 0, 1024, NULL, "0", false,
      "most models loaded at once, least recently used unloaded first (0: no limit)", NULL },
    { "models-memory", "--models-memory", NULL, CFG_SIZE, 0, 0, NULL, "0", false,
      "most bytes of loaded models (weights and KV), least recently used unloaded first (0: no limit)", NULL },
    { "keep-alive", "--keep-alive", NULL, CFG_NUMBER, -1, 0, NULL, "-1", false,
      "seconds a model other than the first stays loaded with nothing to do (-1: for ever; "
      "a request's keep_alive overrides it for its model)", "SECONDS" },
    { "host", "--host", NULL, CFG_STRING, 0, 0, NULL, "127.0.0.1", false,
      "address to listen on", "ADDR" },
    { "port", "--port", NULL, CFG_INT, 0, 65535, NULL, "8080", false,
      "TCP port (0 picks a free one)", NULL },
    { "parallel", "--parallel", "-np", CFG_INT, 1, 256, NULL, "4", false,
      "slots: requests generated at once", NULL },
    { "ctx-size", "--ctx-size", "-c", CFG_INT, 16, 1 << 22, NULL, "4096", false,
      "context length per slot (at most the model's)", NULL },
    { "threads", "--threads", "-t", CFG_INT, 1, 1024, NULL, NULL, false,
      "compute threads (default: physical cores)", NULL },
    { "batch", "--batch", "-b", CFG_INT, 1, 1 << 20, NULL, "512", false,
      "tokens per engine step", NULL },
    { "batch-decoding", "--batch-decoding", NULL, CFG_INT, 1, 1 << 20, NULL, "6", false,
      "tokens per step while any request is generating, so a long prompt beside it does not stall it", NULL },
    { "queue", "--queue", NULL, CFG_INT, 0, 1 << 20, NULL, "64", false,
      "requests waiting for a slot before 503", NULL },
    { "api-key", "--api-key", NULL, CFG_STRING, 0, 0, NULL, NULL, true,
      "require a bearer token, one of these comma-separated (GET /health stays open; prefer api-key-file)",
      "KEY[,KEY...]" },
    { "api-key-file", "--api-key-file", NULL, CFG_PATH, 0, 0, NULL, NULL, false,
      "file of accepted bearer tokens, one per line", "FILE" },
    { "alias", "--alias", NULL, CFG_STRING, 0, 0, NULL, NULL, false,
      "model name in /v1/models (default: the file name)", "NAME" },
    { "cors-origin", "--cors-origin", NULL, CFG_STRING, 0, 0, NULL, NULL, false,
      "let pages from this origin (or * for any) call the API from a browser (default: none)", "ORIGIN" },
    { "chat-template", "--chat-template", NULL, CFG_STRING, 0, 0, NULL, NULL, false,
      "a built-in template (chatml, llama3, llama2, mistral, gemma, phi3, phi4, zephyr) or a Jinja file, instead of the model's own", "NAME|FILE" },
    { "chat-template-file", "--chat-template-file", NULL, CFG_PATH, 0, 0, NULL, NULL, false,
      "a Jinja chat template file, instead of the model's own", "FILE" },
    { "reasoning-format", "--reasoning-format", NULL, CFG_STRING, 0, 0, "none|auto|deepseek", "auto", false,
      "none|auto|deepseek: none leaves a model's thinking in the content; auto and deepseek return it as reasoning_content", "FMT" },
    { "log-format", "--log-format", NULL, CFG_STRING, 0, 0, "text|json", "text", false,
      "access log lines on stderr", NULL },
    { "backend", "--backend", NULL, CFG_STRING, 0, 0, "auto|cpu", "auto", false,
      "what runs the model (auto: the best this build can run here)", NULL },
    { "pooling", "--pooling", NULL, CFG_STRING, 0, 0, "model|mean|cls|last", "model", false,
      "embeddings: the model's pooling_type (last token when it has none), or mean, cls, last", "MODE" },
    { "prompt-cache", "--prompt-cache", NULL, CFG_PATH, 0, 0, NULL, NULL, false,
      "prompt-state database, or off (default: in the user's cache folder)", "PATH|off" },
    { "prompt-cache-size", "--prompt-cache-size", NULL, CFG_SIZE, 0, 0, NULL, "4G", false,
      "size cap of the prompt-state database", NULL },
    { "max-body", "--max-body", NULL, CFG_SIZE, 1024, 1LL << 32, NULL, "16M", false,
      "largest request body (1K to 4G)", NULL },
    { "timeout", "--timeout", "-to", CFG_INT, 1, 86400, NULL, "300", false,
      "seconds a connection may send and receive nothing before it is closed "
      "(a request waiting for tokens is not idle)", "SECONDS" },
    { "max-connections", "--max-connections", NULL, CFG_INT, 8, 960, NULL, "960", false,
      "connections at once, all clients together (8 to 960)", "N" },
    { "connections-per-client", "--connections-per-client", NULL, CFG_INT, 0, 960, NULL, "64", false,
      "connections one client address may hold open (0: no limit; behind a reverse proxy every "
      "client is the proxy's address)", "N" },
    { "timeout-busy", "--timeout-busy", NULL, CFG_INT, 1, 86400, NULL, "10", false,
      "idle timeout once 3/4 of --max-connections are open, until under half", "SECONDS" },
    { "sse-keepalive", "--sse-keepalive", NULL, CFG_NUMBER, 0, 0, NULL, "5", false,
      "seconds of silence before an SSE comment (0: never)", "SECONDS" },
    { "metrics-compat", "--metrics-compat", NULL, CFG_BOOL, 0, 0, NULL, "false", false,
      "/metrics also offers llama-server's llamacpp:* names", NULL },
    { "no-webui", "--no-webui", NULL, CFG_BOOL, 0, 0, NULL, "false", false,
      "no chat page at / (404)", NULL },
    { "allowed-hosts", "--allowed-hosts", NULL, CFG_STRING, 0, 0, NULL, NULL, false,
      "more Host names to answer, comma-separated, or * for any (default: the listening address and "
      "local names; any when listening on 0.0.0.0 or ::)", "HOSTS" },
    { NULL, NULL, NULL, CFG_STRING, 0, 0, NULL, NULL, false, NULL, NULL },
};

#define MAX_CONFIG_BYTES (1 << 20)   /* a config file is small; refuse anything odd */

static int n_settings(void) {
    int n = 0;
    while (config_settings[n].key) n++;
    return n;
}

static int fail(char *err, size_t errlen, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return -1;
}

const config_setting *config_find_flag(const char *flag) {
    for (const config_setting *s = config_settings; s->key; s++)
        if (!strcmp(flag, s->flag) || (s->short_flag && !strcmp(flag, s->short_flag))) return s;
    return NULL;
}

const config_setting *config_find_key(const char *key) {
    for (const config_setting *s = config_settings; s->key; s++)
        if (!strcmp(key, s->key)) return s;
    return NULL;
}

void config_env_name(const config_setting *s, char *buf, size_t cap) {
    size_t n = (size_t)snprintf(buf, cap, "HEARTH_%s", s->key);
    for (size_t i = 7; i < n && i < cap; i++)
        buf[i] = buf[i] == '-' ? '_' : (char)toupper((unsigned char)buf[i]);
}

/* "4G", "512M", "100KiB", "123": bytes (K = 1024); false if malformed. */
static bool parse_size(const char *v, uint64_t *out) {
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (errno || end == v || !isfinite(x) || x < 0) return false;
    double mul = 1;
    switch (toupper((unsigned char)*end)) {
    case 0: break;
    case 'K': mul = 1024.0; end++; break;
    case 'M': mul = 1048576.0; end++; break;
    case 'G': mul = 1073741824.0; end++; break;
    case 'T': mul = 1099511627776.0; end++; break;
    default: return false;
    }
    if (*end == 'i' || *end == 'I') end++;
    if (*end == 'B' || *end == 'b') end++;
    if (*end || x * mul > 1.8e19) return false;
    *out = (uint64_t)(x * mul);
    return true;
}

/* 1 for true/1/yes/on, 0 for false/0/no/off (any case), else -1. */
static int parse_bool(const char *v) {
    static const char *const yes[] = { "true", "1", "yes", "on" }, *const no[] = { "false", "0", "no", "off" };
    for (int i = 0; i < 4; i++) {
        if (!strcasecmp(v, yes[i])) return 1;
        if (!strcasecmp(v, no[i])) return 0;
    }
    return -1;
}

/* Checks a textual value against the setting's type, range and choices.
 * `where` names its source for the message: "--port", "HEARTH_PORT" or
 * "FILE: key 'port'". */
static int check_text(const config_setting *s, const char *v, const char *where, char *err, size_t errlen) {
    char *end;
    errno = 0;
    if (s->type == CFG_INT) {
        long long x = strtoll(v, &end, 10);
        if (errno || end == v || *end || x < s->min || x > s->max)
            return fail(err, errlen, "%s wants an integer in [%lld, %lld], got '%s'", where, s->min, s->max, v);
    } else if (s->type == CFG_NUMBER) {
        double x = strtod(v, &end);
        if (errno || end == v || *end || !isfinite(x) || x < (double)s->min)
            return fail(err, errlen, "%s wants a number of at least %lld, got '%s'", where, s->min, v);
    } else if (s->type == CFG_SIZE) {
        uint64_t x;
        if (!parse_size(v, &x))
            return fail(err, errlen, "%s wants a size such as 512M or 4G, got '%s'", where, v);
        if (s->max > 0 && (x < (uint64_t)s->min || x > (uint64_t)s->max))
            return fail(err, errlen, "%s wants a size from %lld to %lld bytes, got '%s'", where, s->min, s->max, v);
    } else if (s->type == CFG_BOOL) {
        if (parse_bool(v) < 0)
            return fail(err, errlen, "%s wants true or false (1/0, yes/no, on/off), got '%s'", where, v);
    }
    if (s->choices) {
        size_t n = strlen(v);
        const char *c = s->choices;
        for (;;) {
            const char *bar = strchr(c, '|');
            size_t len = bar ? (size_t)(bar - c) : strlen(c);
            if (len == n && !strncmp(c, v, n)) break;
            if (!bar) return fail(err, errlen, "%s wants one of %s, got '%s'", where, s->choices, v);
            c = bar + 1;
        }
    }
    return 0;
}

/* Settings that may be given more than once in one layer (-m A -m B, or a
 * JSON list in a file): their value is every occurrence, one per line. A
 * higher layer still replaces a lower one's whole list. */
static bool is_list(const config_setting *s) { return !strcmp(s->key, "model"); }

static int set_value(config *c, const config_setting *s, const char *v, config_source src,
                     const char *origin) {
    struct config_value *cv = &c->values[s - config_settings];
    if (is_list(s) && cv->value && cv->src == src) {
        size_t a = strlen(cv->value), b = strlen(v);
        char *joined = malloc(a + b + 2);
        if (!joined) return -1;
        memcpy(joined, cv->value, a);
        joined[a] = '\n';
        memcpy(joined + a + 1, v, b + 1);
        free(cv->value);
        cv->value = joined;
        return 0;
    }
    char *nv = strdup(v), *no = strdup(origin);
    if (!nv || !no) { free(nv); free(no); return -1; }
    free(cv->value);
    free(cv->origin);
    cv->value = nv;
    cv->origin = no;
    cv->src = src;
    return 0;
}

/* A path from a file: "~/x" is under $HOME, and a relative one is taken
 * from the file's folder, so a config works whatever the working directory
 * (systemd starts services in /). */
static char *resolve_path(const char *v, const char *file) {
    if (!strcmp(v, "off")) return strdup(v);   /* prompt-cache's word for none, not a path */
    const char *home = getenv("HOME");
    const char *base = NULL;
    size_t base_len = 0;
    if (v[0] == '~' && v[1] == '/' && home && *home) {
        base = home;
        base_len = strlen(home);
        v += 2;
    } else if (v[0] != '/' && v[0]) {
        const char *slash = strrchr(file, '/');
        if (slash) { base = file; base_len = (size_t)(slash - file); }
    }
    if (!base) return strdup(v);
    size_t n = base_len + 1 + strlen(v) + 1;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%.*s/%s", (int)base_len, base, v);
    return p;
}

static char *read_small_file(const char *path, char *err, size_t errlen) {
    FILE *f = fopen(path, "rb");
    if (!f) { fail(err, errlen, "%s: %s", path, strerror(errno)); return NULL; }
    struct stat st;
    if (fstat(fileno(f), &st) || !S_ISREG(st.st_mode) || st.st_size > MAX_CONFIG_BYTES) {
        fail(err, errlen, "%s: not a regular file of at most %d bytes", path, MAX_CONFIG_BYTES);
        fclose(f);
        return NULL;
    }
    char *buf = malloc((size_t)st.st_size + 1);
    size_t n = buf ? fread(buf, 1, (size_t)st.st_size, f) : 0;
    int bad = !buf || ferror(f);
    fclose(f);
    if (bad) { free(buf); fail(err, errlen, "%s: cannot read", path); return NULL; }
    buf[n] = 0;
    if (strlen(buf) != n) { free(buf); fail(err, errlen, "%s: contains a NUL byte", path); return NULL; }
    return buf;
}

/* Line and column of byte `off` in text, for parse errors. */
static void line_col(const char *text, size_t off, int *line, int *col) {
    *line = 1;
    *col = 1;
    for (size_t i = 0; i < off && text[i]; i++) {
        if (text[i] == '\n') { ++*line; *col = 1; } else ++*col;
    }
}

static int load_file(config *c, const char *path, char *err, size_t errlen) {
    char *text = read_small_file(path, err, errlen);
    if (!text) return -1;
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithOpts(text, &end, true);
    if (!root) {
        int line, col;
        line_col(text, end ? (size_t)(end - text) : 0, &line, &col);
        free(text);
        return fail(err, errlen, "%s:%d:%d: not valid JSON", path, line, col);
    }
    free(text);
    int rc = 0;
    if (!cJSON_IsObject(root)) { rc = fail(err, errlen, "%s: wants a JSON object of settings", path); goto out; }
    for (const cJSON *it = root->child; it; it = it->next) {
        const config_setting *s = config_find_key(it->string);
        if (!s) { rc = fail(err, errlen, "%s: unknown key '%s' (see `hearth config --help`)", path, it->string); goto out; }
        for (const cJSON *p = root->child; p != it; p = p->next)
            if (!strcmp(p->string, it->string)) { rc = fail(err, errlen, "%s: key '%s' appears twice", path, it->string); goto out; }
        if (cJSON_IsNull(it)) continue;   /* null: leave it to the default */
        if (is_list(s) && cJSON_IsArray(it)) {   /* "model": ["a.gguf", "b.gguf"] */
            for (const cJSON *x = it->child; x; x = x->next) {
                char where[1100];
                snprintf(where, sizeof where, "%s: key '%s'", path, s->key);
                if (!cJSON_IsString(x)) { rc = fail(err, errlen, "%s wants a string or a list of strings", where); goto out; }
                if ((rc = check_text(s, x->valuestring, where, err, errlen))) goto out;
                char *resolved = resolve_path(x->valuestring, path);
                if (!resolved || set_value(c, s, resolved, CFG_SRC_FILE, path)) {
                    free(resolved);
                    rc = fail(err, errlen, "out of memory");
                    goto out;
                }
                free(resolved);
            }
            continue;
        }
        char num[64];
        const char *v;
        double d = it->valuedouble;
        if (s->type == CFG_INT) {
            if (!cJSON_IsNumber(it) || !isfinite(d) || d != floor(d) || d < (double)s->min || d > (double)s->max) {
                rc = fail(err, errlen, "%s: key '%s' wants an integer in [%lld, %lld]", path, s->key, s->min, s->max);
                goto out;
            }
            snprintf(num, sizeof num, "%lld", (long long)d);
            v = num;
        } else if (s->type == CFG_NUMBER || (s->type == CFG_SIZE && cJSON_IsNumber(it))) {
            if (!cJSON_IsNumber(it) || !isfinite(d) || d < (double)s->min || (s->type == CFG_SIZE && d != floor(d))) {
                rc = fail(err, errlen, "%s: key '%s' wants a %s", path, s->key,
                          s->type == CFG_SIZE ? "whole number of bytes or a size such as \"4G\"" : "number");
                goto out;
            }
            snprintf(num, sizeof num, "%.15g", d);
            v = num;
        } else if (s->type == CFG_BOOL) {
            if (!cJSON_IsBool(it)) { rc = fail(err, errlen, "%s: key '%s' wants true or false", path, s->key); goto out; }
            v = cJSON_IsTrue(it) ? "true" : "false";
        } else {
            if (!cJSON_IsString(it)) {
                rc = fail(err, errlen, "%s: key '%s' wants a %s", path, s->key,
                          s->type == CFG_SIZE ? "size such as \"4G\" or a number of bytes" : "string");
                goto out;
            }
            v = it->valuestring;
        }
        char where[1100];
        snprintf(where, sizeof where, "%s: key '%s'", path, s->key);
        if ((rc = check_text(s, v, where, err, errlen))) goto out;
        char *resolved = s->type == CFG_PATH ? resolve_path(v, path) : NULL;
        if ((s->type == CFG_PATH && !resolved) || set_value(c, s, resolved ? resolved : v, CFG_SRC_FILE, path)) {
            free(resolved);
            rc = fail(err, errlen, "out of memory");
            goto out;
        }
        free(resolved);
    }
out:
    cJSON_Delete(root);
    return rc;
}

/* The default file, or NULL when $XDG_CONFIG_HOME and $HOME are both unset. */
static char *default_file(void) {
    const char *xdg = getenv("XDG_CONFIG_HOME"), *home = getenv("HOME");
    char buf[4096];
    if (xdg && xdg[0] == '/') snprintf(buf, sizeof buf, "%s/hearth/config.json", xdg);
    else if (home && *home) snprintf(buf, sizeof buf, "%s/.config/hearth/config.json", home);
    else return NULL;
    return strdup(buf);
}

static bool is_help(const char *a) { return !strcmp(a, "-h") || !strcmp(a, "--help"); }

int config_load(config *c, int argc, char **argv, char *err, size_t errlen) {
    memset(c, 0, sizeof *c);
    int n = n_settings();
    c->values = calloc((size_t)n, sizeof *c->values);
    c->rest = calloc((size_t)(argc > 0 ? argc : 1), sizeof *c->rest);
    if (!c->values || !c->rest) return fail(err, errlen, "out of memory");

    /* Help must work whatever state the config file is in. */
    for (int i = 1; i < argc; i++)
        if (is_help(argv[i])) { c->help = true; break; }

    /* Which file: --config, then $HEARTH_CONFIG, then the default place. */
    const char *named = NULL, *named_by = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--config")) {
            if (i + 1 >= argc) return fail(err, errlen, "--config needs a file name");
            named = argv[++i];
            named_by = "--config";
        } else if (config_find_flag(argv[i]) && config_find_flag(argv[i])->type != CFG_BOOL) {
            i++;   /* skip its value, which may look like a flag */
        }
    }
    const char *env_file = getenv("HEARTH_CONFIG");
    if (!named && env_file && *env_file) { named = env_file; named_by = "HEARTH_CONFIG"; }
    if (!c->help) {
        if (named) {
            struct stat st;
            if (stat(named, &st)) return fail(err, errlen, "%s: %s (named by %s)", named, strerror(errno), named_by);
            c->file = strdup(named);
        } else {
            char *def = default_file();
            struct stat st;
            if (def && !stat(def, &st)) c->file = def;
            else free(def);
        }
        if (c->file && load_file(c, c->file, err, errlen)) return -1;

        for (const config_setting *s = config_settings; s->key; s++) {
            char name[64];
            config_env_name(s, name, sizeof name);
            const char *v = getenv(name);
            if (!v || !*v) continue;   /* empty: unset, as in systemd's Environment= */
            if (check_text(s, v, name, err, errlen)) return -1;
            if (set_value(c, s, v, CFG_SRC_ENV, name)) return fail(err, errlen, "out of memory");
        }
    }

    for (int i = 1; i < argc; i++) {
        const config_setting *s = config_find_flag(argv[i]);
        if (!strcmp(argv[i], "--config")) { i++; continue; }
        if (!s) { c->rest[c->n_rest++] = argv[i]; continue; }
        if (s->type == CFG_BOOL) {   /* a switch: no value follows */
            if (set_value(c, s, "true", CFG_SRC_FLAG, argv[i])) return fail(err, errlen, "out of memory");
            continue;
        }
        if (i + 1 >= argc) return fail(err, errlen, "%s needs a value", argv[i]);
        const char *v = argv[++i];
        if (check_text(s, v, argv[i - 1], err, errlen)) return -1;
        if (set_value(c, s, v, CFG_SRC_FLAG, argv[i - 1])) return fail(err, errlen, "out of memory");
    }
    return 0;
}

void config_free(config *c) {
    if (c->values)
        for (int i = 0; config_settings[i].key; i++) {
            free(c->values[i].value);
            free(c->values[i].origin);
        }
    free(c->values);
    free(c->rest);
    free(c->file);
    memset(c, 0, sizeof *c);
}

void config_argv_free(char **argv) {
    if (!argv) return;
    for (char **a = argv; *a; a++) free(*a);
    free(argv);
}

int config_apply(int argc, char **argv, int *out_argc, char ***out_argv, char *err, size_t errlen) {
    *out_argc = 0;
    *out_argv = NULL;
    config c;
    if (config_load(&c, argc, argv, err, errlen)) { config_free(&c); return -1; }
    int n = n_settings(), k = 0;
    char **out = calloc((size_t)(1 + 2 * n + c.n_rest + 1), sizeof *out);
    bool ok = out != NULL;
    if (ok) ok = (out[k++] = strdup(argc > 0 ? argv[0] : "hearth")) != NULL;
    for (int i = 0; ok && i < n; i++) {
        if (!c.values[i].value) continue;
        if (config_settings[i].type == CFG_BOOL) {   /* a switch: present when on */
            if (config_bool(c.values[i].value)) ok = (out[k++] = strdup(config_settings[i].flag)) != NULL;
            continue;
        }
        ok = (out[k++] = strdup(config_settings[i].flag)) && (out[k++] = strdup(c.values[i].value));
    }
    for (int i = 0; ok && i < c.n_rest; i++) ok = (out[k++] = strdup(c.rest[i])) != NULL;
    config_free(&c);
    if (!ok) { config_argv_free(out); return fail(err, errlen, "out of memory"); }
    *out_argc = k;
    *out_argv = out;
    return 0;
}

const char *config_get(const config *c, const char *key) {
    const config_setting *s = config_find_key(key);
    assert(s && c->values);
    const char *v = c->values[s - config_settings].value;
    return v ? v : s->def;
}

long long config_int(const char *v) {
    assert(v);
    return strtoll(v, NULL, 10);
}

double config_number(const char *v) {
    assert(v);
    return strtod(v, NULL);
}

uint64_t config_size(const char *v) {
    uint64_t x = 0;
    bool ok = v && parse_size(v, &x);
    assert(ok);
    (void)ok;
    return x;
}

bool config_bool(const char *v) {
    assert(v && parse_bool(v) >= 0);
    return parse_bool(v) == 1;
}

/* The value's name in --help: the row's own, its choices, or one for its type. */
static const char *metavar(const config_setting *s) {
    if (s->metavar) return s->metavar;
    if (s->choices) return s->choices;
    switch (s->type) {
    case CFG_PATH: return "PATH";
    case CFG_INT: case CFG_NUMBER: return "N";
    case CFG_SIZE: return "SIZE";
    case CFG_BOOL: return "";
    default: return "TEXT";
    }
}

void config_print_flags(FILE *f) {
    for (const config_setting *s = config_settings; s->key; s++) {
        char left[96];
        const char *mv = metavar(s);
        snprintf(left, sizeof left, "%s%s%s%s%s", s->short_flag ? s->short_flag : "", s->short_flag ? ", " : "",
                 s->flag, *mv ? " " : "", mv);
        char text[512];
        snprintf(text, sizeof text, "%s%s%s%s", s->help, s->def && s->type != CFG_BOOL ? " (default " : "",
                 s->def && s->type != CFG_BOOL ? s->def : "", s->def && s->type != CFG_BOOL ? ")" : "");
        /* words wrapped at column 100, continuation lines under the first */
        fprintf(f, "  %-28s", left);
        int col = 30;
        for (const char *w = text; *w;) {
            size_t n = strcspn(w, " ");
            if (col > 31 && col + 1 + (int)n > 100) { fprintf(f, "\n%31s", ""); col = 31; }
            else { fputc(' ', f); col++; }
            fprintf(f, "%.*s", (int)n, w);
            col += (int)n;
            w += n;
            while (*w == ' ') w++;
        }
        fputc('\n', f);
    }
}
