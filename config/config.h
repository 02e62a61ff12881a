/* hearth's configuration: one table of settings, four layers.
 *
 * Each setting has a JSON key (the config file), a long flag (and maybe a
 * short one) and an environment variable HEARTH_<KEY> ('-' becomes '_').
 * Precedence, lowest first: built-in defaults < the config file < HEARTH_*
 * variables < flags. The file is `--config PATH`, else $HEARTH_CONFIG, else
 * $XDG_CONFIG_HOME/hearth/config.json, else ~/.config/hearth/config.json (a
 * missing default file is no error; a missing named one is).
 *
 * The table is the only list of serve's settings: `hearth serve` loads the
 * layers with config_load, takes each value (or the table's default) with
 * config_get and the typed readers below, and prints its --help from the
 * table (config_print_flags). Adding a setting is one row here and one
 * binding where serve stores it. */
#ifndef HEARTH_CONFIG_H
#define HEARTH_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef enum {
    CFG_STRING,
    CFG_PATH,   /* a string; in a file, "~/" and relative paths are resolved */
    CFG_INT,    /* an integer in [min, max] */
    CFG_NUMBER, /* a number >= min */
    CFG_SIZE,   /* bytes: an integer, or a string such as "512M", "4G", "100KiB";
                 * within [min, max] when max > 0 */
    CFG_BOOL,   /* a switch: the flag alone turns it on; true/false in a file;
                 * 1/0, true/false, yes/no, on/off in the environment. Off by default. */
} config_type;

typedef struct config_setting {
    const char *key;        /* JSON key, e.g. "ctx-size" */
    const char *flag;       /* long flag, e.g. "--ctx-size" */
    const char *short_flag; /* e.g. "-c", or NULL */
    config_type type;
    long long min, max;     /* CFG_INT, CFG_SIZE: the accepted range; CFG_NUMBER: min */
    const char *choices;    /* "text|json": the accepted values, or NULL for any */
    const char *def;        /* the default as text; NULL: none, or computed (see help) */
    bool secret;            /* never printed */
    const char *help;
    const char *metavar;    /* the value's name in --help, e.g. "ADDR"; NULL: from the type */
} config_setting;

/* The table, terminated by an entry with key == NULL. */
extern const config_setting config_settings[];

typedef enum { CFG_SRC_DEFAULT, CFG_SRC_FILE, CFG_SRC_ENV, CFG_SRC_FLAG } config_source;

/* The effective configuration: the winning value of each setting, where it
 * came from, and the flags that are not settings (kept for the command). */
typedef struct config {
    struct config_value {
        char *value;            /* NULL: not set (the command's default applies) */
        config_source src;
        char *origin;           /* the file path, "HEARTH_PORT" or "--port"; NULL for default */
    } *values;                  /* one per config_settings entry */
    char *file;                 /* the config file read, or NULL */
    int n_rest;
    char **rest;                /* other arguments, in order, borrowed from argv */
    bool help;                  /* -h/--help was given: nothing was loaded */
} config;

/* Loads every layer for argv (argv[0] is the command name, and is skipped).
 * 0 on success; -1 with a message in err that names the file, variable or
 * flag and the key at fault (an unknown key, a wrong type, a bad value).
 * Free with config_free even on failure. */
int config_load(config *c, int argc, char **argv, char *err, size_t errlen);
void config_free(config *c);

/* The argument list the command parses: [argv[0], one flag and value for
 * each setting not at its default, the other arguments...]. The flags a
 * command sees are already validated against the table. Returns 0, or -1
 * with err set. Free *out_argv with config_argv_free. */
int config_apply(int argc, char **argv, int *out_argc, char ***out_argv, char *err, size_t errlen);
void config_argv_free(char **argv);

/* The value of setting `key` in c: the winning layer's, else the table's
 * default, else NULL. key must be in the table. */
const char *config_get(const config *c, const char *key);
/* Readers of a value config_load (or the table's tests) already checked
 * against its setting: they cannot fail. */
long long config_int(const char *v);
double config_number(const char *v);
uint64_t config_size(const char *v);
bool config_bool(const char *v);

/* Writes one line per setting for a command's --help:
 * "  -c, --ctx-size N   help (default 4096)". */
void config_print_flags(FILE *f);

/* The setting for a flag spelling or JSON key, or NULL. */
const config_setting *config_find_flag(const char *flag);
const config_setting *config_find_key(const char *key);
/* "HEARTH_CTX_SIZE" for "ctx-size" (buf of at least 64 bytes). */
void config_env_name(const config_setting *s, char *buf, size_t cap);

#endif
