/* sandbox: a Lua 5.4 config file evaluated in a sandbox.
 *
 * Only the base, string, table, math and utf8 libraries, without load/loadfile/dofile/require/
 * collectgarbage; no io, os, package, debug or coroutine. A config assigns globals (name = ..., model = {...}).
 * Assignments go through a proxy that deep-merges tables, so after `base "gpt2-124M.lua"` a line like
 * `train = { steps = 100 }` changes one field and keeps the rest. Lists (tables with [1]) are replaced whole.
 * `--set a.b.c=value` overrides apply on top.
 *
 * The limits hold for every piece of Lua that runs, from the state's creation to its close: the config, its
 * bases, the overrides' values, the metamethods and message handlers they install, the reading of the result
 * and the close.
 *   - Memory: an allocator caps what the state holds at CONFIG_MEM_LIMIT (plus CONFIG_READ_RESERVE while the
 *     result is read, so that reading a config that used all of its memory still gives the real message).
 *   - Time: a count hook stops Lua code after CONFIG_TIME_LIMIT seconds; the config's pcall and xpcall cannot
 *     catch that error. C code that never returns to Lua (an exponentially backtracking pattern match,
 *     string.rep("", 1e18), reading a FIFO) is stopped by a watchdog CONFIG_WATCHDOG_GRACE later: it prints
 *     the same message and ends the process with exit code 2.
 *   - Code that would run outside the hook: Lua runs finalizers with hooks off, so setmetatable refuses a
 *     metatable with __gc. The string metatable and the environment's metatable are locked (getmetatable
 *     gives false). There are no coroutines, so the main thread, which has the hook, is the only thread.
 *   - Errors: every call into Lua is protected; an error anywhere becomes "<file>: message". A Lua panic (a
 *     bug: nothing should be unprotected) jumps back and becomes the same kind of message. */
#ifndef GPT2GEN_SANDBOX_H
#define GPT2GEN_SANDBOX_H
#include "gen/config.h"
#include <lua.h>

#define CONFIG_MEM_LIMIT      (64u << 20)   /* bytes a config may allocate */
#define CONFIG_READ_RESERVE   (1u << 20)    /* more bytes for reading the result */
#define CONFIG_TIME_LIMIT     2.0           /* seconds a config may run */
#define CONFIG_FILE_MAX       (1u << 20)    /* bytes a config file (or a base) may have, checked before reading it */
#define CONFIG_WATCHDOG_GRACE 1.0           /* seconds after that before the watchdog ends the process */
#define SANDBOX_MAX_BASES     16            /* nested base "x.lua" calls */

/* Reads the table of everything the config assigned (at the top of L's stack) into ud. It runs in protected
   mode under the limits, so it may raise Lua errors (out of memory); it must not call Lua functions or use
   metamethods (use raw access). Returns 0, or -1 with err set. */
typedef int (*SandboxReader)(lua_State *L, void *ud, Err *err);

/* Runs path (and its bases), then the overrides ("train.steps=100"), then read on the result, and closes the
   state, all under the limits. Paths (path and its bases) are at most CONFIG_PATH_MAX - 1 characters.
   Returns 0, or -1 with err set: errors name the file (and line). */
int sandbox_run(const char *path, const char *const *overrides, int n_overrides, SandboxReader read, void *ud, Err *err);
#endif
