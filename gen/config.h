/* config: a Lua 5.4 config file, evaluated in a sandbox, read into two plain structs (ModelSpec: the model, as a
   checkpoint's header also says it; RunSpec: how it is run), validated once. Every later stage trusts a Config
   that config_load returned, and a ModelSpec that model_spec_from_header returned. */
#ifndef GPT2GEN_CONFIG_H
#define GPT2GEN_CONFIG_H
#include "gen/spec.h"
#include <stdio.h>

/* A config file read: its name and path, the model and how it is run. */
typedef struct Config {
    char name[128];
    char path[CONFIG_PATH_MAX];           /* the config file it came from */
    ModelSpec model;
    RunSpec run;
} Config;

/* Loads and validates path, then applies overrides ("train.steps=100", ...), in the sandbox (gen/sandbox.h).
   Every value is checked against its type and range, and the sizes derived from them against what the later
   stages store them in. On error: err says file, key and what was expected (exit code 2 at the command line). */
int  config_load(Config *cfg, const char *path, const char *const *overrides, int n_overrides, Err *err);
/* The model shape the config describes. */
GPT2Shape config_shape(const Config *cfg);

/* A Config of model m (validated already) run as run says, called name, from path (a checkpoint, for
   messages): the values derived and checked as config_load does. */
int  config_from_specs(Config *cfg, const char *name, const char *path, const ModelSpec *m, const RunSpec *run, Err *err);
/* The value of a tunable from the config, or dflt when the config does not set it. */
int  config_tunable(const Config *cfg, const char *family, const char *name, int dflt);
/* Writes the config, fully resolved with defaults, as Lua (for build/<name>/config.lua). */
void config_write_lua(const Config *cfg, FILE *f);
#endif
