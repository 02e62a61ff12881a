/* The configuration layers: precedence, file lookup, errors that name the
 * key and the file, path resolution, and the argument list serve gets. */
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "tests/test.h"
#include "config/config.h"

static char dir[64];

static void write_file(const char *name, const char *text, size_t n) {
    char p[256];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "wb");
    if (!f) { perror(p); exit(1); }
    fwrite(text, 1, n, f);
    fclose(f);
}
static void write_json(const char *name, const char *text) { write_file(name, text, strlen(text)); }

static const char *path_of(const char *name) {
    static char p[256];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return p;
}

static void clear_env(void) {
    for (const config_setting *s = config_settings; s->key; s++) {
        char name[64];
        config_env_name(s, name, sizeof name);
        unsetenv(name);
    }
    unsetenv("HEARTH_CONFIG");
    unsetenv("XDG_CONFIG_HOME");
    setenv("HOME", dir, 1);   /* no ~/.config/hearth/config.json unless a test writes one */
}

/* Loads with argv = {"serve", args..., NULL}; returns config_load's result. */
static int load(config *c, char *err, size_t errlen, ...) {
    char *argv[32] = { "serve" };
    int argc = 1;
    va_list ap;
    va_start(ap, errlen);
    for (char *a; argc < 31 && (a = va_arg(ap, char *));) argv[argc++] = a;
    va_end(ap);
    err[0] = 0;
    return config_load(c, argc, argv, err, errlen);
}

static const struct config_value *val(const config *c, const char *key) {
    const config_setting *s = config_find_key(key);
    return s ? &c->values[s - config_settings] : NULL;
}

/* A file error must fail and name both the file and `needle` (the key). */
static void expect_file_error(const char *json, const char *needle) {
    write_json("bad.json", json);
    config c;
    char err[1500];
    int rc = load(&c, err, sizeof err, "--config", (char *)path_of("bad.json"), (char *)NULL);
    CHECKF(rc == -1, "accepted %s", json);
    CHECKF(strstr(err, path_of("bad.json")) && strstr(err, needle), "%s -> '%s'", json, err);
    config_free(&c);
}

static void test_table(void) {
    int n = 0;
    for (const config_setting *s = config_settings; s->key; s++, n++) {
        char name[64];
        config_env_name(s, name, sizeof name);
        CHECKF(!strncmp(name, "HEARTH_", 7) && !strchr(name, '-'), "%s", name);
        CHECK(config_find_key(s->key) == s);
        CHECK(config_find_flag(s->flag) == s);
        if (s->short_flag) CHECK(config_find_flag(s->short_flag) == s);
        CHECKF(!strncmp(s->flag, "--", 2) && !strcmp(s->flag + 2, s->key), "flag %s of %s", s->flag, s->key);
        /* every shown default is a value the setting accepts */
        if (s->def) {
            config c;
            char err[256];
            CHECKF(load(&c, err, sizeof err, (char *)s->flag, (char *)s->def, (char *)NULL) == 0, "%s", err);
            config_free(&c);
        }
    }
    CHECK(n >= 15);
    char name[64];
    config_env_name(config_find_key("ctx-size"), name, sizeof name);
    CHECK(!strcmp(name, "HEARTH_CTX_SIZE"));
    CHECK(config_find_flag("-np") == config_find_key("parallel"));
    CHECK(config_find_flag("-to") == config_find_key("timeout"));
    CHECK(config_find_flag("--batch-decoding") == config_find_key("batch-decoding"));
    CHECK(config_find_flag("--config") == NULL);
}

