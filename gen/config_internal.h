/* config_internal: private to gen/config*.c (gen/config.h is the interface): the two steps of config_load
   (gen/config.c), each in its own file. */
#ifndef GPT2GEN_CONFIG_INTERNAL_H
#define GPT2GEN_CONFIG_INTERNAL_H
#include "gen/config.h"
#include <lua.h>

/* gen/config_read.c: the sandbox's reader (gen/sandbox.h): the table of everything the config assigned, at the
   stack top, into the Config ud (whose path is set), every value checked against the schema. */
int config_read(lua_State *L, void *ud, Err *err);
/* gen/config_validate.c: the checks across fields, and the values derived from them, once every value is read. */
int config_validate(Config *c, Err *err);
#endif
