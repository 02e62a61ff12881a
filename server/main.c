/* hearth: entry point; dispatches to the subcommands. */
#include <stdio.h>
#include <string.h>
#include "server/commands.h"
#include "config/config.h"

static const char usage[] =
    "usage: hearth COMMAND [flags]      (hearth COMMAND --help lists its flags)\n"
    "  serve     OpenAI-compatible HTTP server\n"
    "  run       generate text from a prompt on the terminal\n"
    "  chat      a conversation in the terminal, through the model's chat template\n"
    "  info      a model's architecture, shapes, tensor types and vocabulary\n"
    "  bench     prompt and generation speed\n"
    "  mkmodel   write a synthetic model (random weights)\n"
    "  template  render a chat template with given variables (checks a template)\n"
    "  config    serve's effective configuration and where each value comes from\n"
    "  --version version and the backends of this build\n";

int main(int argc, char **argv) {
    if (argc < 2) { fputs(usage, stderr); return 2; }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) { fputs(usage, stdout); return 0; }
    if (!strcmp(argv[1], "--version")) return cmd_version();
    if (!strcmp(argv[1], "config")) return cmd_config(argc - 1, argv + 1);
    if (!strcmp(argv[1], "serve")) return cmd_serve(argc - 1, argv + 1);   /* defaults < file < env < flags */
    if (!strcmp(argv[1], "run")) return cmd_run(argc - 1, argv + 1);
    if (!strcmp(argv[1], "chat")) return cmd_chat(argc - 1, argv + 1);
    if (!strcmp(argv[1], "info")) return cmd_info(argc - 1, argv + 1);
    if (!strcmp(argv[1], "bench")) return cmd_bench(argc - 1, argv + 1);
    if (!strcmp(argv[1], "mkmodel")) return cmd_mkmodel(argc - 1, argv + 1);
    if (!strcmp(argv[1], "template")) return cmd_template(argc - 1, argv + 1);
    fprintf(stderr, "hearth: unknown command '%s'\n", argv[1]);
    return 2;
}