static void test_precedence(void) {
    clear_env();
    write_json("p.json", "{\"port\": 1111, \"host\": \"0.0.0.0\", \"parallel\": 2, \"alias\": \"f\"}");
    setenv("HEARTH_PORT", "2222", 1);
    setenv("HEARTH_PARALLEL", "3", 1);
    setenv("HEARTH_BATCH", "", 1);   /* empty: unset */
    config c;
    char err[512];
    CHECKF(load(&c, err, sizeof err, "--config", (char *)path_of("p.json"), "-np", "5", (char *)NULL) == 0, "%s", err);
    CHECK(!strcmp(val(&c, "host")->value, "0.0.0.0") && val(&c, "host")->src == CFG_SRC_FILE);
    CHECK(!strcmp(val(&c, "host")->origin, path_of("p.json")));
    CHECK(!strcmp(val(&c, "port")->value, "2222") && val(&c, "port")->src == CFG_SRC_ENV);
    CHECK(!strcmp(val(&c, "port")->origin, "HEARTH_PORT"));
    CHECK(!strcmp(val(&c, "parallel")->value, "5") && val(&c, "parallel")->src == CFG_SRC_FLAG);
    CHECK(!strcmp(val(&c, "parallel")->origin, "-np"));
    CHECK(val(&c, "batch")->value == NULL && val(&c, "batch")->src == CFG_SRC_DEFAULT);
    CHECK(c.file && !strcmp(c.file, path_of("p.json")));
    config_free(&c);

    /* the argument list: each set value once, in table order, then the rest in order */
    char *argv[] = { "serve", "--config", (char *)path_of("p.json"), "--verbose", "--port", "4444",
                     "--alias", "--config", "x", NULL };
    int n;
    char **out;
    CHECKF(config_apply(9, argv, &n, &out, err, sizeof err) == 0, "%s", err);
    const char *want[] = { "serve", "--host", "0.0.0.0", "--port", "4444", "--parallel", "3",
                           "--alias", "--config", "--verbose", "x" };
    int nw = (int)(sizeof want / sizeof want[0]);
    CHECKF(n == nw, "argc %d", n);
    for (int i = 0; i < n && i < nw; i++) CHECKF(!strcmp(out[i], want[i]), "argv[%d] = %s", i, out[i]);
    CHECK(out[n] == NULL);
    config_argv_free(out);
    clear_env();
}

static void test_file_lookup(void) {
    clear_env();
    config c;
    char err[512];
    /* nothing anywhere: fine, no file */
    CHECKF(load(&c, err, sizeof err, (char *)NULL) == 0, "%s", err);
    CHECK(c.file == NULL);
    config_free(&c);

    /* ~/.config/hearth/config.json */
    char p[256];
    snprintf(p, sizeof p, "%s/.config", dir); mkdir(p, 0700);
    snprintf(p, sizeof p, "%s/.config/hearth", dir); mkdir(p, 0700);
    write_json(".config/hearth/config.json", "{\"port\": 1001}");
    CHECKF(load(&c, err, sizeof err, (char *)NULL) == 0, "%s", err);
    CHECK(!strcmp(val(&c, "port")->value, "1001"));
    config_free(&c);

    /* $XDG_CONFIG_HOME wins over ~/.config */
    snprintf(p, sizeof p, "%s/xdg", dir); mkdir(p, 0700);
    snprintf(p, sizeof p, "%s/xdg/hearth", dir); mkdir(p, 0700);
    write_json("xdg/hearth/config.json", "{\"port\": 1002}");
    snprintf(p, sizeof p, "%s/xdg", dir);
    setenv("XDG_CONFIG_HOME", p, 1);
    CHECKF(load(&c, err, sizeof err, (char *)NULL) == 0, "%s", err);
    CHECK(!strcmp(val(&c, "port")->value, "1002"));
    config_free(&c);

    /* $HEARTH_CONFIG wins over the default place; --config over both */
    write_json("a.json", "{\"port\": 1003}");
    write_json("b.json", "{\"port\": 1004}");
    setenv("HEARTH_CONFIG", path_of("a.json"), 1);
    CHECKF(load(&c, err, sizeof err, (char *)NULL) == 0, "%s", err);
    CHECK(!strcmp(val(&c, "port")->value, "1003"));
    config_free(&c);
    CHECKF(load(&c, err, sizeof err, "--config", (char *)path_of("b.json"), (char *)NULL) == 0, "%s", err);
    CHECK(!strcmp(val(&c, "port")->value, "1004"));
    config_free(&c);

    /* a named file that is missing is an error naming it; the default one is not */
    setenv("HEARTH_CONFIG", path_of("missing.json"), 1);
    CHECK(load(&c, err, sizeof err, (char *)NULL) == -1);
    CHECKF(strstr(err, "missing.json") && strstr(err, "HEARTH_CONFIG"), "%s", err);
    config_free(&c);
    unsetenv("HEARTH_CONFIG");
    CHECK(load(&c, err, sizeof err, "--config", (char *)path_of("missing.json"), (char *)NULL) == -1);
    CHECKF(strstr(err, "missing.json") && strstr(err, "--config"), "%s", err);
    config_free(&c);
    CHECK(load(&c, err, sizeof err, "--config", (char *)NULL) == -1);
    config_free(&c);
    /* a folder is not a config file */
    CHECK(load(&c, err, sizeof err, "--config", dir, (char *)NULL) == -1);
    config_free(&c);

    /* --help loads nothing, so it works whatever state the file is in */
    write_json("broken.json", "{");
    CHECK(load(&c, err, sizeof err, "--config", (char *)path_of("broken.json"), "--help", (char *)NULL) == 0);
    CHECK(c.help && c.file == NULL);
    config_free(&c);
    clear_env();
}

