/* The subcommands of the hearth binary; main.c dispatches to them. */
#ifndef HEARTH_COMMANDS_H
#define HEARTH_COMMANDS_H

int cmd_run(int argc, char **argv);      /* cli_run.c */
int cmd_chat(int argc, char **argv);     /* cli_chat.c */
int cmd_info(int argc, char **argv);     /* cli_info.c */
int cmd_bench(int argc, char **argv);    /* cli_bench.c */
int cmd_mkmodel(int argc, char **argv);  /* cli_mkmodel.c */
int cmd_serve(int argc, char **argv);    /* serve.c */
int cmd_config(int argc, char **argv);   /* cli_config.c */
int cmd_version(void);                   /* cli_config.c: hearth --version */
int cmd_template(int argc, char **argv); /* cli_template.c */

#endif
