/* config_write: the resolved config as Lua (build/<name>/config.lua): every key with its value, so that
   loading it gives the same Config and writing that again gives the same bytes. */
#include "gen/config.h"
#include "gen/config_schema.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A Lua string literal of s that reads back as the same bytes: quote and backslash escaped, control bytes as
   decimal escapes (three digits, so a digit after one cannot extend it); bytes >= 0x80 (UTF-8) stay as they are. */
static void write_lua_string(FILE *f, const char *s) {
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') { fputc('\\', f); fputc(*p, f); }
        else if (*p == '\n') fputs("\\n", f);
        else if (*p == '\t') fputs("\\t", f);
        else if (*p < 0x20 || *p == 0x7f) fprintf(f, "\\%03u", *p);
        else fputc(*p, f);
    }
    fputc('"', f);
}

/* A table key: the bare name where Lua allows one (an identifier that is not a keyword), else ["..."]. */
static void write_lua_key(FILE *f, const char *k) {
    static const char *const KEYWORDS[] = {"and", "break", "do", "else", "elseif", "end", "false", "for", "function",
        "goto", "if", "in", "local", "nil", "not", "or", "repeat", "return", "then", "true", "until", "while", NULL};
    int bare = (k[0] >= 'a' && k[0] <= 'z') || (k[0] >= 'A' && k[0] <= 'Z') || k[0] == '_';
    for (const char *p = k; bare && *p; p++)
        bare = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '_';
    for (int i = 0; bare && KEYWORDS[i]; i++) bare = strcmp(k, KEYWORDS[i]) != 0;
    if (bare) fputs(k, f);
    else { fputc('[', f); write_lua_string(f, k); fputc(']', f); }
}

/* The shortest %.Ng (N from 1 to 17; 17 always does) that reads back as the same double: 0.0006, not
   0.00059999999999999995. "-0" would read back as the integer 0, so it is written as a float. */
static void write_lua_number(FILE *f, double d) {
    if (d == 0 && signbit(d)) { fputs("-0.0", f); return; }
    char text[40];
    for (int digits = 1; digits <= 17; digits++) {
        snprintf(text, sizeof text, "%.*g", digits, d);
        if (strtod(text, NULL) == d) break;
    }
    fputs(text, f);
}

static void write_section(FILE *f, const Config *c, const Section *sec) {
    fprintf(f, "%s = {\n", sec->name);
    for (const Field *fl = sec->fields; fl->key; fl++) {
        const char *base = (const char *)c + fl->off;
        fprintf(f, "  %s = ", fl->key);
        switch (fl->kind) {
        case VAL_INT: fprintf(f, "%ld", fl->size == sizeof(int) ? (long)*(const int *)base : *(const long *)base); break;
        case VAL_NUM: write_lua_number(f, *(const double *)base); break;
        case VAL_STR: write_lua_string(f, base); break;
        case VAL_BOOL: fputs(*(const int *)base ? "true" : "false", f); break;
        case VAL_ENUM: write_lua_string(f, fl->choices[*(const int *)base]); break;
        }
        fprintf(f, ",\n");
    }
    fprintf(f, "}\n");
}

static int tunable_order(const void *a, const void *b) {
    const ConfigTunable *x = *(const ConfigTunable *const *)a, *y = *(const ConfigTunable *const *)b;
    int d = strcmp(x->family, y->family);
    return d ? d : strcmp(x->name, y->name);
}

/* One entry per family, holding all of its tunables: `family = { A = 1, B = {2, 3} }`. Lua keeps only the last
   of two entries with one key, so two tunables of a family must share one table. Families and tunables are
   sorted by name: the order the config's tables gave them in does not survive Lua (hash order), and the same
   config must give the same text. */
static void write_tune(FILE *f, const Config *c) {
    const ConfigTunable *order[CONFIG_MAX_TUNABLES];
    int n = c->run.n_tunables < CONFIG_MAX_TUNABLES ? c->run.n_tunables : CONFIG_MAX_TUNABLES;
    for (int i = 0; i < n; i++) order[i] = &c->run.tunables[i];
    qsort(order, (size_t)n, sizeof order[0], tunable_order);
    fprintf(f, "tune = {\n");
    for (int i = 0; i < n; i++) {
        const ConfigTunable *t = order[i];
        int first = i == 0 || strcmp(order[i - 1]->family, t->family) != 0;
        int last = i == n - 1 || strcmp(order[i + 1]->family, t->family) != 0;
        if (first) { fputs("  ", f); write_lua_key(f, t->family); fputs(" = { ", f); }
        write_lua_key(f, t->name);
        fputs(" = ", f);
        if (t->n_values == 1) fprintf(f, "%d", t->values[0]);
        else { fprintf(f, "{"); for (int j = 0; j < t->n_values; j++) fprintf(f, "%s%d", j ? ", " : "", t->values[j]); fprintf(f, "}"); }
        fputs(last ? " },\n" : ", ", f);
    }
    fprintf(f, "}\n");
}

/* The header names no source file: writing the config read back from this file gives this file again. */
void config_write_lua(const Config *c, FILE *f) {
    fprintf(f, "-- %s, resolved with every default (written by gpt2gen)\n", c->name);
    fputs("name = ", f); write_lua_string(f, c->name);
    fputs("\nprecision = ", f); write_lua_string(f, precision_name(c->model.precision));
    fputs("\nattention = ", f); write_lua_string(f, attention_name(c->run.attention));
    fputs("\n", f);
    if (c->run.arch[0]) { fputs("arch = ", f); write_lua_string(f, c->run.arch); fputs("\n", f); }
    for (const Section *s = SECTIONS; s->name; s++) write_section(f, c, s);
    write_tune(f, c);
}