static void test_errors(void) {
    clear_env();
    expect_file_error("{\"prot\": 8080}", "'prot'");
    expect_file_error("{\"port\": \"8080\"}", "'port'");
    expect_file_error("{\"port\": 80.5}", "'port'");
    expect_file_error("{\"port\": 1e300}", "'port'");
    expect_file_error("{\"port\": -1}", "'port'");
    expect_file_error("{\"port\": 65536}", "'port'");
    expect_file_error("{\"prompt-cache-size\": \"4X\"}", "'prompt-cache-size'");
    expect_file_error("{\"prompt-cache-size\": 1.5}", "'prompt-cache-size'");
    expect_file_error("{\"prompt-cache-size\": true}", "'prompt-cache-size'");
    expect_file_error("{\"sse-keepalive\": -1}", "'sse-keepalive'");
    expect_file_error("{\"sse-keepalive\": \"5\"}", "'sse-keepalive'");
    expect_file_error("{\"timeout\": 0}", "'timeout'");
    expect_file_error("{\"timeout\": 86401}", "'timeout'");
    expect_file_error("{\"timeout\": \"30\"}", "'timeout'");
    expect_file_error("{\"port\": true}", "'port'");
    expect_file_error("{\"host\": 1}", "'host'");
    expect_file_error("{\"host\": [\"a\"]}", "'host'");
    expect_file_error("{\"alias\": {}}", "'alias'");
    expect_file_error("{\"log-format\": \"xml\"}", "'log-format'");
    expect_file_error("{\"port\": 1, \"port\": 2}", "'port'");
    expect_file_error("{\"port\": 1,}", ":1:");
    expect_file_error("[1, 2]", "object");
    expect_file_error("", "JSON");
    expect_file_error("{} {}", "JSON");
    write_file("nul.json", "{\"host\": \"a\"}\0x", 16);
    config c;
    char err[512];
    CHECK(load(&c, err, sizeof err, "--config", (char *)path_of("nul.json"), (char *)NULL) == -1);
    config_free(&c);

    /* env and flag values are checked too, naming the variable or flag */
    setenv("HEARTH_CTX_SIZE", "12x", 1);
    CHECK(load(&c, err, sizeof err, (char *)NULL) == -1);
    CHECKF(strstr(err, "HEARTH_CTX_SIZE") != NULL, "%s", err);
    config_free(&c);
    unsetenv("HEARTH_CTX_SIZE");
    CHECK(load(&c, err, sizeof err, "--threads", "-1", (char *)NULL) == -1);
    CHECKF(strstr(err, "--threads") != NULL, "%s", err);
    config_free(&c);
    CHECK(load(&c, err, sizeof err, "--port", (char *)NULL) == -1);
    CHECKF(strstr(err, "--port") != NULL, "%s", err);
    config_free(&c);

    /* apply reports the error and returns no list */
    char *argv[] = { "serve", "--port", "99999", NULL };
    int n = 7;
    char **out = (char **)argv;
    CHECK(config_apply(3, argv, &n, &out, err, sizeof err) == -1 && n == 0 && out == NULL);
    clear_env();
}

