/* model: what the commands that take a checkpoint share (gpt2gen sample, eval, export): the model config made from
   a checkpoint's header, and the tokenizer that goes with it. */
#include "cli/commands.h"
#include "common/files.h"
#include "runtime/checkpoint.h"
#include "runtime/gpu.h"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

/* the tokenizer file: --tokenizer, else one beside the checkpoint, else the default data set's */
const char *cli_pick_tokenizer(const char *given, const char *checkpoint, char *buf, size_t n) {
    if (given) return given;
    static const char *const beside[] = {"tokenizer.bin", "gpt2_tokenizer.bin"};
    const char *slash = strrchr(checkpoint, '/');
    int dir = slash ? (int)(slash - checkpoint + 1) : 0;
    for (int i = 0; i < 2; i++) {
        snprintf(buf, n, "%.*s%s", dir, checkpoint, beside[i]);
        if (file_exists(buf)) return buf;
    }
    return "data/fortunes/tokenizer.bin";
}

/* The config of the checkpoint's model: its header's ModelSpec, run with the defaults, one row of the model's
   context and no samples during training (a command that takes a checkpoint trains nothing). */
int cli_checkpoint_config(Config *cfg, const GPT2Shape *s, const char *precision, const char *checkpoint, Err *err) {
    Precision p;
    if (precision_parse(precision, &p))
        return err_set(err, "%s: precision: expected one of fp32, bf16, fp16, got \"%s\"", checkpoint, err_show(precision));
    char where[CONFIG_PATH_MAX + 64];
    snprintf(where, sizeof where, "%s: its model cannot run here", err_show(checkpoint));
    ModelSpec m;
    if (model_spec_from_header(&m, s, p, where, err)) return -1;
    RunSpec run;
    run_spec_defaults(&run);
    run.train.batch_size = 1;
    run.train.seq_len = m.max_seq_len;
    run.eval.sample_every = 0;
    run.eval.sample_tokens = 1;
    return config_from_specs(cfg, "sample", checkpoint, &m, &run, err);
}

void cli_pick_arch(const char *backend, const char *given, char arch[16]) {
    snprintf(arch, 16, "sm_90");
    if (strcmp(backend, "cpu")) {
        const char *note;
        cuda_pick_arch(given, "", arch, &note);
    }
}

int cli_load_weights(Backend *be, const char *checkpoint, Err *err) {
    float *params = xmalloc(be->num_params * sizeof *params);
    int rc = checkpoint_load(checkpoint, &be->plan->model, params, err) || be->write(be, BACKEND_PARAMS, params, err)
             ? -1 : 0;
    free(params);
    return rc;
}

/* Memory this process may still take on the host: physical memory, less where RLIMIT_AS (ulimit -v) leaves less. */
static size_t host_memory_left(void) {
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    size_t left = pages > 0 && page > 0 ? (size_t)pages * (size_t)page : SIZE_MAX;
    struct rlimit rl;
    if (getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
        unsigned long vm_pages = 0;
        FILE *f = fopen("/proc/self/statm", "r");
        if (f && fscanf(f, "%lu", &vm_pages) != 1) vm_pages = 0;
        if (f) fclose(f);
        size_t used = (size_t)vm_pages * (size_t)(page > 0 ? page : 4096);
        size_t lim = used < rl.rlim_cur ? (size_t)(rl.rlim_cur - used) : 0;
        if (lim < left) left = lim;
    }
    return left;
}

int cli_check_memory(const Plan *const *plans, int n, const char *opt, long rows, const char *backend, Err *err) {
    size_t need = 0, fixed = 0, avail = 0, total = 0;
    for (int i = 0; i < n; i++)
        if (plans[i]) {
            const PlanMemory *m = &plans[i]->memory;
            need += m->arena_bytes;
            fixed += m->category_bytes[MEM_PARAMS] + m->category_bytes[MEM_WORKSPACE];
        }
    Err gerr;
    int gpu = strcmp(backend, "cpu") && cuda_device_memory(0, &avail, &total, &gerr) == 0;
    if (!gpu && !strcmp(backend, "cuda")) return 0;   /* no GPU: the backend says so when it is made */
    if (!gpu) avail = host_memory_left();
    if (need <= avail) return 0;
    size_t per_row = rows > 0 && need > fixed ? (need - fixed) / (size_t)rows : need, fit = 0;
    if (avail > fixed && per_row) fit = (avail - fixed) / per_row;
    if (fit >= (size_t)rows) fit = (size_t)rows - 1;   /* the estimate is linear; never say the asked rows fit */
    const double gib = 1024.0 * 1024.0 * 1024.0;
    char most[96];
    if (fit) snprintf(most, sizeof most, "at most %zu row%s fit: lower %s", fit, fit == 1 ? "" : "s", opt);
    else snprintf(most, sizeof most, "not even one row fits");
    return err_set(err, "%s %ld: %ld rows need about %.2f GiB of %s (the weights, and each row's key/value cache and "
                   "activations), but %.2f GiB %s; %s", opt, rows, rows, need / gib, gpu ? "GPU memory" : "memory",
                   avail / gib, gpu ? "are free on GPU 0" : "are left to this process on the host", most);
}
