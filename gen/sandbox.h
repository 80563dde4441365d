/* sandbox: a Lua 5.4 config file evaluated in a sandbox.
 *
 * Only the base, string, table, math and utf8 libraries, without load/loadfile/dofile/require/
 * collectgarbage; no io, os, package or debug. A memory cap (allocator) and a time cap (count hook) stop a
 * config that allocates without bound or never returns.
 *
 * A config assigns globals (name = ..., model = {...}). Assignments go through a proxy that deep-merges
 * tables, so after `base "gpt2-124M.lua"` a line like `train = { steps = 100 }` changes one field and keeps
 * the rest. Lists (tables with [1]) are replaced whole. `--set a.b.c=value` overrides apply on top. */
#ifndef GPT2GEN_SANDBOX_H
#define GPT2GEN_SANDBOX_H
#include "gen/config.h"
#include <lua.h>

#define CONFIG_MEM_LIMIT  (64u << 20)   /* bytes a config may allocate */
#define CONFIG_TIME_LIMIT 2.0           /* seconds a config may run */

typedef struct { size_t used, limit; double deadline; } Sandbox;

typedef struct {
    lua_State *L;
    Sandbox sb;
    int store_ref, env_ref;
    char dirs[16][CONFIG_PATH_MAX];   /* directory of each config on the base chain */
    char files[16][CONFIG_PATH_MAX];
    int depth;
} Eval;

/* Runs path (and its bases), then the overrides ("train.steps=100"). On success the table of everything the
   config assigned is on top of ev->L's stack. Errors name the file (and line). Close in any case. */
int  sandbox_eval(Eval *ev, const char *path, const char *const *overrides, int n_overrides, Err *err);
void sandbox_close(Eval *ev);
#endif