static void test_values(void) {
    clear_env();
    write_json("v.json", "{\"model\": \"models/m.gguf\", \"api-key-file\": \"~/keys\","
                         " \"prompt-cache\": \"/var/cache/p.db\", \"alias\": null, \"threads\": 3}");
    setenv("HEARTH_ALIAS", "from-env", 1);
    config c;
    char err[512], want[512];
    CHECKF(load(&c, err, sizeof err, "--config", (char *)path_of("v.json"), (char *)NULL) == 0, "%s", err);
    snprintf(want, sizeof want, "%s/models/m.gguf", dir);
    CHECKF(!strcmp(val(&c, "model")->value, want), "%s", val(&c, "model")->value);
    snprintf(want, sizeof want, "%s/keys", dir);   /* HOME is dir */
    CHECKF(!strcmp(val(&c, "api-key-file")->value, want), "%s", val(&c, "api-key-file")->value);
    CHECK(!strcmp(val(&c, "prompt-cache")->value, "/var/cache/p.db"));
    CHECK(!strcmp(val(&c, "alias")->value, "from-env"));   /* null in the file left it open */
    CHECK(!strcmp(val(&c, "threads")->value, "3"));
    config_free(&c);
    /* sizes as strings or bytes, numbers with fractions, and "off" is not a path */
    write_json("s.json", "{\"prompt-cache-size\": \"512MiB\", \"max-body\": 1048576,"
                         " \"sse-keepalive\": 0.5, \"prompt-cache\": \"off\"}");
    CHECKF(load(&c, err, sizeof err, "--config", (char *)path_of("s.json"), (char *)NULL) == 0, "%s", err);
    CHECK(!strcmp(val(&c, "prompt-cache-size")->value, "512MiB"));
    CHECK(!strcmp(val(&c, "max-body")->value, "1048576"));
    CHECK(!strcmp(val(&c, "sse-keepalive")->value, "0.5"));
    CHECK(!strcmp(val(&c, "prompt-cache")->value, "off"));
    config_free(&c);
    /* the idle timeout: from the file, overridden by -to */
    write_json("t.json", "{\"timeout\": 30}");
    CHECKF(load(&c, err, sizeof err, "--config", (char *)path_of("t.json"), (char *)NULL) == 0, "%s", err);
    CHECK(!strcmp(val(&c, "timeout")->value, "30") && val(&c, "timeout")->src == CFG_SRC_FILE);
    config_free(&c);
    CHECKF(load(&c, err, sizeof err, "--config", (char *)path_of("t.json"), "-to", "2", (char *)NULL) == 0, "%s", err);
    CHECK(!strcmp(val(&c, "timeout")->value, "2") && val(&c, "timeout")->src == CFG_SRC_FLAG);
    config_free(&c);
    CHECK(load(&c, err, sizeof err, "--max-body", "12Q", (char *)NULL) == -1);
    CHECKF(strstr(err, "--max-body") != NULL, "%s", err);
    config_free(&c);
    CHECKF(load(&c, err, sizeof err, "--max-body", "2g", "--sse-keepalive", "1e1", (char *)NULL) == 0, "%s", err);
    config_free(&c);
    /* paths from flags and env are the shell's business: unchanged */
    setenv("HEARTH_MODEL", "rel/env.gguf", 1);
    CHECKF(load(&c, err, sizeof err, "--config", (char *)path_of("v.json"), (char *)NULL) == 0, "%s", err);
    CHECK(!strcmp(val(&c, "model")->value, "rel/env.gguf"));
    config_free(&c);
    CHECKF(load(&c, err, sizeof err, "-m", "rel/flag.gguf", (char *)NULL) == 0, "%s", err);
    CHECK(!strcmp(val(&c, "model")->value, "rel/flag.gguf"));
    CHECK(c.n_rest == 0);
    config_free(&c);
    clear_env();
}

/* Switches, size ranges, the typed readers, config_get's fallback to the
 * table, and --help generated from the table. */
