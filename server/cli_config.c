/* `hearth config`: the effective configuration of `hearth serve` and where
 * each value came from; and `hearth --version`. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "server/commands.h"
#include "config/config.h"
#include "kernels/kernels.h"
#include "engine/model/backend.h"

#ifndef HEARTH_VERSION
#define HEARTH_VERSION "unknown"
#endif

static void config_help(void) {
    printf("usage: hearth config [--config FILE] [serve flags...]\n"
           "Prints the configuration `hearth serve` would run with, and where each value\n"
           "comes from. Layers, lowest first: defaults < config file < HEARTH_* variables\n"
           "< flags. The file is --config FILE, else $HEARTH_CONFIG, else\n"
           "$XDG_CONFIG_HOME/hearth/config.json, else ~/.config/hearth/config.json: a JSON\n"
           "object with the keys below (null leaves a key at its default; in the file,\n"
           "\"~/\" and relative paths are resolved from $HOME and the file's folder).\n"
           "HEARTH_KERNELS (kernel path) is read by the CPU probe, not by this layer.\n\n"
           "%-18s %-22s %-26s %s\n", "key", "flag", "environment", "default / meaning");
    for (const config_setting *s = config_settings; s->key; s++) {
        char flags[64], env[64];
        if (s->short_flag) snprintf(flags, sizeof flags, "%s, %s", s->short_flag, s->flag);
        else snprintf(flags, sizeof flags, "%s", s->flag);
        config_env_name(s, env, sizeof env);
        printf("%-18s %-22s %-26s %s%s%s%s\n", s->key, flags, env,
               s->def ? "[" : "", s->def ? s->def : "", s->def ? "] " : "", s->help);
        if (s->choices) printf("%-18s %-22s %-26s one of: %s\n", "", "", "", s->choices);
    }
}

int cmd_config(int argc, char **argv) {
    config c;
    char err[1280];
    if (config_load(&c, argc, argv, err, sizeof err)) {
        fprintf(stderr, "hearth config: %s\n", err);
        config_free(&c);
        return 2;
    }
    if (c.help) { config_help(); config_free(&c); return 0; }

    printf("# config file: %s\n", c.file ? c.file : "(none)");
    for (int i = 0; config_settings[i].key; i++) {
        const config_setting *s = &config_settings[i];
        const struct config_value *v = &c.values[i];
        const char *shown = v->value ? (s->secret ? "(hidden)" : v->value) : s->def ? s->def : "(unset)";
        const char *src = v->src == CFG_SRC_FILE ? "file " : v->src == CFG_SRC_ENV ? "env "
                        : v->src == CFG_SRC_FLAG ? "flag " : "default";
        printf("%-18s = %-30s # %s%s\n", s->key, shown, src, v->origin ? v->origin : "");
    }
    const char *k = getenv("HEARTH_KERNELS");
    if (k && *k) printf("# kernels = %s (env HEARTH_KERNELS)\n", k);
    if (c.n_rest) {
        printf("# passed to serve unchanged:");
        for (int i = 0; i < c.n_rest; i++) printf(" %s", c.rest[i]);
        printf("\n");
    }
    config_free(&c);
    return 0;
}

int cmd_version(void) {
    printf("hearth %s\nkernels:", HEARTH_VERSION);
    for (int p = 0; p < KPATH_COUNT; p++)
        if (kernels_path_available((kern_path_id)p)) printf(" %s", kernels_path_name((kern_path_id)p));
    printf(" (selected: %s)\n", kernels_path_name(kernels_select()));
    printf("amx tiles: %s\n", kernels_amx_status());
    printf("sme2: %s\n", kernels_sme_status());
    printf("backends: %s (auto: %s)\n", backend_names(), backend_find("auto") ? backend_find("auto")->name : "none");
#ifdef HEARTH_METAL
    printf("metal: yes\n");
#else
    printf("metal: no\n");
#endif
    return 0;
}
