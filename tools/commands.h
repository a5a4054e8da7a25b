/* commands.h — the table of assay subcommands. One row per command; each command lives in tools/cmd_<name>.c. */
#ifndef ASSAY_TOOLS_COMMANDS_H
#define ASSAY_TOOLS_COMMANDS_H

typedef int (*assay_command_fn)(int argc, char **argv);

typedef struct assay_command {
    const char *name;
    const char *summary;
    assay_command_fn run; /* NULL: listed in the plan, not built yet (says so and exits 1) */
} assay_command;

extern const assay_command assay_commands[];

/* One entry point per built command (tools/cmd_<name>.c). */
int assay_cmd_tokenize(int argc, char **argv);
int assay_cmd_detokenize(int argc, char **argv);
int assay_cmd_inspect(int argc, char **argv);
int assay_cmd_convert(int argc, char **argv);
int assay_cmd_imatrix(int argc, char **argv);
int assay_cmd_run(int argc, char **argv);
int assay_cmd_perplexity(int argc, char **argv);
int assay_cmd_quantize(int argc, char **argv);
int assay_cmd_eval(int argc, char **argv);
int assay_cmd_compare(int argc, char **argv);
int assay_cmd_decide(int argc, char **argv);
int assay_cmd_bench(int argc, char **argv);
int assay_cmd_serve(int argc, char **argv);
int assay_cmd_bench_serve(int argc, char **argv);
int assay_cmd_plan(int argc, char **argv);
int assay_cmd_dashboard(int argc, char **argv);
int assay_cmd_judge(int argc, char **argv);


#endif