static void test_types(void) {
    clear_env();
    config c;
    char err[512];
    CHECKF(load(&c, err, sizeof err, "--metrics-compat", "--port", "9", (char *)NULL) == 0, "%s", err);
    CHECK(config_bool(config_get(&c, "metrics-compat")) && val(&c, "metrics-compat")->src == CFG_SRC_FLAG);
    CHECK(config_int(config_get(&c, "port")) == 9);
    CHECK(config_int(config_get(&c, "ctx-size")) == 4096);   /* the table's default */
    CHECK(config_get(&c, "threads") == NULL);                /* computed by serve */
    CHECK(config_size(config_get(&c, "max-body")) == 16u << 20);
    CHECK(config_number(config_get(&c, "sse-keepalive")) == 5.0);
    CHECK(c.n_rest == 0);
    config_free(&c);
    CHECKF(load(&c, err, sizeof err, (char *)NULL) == 0, "%s", err);
    CHECK(!config_bool(config_get(&c, "metrics-compat")));
    config_free(&c);
    setenv("HEARTH_METRICS_COMPAT", "yes", 1);
    CHECKF(load(&c, err, sizeof err, (char *)NULL) == 0, "%s", err);
    CHECK(config_bool(config_get(&c, "metrics-compat")) && val(&c, "metrics-compat")->src == CFG_SRC_ENV);
    config_free(&c);
    setenv("HEARTH_METRICS_COMPAT", "maybe", 1);
    CHECK(load(&c, err, sizeof err, (char *)NULL) == -1);
    CHECKF(strstr(err, "HEARTH_METRICS_COMPAT") != NULL, "%s", err);
    config_free(&c);
    unsetenv("HEARTH_METRICS_COMPAT");
    write_json("b.json", "{\"metrics-compat\": true}");
    CHECKF(load(&c, err, sizeof err, "--config", (char *)path_of("b.json"), (char *)NULL) == 0, "%s", err);
    CHECK(config_bool(config_get(&c, "metrics-compat")));
    config_free(&c);
    expect_file_error("{\"metrics-compat\": 1}", "'metrics-compat'");
    expect_file_error("{\"max-body\": 10}", "'max-body'");
    expect_file_error("{\"max-body\": \"5G\"}", "'max-body'");
    CHECK(load(&c, err, sizeof err, "--max-body", "100", (char *)NULL) == -1);
    config_free(&c);
    CHECKF(load(&c, err, sizeof err, "--max-body", "4G", (char *)NULL) == 0, "%s", err);
    CHECK(config_size(config_get(&c, "max-body")) == 4ull << 30);
    config_free(&c);

    /* the switch is written alone into the argument list, and only when on */
    write_json("empty.json", "{}");
    char *argv[] = { "serve", "--config", (char *)path_of("empty.json"), "--metrics-compat", "-c", "64", NULL };
    int n;
    char **out;
    CHECKF(config_apply(6, argv, &n, &out, err, sizeof err) == 0, "%s", err);
    CHECKF(n == 4 && !strcmp(out[1], "--ctx-size") && !strcmp(out[3], "--metrics-compat"), "argc %d", n);
    config_argv_free(out);

    /* --help: one line per setting naming its flag, and each default */
    char path[256];
    snprintf(path, sizeof path, "%s/help.txt", dir);
    FILE *f = fopen(path, "w+");
    CHECK(f != NULL);
    if (!f) return;
    config_print_flags(f);
    long len = ftell(f);
    rewind(f);
    char *text = calloc((size_t)len + 2, 1);   /* "\n" + the text, so every line starts "\n  -" */
    CHECK(text && fread(text + 1, 1, (size_t)len, f) == (size_t)len);
    if (text) text[0] = '\n';
    fclose(f);
    for (const config_setting *s = config_settings; text && s->key; s++) {
        char want[128];
        snprintf(want, sizeof want, "\n  %s%s%s", s->short_flag ? s->short_flag : "", s->short_flag ? ", " : "", s->flag);
        CHECKF(strstr(text, want) != NULL, "--help lacks %s", s->flag);
        if (s->def && s->type != CFG_BOOL) {
            snprintf(want, sizeof want, "(default %s)", s->def);
            CHECKF(strstr(text, want) != NULL, "--help lacks %s's default", s->flag);
        }
    }
    free(text);
    clear_env();
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/hearth-config-XXXXXX");
    if (!mkdtemp(dir)) { perror("mkdtemp"); return 1; }
    test_table();
    test_precedence();
    test_file_lookup();
    test_errors();
    test_values();
    test_types();
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd)) fprintf(stderr, "could not remove %s\n", dir);
    return test_summary("config");
}
