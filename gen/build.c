#include "gen/config.h"
#include "gen/build.h"
#include "common/dirs.h"
#include "common/files.h"
#include "common/clock.h"
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include "gen/emit.h"
#include "gen/nvrtc.h"
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* What a build guarantees (docs/architecture.md):
   - One build of a name at a time. A build holds an flock on build/<name>/.lock from its start to its end;
     another build of that name says "waiting for another build of <name> (pid N)" once and waits, at most
     $GPT2GEN_LOCK_TIMEOUT seconds (default 600), then fails naming the holder. The lock ends with its process,
     so a killed build never blocks the next one.
   - build/<name>/ changes in one step, and only when the build succeeds. The build makes a copy of it,
     build/<name>~<pid>/ (hard links to what is there, so other files and other archs' CUBINs are kept), writes
     its own files into the copy (each atomically; an unchanged file keeps its old inode and mtime), then swaps
     the copy and build/<name>/ with one rename (RENAME_EXCHANGE) and removes the old one. config.lua, plan.txt
     and kernels/ are therefore always from one build, whatever is killed when. Names cannot hold '~', so
     build/<name>~* belongs to this name only; what a killed build left there is removed by the next one.
   - When NVRTC fails, build/<name>/ is left as it was; the generated sources are in build/<name>~failed/kernels/
     (the error names the file), until the next build of that name.
   - Without NVRTC or the CUDA headers it compiles against (gen/nvrtc.h: nvrtc_ready), the build is the same
     without the compile: build/<name>/ gets the sources, plan.txt and config.lua, and loses this arch's CUBINs of
     those kernels (they would not be the sources'); build_plans returns BUILD_NO_NVRTC.
   - A path that does not fit its buffer is an error that says so, never a truncated path. */

#define PATH_BYTES 4096                      /* common/files.c's path buffers */

/* Formats a path into out[PATH_BYTES], with room for the ".tmp.<pid>" that write_file_atomic adds. */
static int path_fmt(char *out, Err *err, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int path_fmt(char *out, Err *err, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(out, PATH_BYTES, fmt, ap);
    va_end(ap);
    if (n < 0 || n + 32 >= PATH_BYTES) return err_set(err, "%.200s...: path longer than %d characters", out, PATH_BYTES - 32);
    return 0;
}

/* Writes data to path unless a regular file there already holds exactly that (it then keeps its inode and mtime). */
static int write_if_changed(const char *path, const char *data, size_t len, Err *err) {
    struct stat st;
    int same = 0;
    if (lstat(path, &st) == 0 && S_ISREG(st.st_mode) && (size_t)st.st_size == len) {
        size_t old_len;
        Err ignore;
        char *old = read_file(path, &old_len, &ignore);
        same = old && old_len == len && memcmp(old, data, len) == 0;
        free(old);
    }
    return same ? 0 : write_file_atomic(path, data, len, err);
}

/* ---------------------------------------------------------------- the lock */

/* Takes the lock dir/.lock for a build of name (waiting for another build of it, at most timeout seconds:
   GPT2GEN_LOCK_TIMEOUT); the fd holds it until closed (or the process ends). */
static int lock_build(const char *dir, const char *name, double timeout, int *fd_out, Err *err) {
    char path[PATH_BYTES];
    if (path_fmt(path, err, "%s/.lock", dir)) return -1;
    int said = 0;
    double t0 = now_seconds();
    for (;;) {
        long pid = 0;
        int rc = lockfile_try(path, fd_out, &pid, err);
        if (rc <= 0) return rc;
        char who[32] = "";
        if (pid) snprintf(who, sizeof who, " (pid %ld)", pid);
        if (!said) fprintf(stderr, "gpt2gen: waiting for another build of %s%s\n", name, who);
        said = 1;
        if (now_seconds() - t0 >= timeout)
            return err_set(err, "another build of %s%s still holds %s after %g s; giving up (GPT2GEN_LOCK_TIMEOUT sets the wait)",
                           name, who, path, timeout);
        usleep(100 * 1000);
    }
}

/* ---------------------------------------------------------------- the copy and the swap */

/* Removes parent/<base>~* (what killed builds of this name left). Only while holding the name's lock. */
static void remove_stale(const char *parent, const char *base) {
    DIR *d = opendir(parent);
    if (!d) return;
    size_t n = strlen(base);
    char path[PATH_BYTES];
    Err ignore;
    for (struct dirent *e; (e = readdir(d));)
        if (!strncmp(e->d_name, base, n) && e->d_name[n] == '~' && !path_fmt(path, &ignore, "%s/%s", parent, e->d_name))
            dir_remove_tree(path);
    closedir(d);
}



/* ---------------------------------------------------------------- the build */

typedef struct {
    const Plan *const *plans;  /* plans[0]'s build folder and config are the build's */
    int n_plans;
    const Plan *plan;          /* plans[0] */
    char dir[PATH_BYTES];      /* build/<name> */
    char parent[PATH_BYTES];   /* build */
    char base[PATH_BYTES];     /* <name> */
    char stage[PATH_BYTES];    /* build/<name>~<pid>: the copy the build writes */
    char failed[PATH_BYTES];   /* build/<name>~failed: the sources of a build NVRTC failed on */
} Places;

/* The places of plan's build; refuses a name or a build folder that a build must not replace. */
static int places_make(Places *p, const Plan *const *plans, int n, const Env *env, Err *err) {
    const Plan *plan = plans[0];
    const char *name = plan->config_name, *dir = plan->build_dir;
    size_t nd = strlen(dir), nn = strlen(name);
    p->plans = plans;
    p->n_plans = n;
    p->plan = plan;
    for (int i = 1; i < n; i++)
        if (strcmp(plans[i]->build_dir, dir))
            return err_set(err, "plan \"%s\" is for the build folder %s, not %s", plans[i]->name, plans[i]->build_dir, dir);
    if (!nn || !strcmp(name, ".") || !strcmp(name, "..") || strchr(name, '/') || strchr(name, '~'))
        return err_set(err, "%s: name \"%s\" cannot name a build folder", plan->config_path, name);
    if (nd < nn + 2 || strcmp(dir + nd - nn, name) || dir[nd - nn - 1] != '/')
        return err_set(err, "%s: the build folder \"%s\" is not <folder>/%s (name too long?)", plan->config_path, dir, name);
    if (path_fmt(p->dir, err, "%s", dir) || path_fmt(p->parent, err, "%.*s", (int)(nd - nn - 1), dir) ||
        path_fmt(p->base, err, "%s", name) || path_fmt(p->stage, err, "%s~%d", dir, (int)getpid()) ||
        path_fmt(p->failed, err, "%s~failed", dir))
        return -1;
    if (mkdir_p(p->dir, err)) return -1;
    struct stat st;
    if (lstat(p->dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return err_set(err, "%s: not a folder (a symbolic link?): a build replaces this folder as a whole, so it must be "
                       "a real one (link build/ itself instead)", p->dir);
    /* the cache must not be this folder or inside it: the swap would take it away from concurrent builds */
    Err ignore;
    mkdir_p(nvrtc_cache_dir(env), &ignore);
    char *cache = realpath(nvrtc_cache_dir(env), NULL), *real = realpath(p->dir, NULL);
    size_t nr = real ? strlen(real) : 0;
    int inside = cache && real && !strncmp(cache, real, nr) && (cache[nr] == 0 || cache[nr] == '/');
    free(cache);
    free(real);
    if (inside)
        return err_set(err, "%s: the kernel cache %s is this build folder or inside it; set GPT2GEN_CACHE elsewhere or "
                       "rename the config", p->dir, nvrtc_cache_dir(env));
    return 0;
}

/* Makes the folder path lies in. */
static int mkdir_parent(const char *path, Err *err) {
    char dir[PATH_BYTES];
    const char *slash = strrchr(path, '/');
    if (!slash) return 0;
    if (path_fmt(dir, err, "%.*s", (int)(slash - path), path)) return -1;
    return mkdir_p(dir, err);
}

/* path (under p->dir) moved under root instead. */
static int path_under(char *out, const Places *p, const char *root, const char *path, Err *err) {
    size_t n = strlen(p->dir);
    if (strncmp(path, p->dir, n) || path[n] != '/') return err_set(err, "%s: not inside %s", path, p->dir);
    return path_fmt(out, err, "%s%s", root, path + n);
}

static int write_config(const Places *p, Err *err) {
    char path[PATH_BYTES];
    if (path_fmt(path, err, "%s/config.lua", p->stage)) return -1;
    char *text = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&text, &len);
    if (!mem) return err_set(err, "open_memstream: %s", strerror(errno));
    config_write_lua(p->plan->cfg, mem);
    fclose(mem);
    int rc = write_if_changed(path, text, len, err);
    free(text);
    return rc;
}

/* plan.txt into the stage: plan_write writes <first plan's build_dir>/plan.txt, so with a copy of the first plan
   whose build_dir is the stage (the families' paths, which plan.txt prints, stay the final ones). */
static int write_plan(const Places *p, Err *err) {
    Plan *copy = xmalloc(sizeof *copy);
    *copy = *p->plan;
    const Plan *plans[BUILD_MAX_PLANS];
    plans[0] = copy;
    for (int i = 1; i < p->n_plans; i++) plans[i] = p->plans[i];
    int n = snprintf(copy->build_dir, sizeof copy->build_dir, "%s", p->stage);
    int rc = n < 0 || n >= (int)sizeof copy->build_dir ? err_set(err, "%s: path too long for the plan", p->stage)
                                                        : plan_write(plans, p->n_plans, err);
    free(copy);
    return rc;
}

/* Every plan's families in one list, plan by plan: job j compiles fams[j] of plan owner[j]. Returns how many. */
static int job_list(const Places *p, const Plan **owner, const PlanFamily **fams) {
    int n = 0;
    for (int i = 0; i < p->n_plans; i++)
        for (int f = 0; f < p->plans[i]->n_families; f++) {
            owner[n] = p->plans[i];
            fams[n++] = &p->plans[i]->families[f];
        }
    return n;
}

/* Writes the build into a copy of build/<name>/ and swaps it into place; jobs NULL: the sources without CUBINs. */
static int commit(const Places *p, const PlanFamily *const *fams, const CompileJob *jobs, char **sources, int n_jobs,
                  Err *err) {
    char path[PATH_BYTES];
    remove_stale(p->parent, p->base);
    int rc = dir_link_tree(p->dir, p->stage, NULL, err);
    for (int j = 0; j < n_jobs && rc == 0; j++) {
        const PlanFamily *m = fams[j];
        rc = path_under(path, p, p->stage, m->source_path, err);
        if (rc == 0) rc = mkdir_parent(path, err);
        if (rc == 0) rc = write_if_changed(path, sources[j], strlen(sources[j]), err);
        if (rc == 0) rc = path_under(path, p, p->stage, m->cubin_path, err);
        if (rc == 0 && jobs) rc = write_if_changed(path, jobs[j].cubin, jobs[j].cubin_size, err);
        if (rc == 0 && !jobs && unlink(path) && errno != ENOENT)
            rc = err_set(err, "%s: cannot remove the old CUBIN: %s", path, strerror(errno));
    }
    if (rc == 0) rc = write_plan(p, err);
    if (rc == 0) rc = write_config(p, err);
    char aside[PATH_BYTES];
    if (rc == 0) rc = path_fmt(aside, err, "%s.old", p->stage);
    if (rc == 0 && dir_swap(p->stage, p->dir, aside) < 0)
        rc = err_set(err, "%s: cannot swap in the new build: %s", p->dir, strerror(errno));
    dir_remove_tree(p->stage);   /* after the swap: the old build; after a failure: the unfinished copy */
    if (rc == 0) dir_sync(p->parent);
    return rc;
}

/* After NVRTC failed: the sources into build/<name>~failed/kernels/, where the error says they are. */
static void keep_failed_sources(const Places *p, const CompileJob *jobs, int n) {
    char path[PATH_BYTES];
    Err ignore;
    dir_remove_tree(p->failed);
    if (path_fmt(path, &ignore, "%s/kernels", p->failed) || mkdir_p(path, &ignore)) return;
    for (int i = 0; i < n; i++)
        if (jobs[i].source && !mkdir_parent(jobs[i].source_path, &ignore))
            write_file_atomic(jobs[i].source_path, jobs[i].source, strlen(jobs[i].source), &ignore);
}

static int run_locked(const Places *p, const Env *env, int threads, CompileJob *jobs, char **sources,
                      char (*src_paths)[PATH_BYTES], Err *err) {
    const Plan *owner[BUILD_MAX_PLANS * PLAN_MAX_FAMILIES];
    const PlanFamily *fams[BUILD_MAX_PLANS * PLAN_MAX_FAMILIES];
    int n = job_list(p, owner, fams);
    for (int j = 0; j < n; j++) {
        sources[j] = emit_family(owner[j], fams[j], env_or_defaults(env)->templates, err);
        if (!sources[j] || path_under(src_paths[j], p, p->failed, fams[j]->source_path, err)) return -1;
        jobs[j].name = fams[j]->decl->family;
        jobs[j].source = sources[j];
        jobs[j].source_path = src_paths[j];   /* where NVRTC errors send people: kept only when NVRTC fails */
        jobs[j].arch = owner[j]->arch;
    }
    Err why;
    if (nvrtc_ready(env, &why)) {
        if (commit(p, fams, NULL, sources, n, err)) return -1;
        err_set(err, "generated the sources in %s/ but cannot compile them: %s", p->dir, why.msg);
        return BUILD_NO_NVRTC;
    }
    if (threads <= 0) threads = (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (nvrtc_compile_all(jobs, n, env, threads, err)) {
        keep_failed_sources(p, jobs, n);
        return -1;
    }
    return commit(p, fams, jobs, sources, n, err);
}

int build_run(const Plan *plan, int threads, int quiet, const Env *env, BuildStats *st, Err *err) {
    return build_plans(&plan, 1, threads, quiet, env, st, err);
}

int build_plans(const Plan *const *plans, int n_plans, int threads, int quiet, const Env *env, BuildStats *st, Err *err) {
    double t0 = now_seconds();
    if (n_plans < 1 || n_plans > BUILD_MAX_PLANS) return err_set(err, "a build makes 1 to %d plans, not %d", BUILD_MAX_PLANS, n_plans);
    const Plan *plan = plans[0];
    if (model_gpu_check(&plan->model, plan->config_path, err)) return -1;   /* what the kernels do not cover */
    Places *p = xmalloc(sizeof *p);
    int lock = -1, n = 0;   /* the jobs: every plan's families */
    for (int i = 0; i < n_plans; i++) n += plans[i]->n_families;
    int rc = places_make(p, plans, n_plans, env, err);
    if (rc == 0) rc = lock_build(p->dir, plan->config_name, env_or_defaults(env)->lock_timeout, &lock, err);
    CompileJob *jobs = xcalloc(n, sizeof *jobs);
    char **sources = xcalloc(n, sizeof *sources);
    char (*src_paths)[PATH_BYTES] = xcalloc(n, sizeof *src_paths);
    if (rc == 0) rc = run_locked(p, env, threads, jobs, sources, src_paths, err);
    if (lock >= 0) close(lock);
    BuildStats s = {n, 0, 0, now_seconds() - t0};
    for (int i = 0; i < n; i++) { s.cached += jobs[i].from_cache; s.compiled += !jobs[i].from_cache && jobs[i].cubin; }
    for (int i = 0; i < n; i++) { free(jobs[i].cubin); free(sources[i]); }
    free(jobs);
    free(sources);
    free(src_paths);
    free(p);
    if (st) *st = s;
    if (rc == 0 && !quiet) {
        char which[128] = "";
        if (n_plans > 1) {
            snprintf(which, sizeof which, " (plans");
            for (int i = 0; i < n_plans; i++) {
                size_t len = strlen(which);
                snprintf(which + len, sizeof which - len, " %s", plans[i]->name);
            }
            strncat(which, ")", sizeof which - strlen(which) - 1);
        }
        printf("%s: %d kernel families%s for %s: %d compiled, %d from cache, %.2f s\n", plan->build_dir, n, which,
               plan->arch, s.compiled, s.cached, s.seconds);
    }
    return rc;
}
