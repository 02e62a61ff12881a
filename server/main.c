/* hearth: entry point; dispatches to the subcommands. */
#include <stdio.h>
#include <string.h>
#include "commands.h"

int main(int argc, char **argv) {
    if (argc < 2) { fprintf(stderr, "usage: hearth run|info|bench|mkmodel|serve ...\n"); return 2; }
    if (!strcmp(argv[1], "run")) return cmd_run(argc - 1, argv + 1);
    if (!strcmp(argv[1], "info")) return cmd_info(argc - 1, argv + 1);
    if (!strcmp(argv[1], "bench")) return cmd_bench(argc - 1, argv + 1);
    if (!strcmp(argv[1], "mkmodel")) return cmd_mkmodel(argc - 1, argv + 1);
    fprintf(stderr, "hearth: unknown command '%s'\n", argv[1]);
    return 2;
}
