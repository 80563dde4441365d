#include "gen/build.h"
#include "common/files.h"
#include "common/clock.h"
#include <stdio.h>
#include "gen/emit.h"
#include "gen/nvrtc.h"
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Writes data to path unless the file already holds exactly that (keeps mtimes of unchanged sources). */
static int write_if_changed(const char *path, const char *data, size_t len, Err *err) {
    size_t old_len;
    Err ignore;
    char *old = file_exists(path) ? read_file(path, &old_len, &ignore) : NULL;
    int same = old && old_len == len && memcmp(old, data, len) == 0;
    free(old);
    return same ? 0 : write_file_atomic(path, data, len, err);
}

static int write_config(const Plan *plan, Err *err) {
    char path[1200];
    snprintf(path, sizeof path, "%s/config.lua", plan->build_dir);
    char *text = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&text, &len);
    config_write_lua(plan->cfg, mem);
    fclose(mem);
    int rc = write_if_changed(path, text, len, err);
    free(text);
    return rc;
}

int build_run(const Plan *plan, int threads, int quiet, BuildStats *st, Err *err) {
    double t0 = now_seconds();
    char dir[1200];
    snprintf(dir, sizeof dir, "%s/kernels", plan->build_dir);
    if (mkdir_p(dir, err)) return -1;
    int n = plan->n_modules, rc = 0;
    CompileJob *jobs = xcalloc(n, sizeof *jobs);
    char **sources = xcalloc(n, sizeof *sources);
    for (int i = 0; i < n && rc == 0; i++) {
        const PlanModule *m = &plan->modules[i];
        sources[i] = emit_module(plan, m, err);
        if (!sources[i]) { rc = -1; break; }
        rc = write_if_changed(m->source_path, sources[i], strlen(sources[i]), err);
        jobs[i].name = m->decl->family;
        jobs[i].source = sources[i];
        jobs[i].source_path = m->source_path;
        jobs[i].arch = plan->arch;
    }
    if (threads <= 0) threads = (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (rc == 0) rc = nvrtc_compile_all(jobs, n, nvrtc_cache_dir(), threads, err);
    for (int i = 0; i < n && rc == 0; i++)
        rc = write_if_changed(plan->modules[i].cubin_path, jobs[i].cubin, jobs[i].cubin_size, err);
    if (rc == 0) rc = plan_write(plan, err);
    if (rc == 0) rc = write_config(plan, err);
    BuildStats s = {n, 0, 0, now_seconds() - t0};
    for (int i = 0; i < n; i++) { s.cached += jobs[i].from_cache; s.compiled += !jobs[i].from_cache && jobs[i].cubin; }
    for (int i = 0; i < n; i++) { free(jobs[i].cubin); free(sources[i]); }
    free(jobs);
    free(sources);
    if (st) *st = s;
    if (rc == 0 && !quiet)
        printf("%s: %d modules for %s: %d compiled, %d from cache, %.2f s\n", plan->build_dir, n, plan->arch,
               s.compiled, s.cached, s.seconds);
    return rc;
}
