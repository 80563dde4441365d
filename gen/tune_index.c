/* tune_index: the tuning database's index (tune_db.h): each record by a hash of its entry, so that loading,
   adding and finding a record take constant time, and a rewrite finds the records newer ones supersede. */
#include "gen/tune_db.h"
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define ALL_KEY_FIELDS ((1u << TUNE_KEY_FIELDS) - 1)
/* what makes a record superseded by a newer one: the same GPU, arch, shape and precision (other driver, library
   versions or template: the newer is what this machine runs now) */
#define LINEAGE_FIELDS (1u << 0 | 1u << 1 | 1u << 7 | 1u << 8)

static uint64_t mix(uint64_t h, const char *s) {   /* FNV-1a, with the string's end */
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 0x100000001b3ULL;
    return (h ^ 0xff) * 0x100000001b3ULL;
}

/* an entry: best records are one per what, name and key (whatever the variant), measure records one per variant */
static int is_best(const TuneRecord *r) { return !strcmp(r->record, "best"); }

static uint64_t hash_of(const TuneRecord *r, unsigned fields) {
    uint64_t h = mix(mix(mix(0xcbf29ce484222325ULL, r->record), r->what), r->name);
    if (!is_best(r)) h = mix(h, r->variant);
    for (int i = 0; i < TUNE_KEY_FIELDS; i++)
        if (fields >> i & 1) h = mix(h, r->key.f[i]);
    return h;
}

static int same_in(const TuneRecord *a, const TuneRecord *b, unsigned fields) {
    if (strcmp(a->record, b->record) || strcmp(a->what, b->what) || strcmp(a->name, b->name)) return 0;
    if (!is_best(a) && strcmp(a->variant, b->variant)) return 0;
    for (int i = 0; i < TUNE_KEY_FIELDS; i++)
        if ((fields >> i & 1) && strcmp(a->key.f[i], b->key.f[i])) return 0;
    return 1;
}

/* the slot (open addressing, nslot a power of two, at most half full) holding the record of all that is the same
   as r in fields, or the empty slot where it would go; slots hold an index + 1 */
static int *slot_of(int *slot, int nslot, const TuneRecord *all, const TuneRecord *r, unsigned fields) {
    size_t mask = (size_t)nslot - 1, at = (size_t)hash_of(r, fields) & mask;
    while (slot[at] && !same_in(&all[slot[at] - 1], r, fields)) at = (at + 1) & mask;
    return &slot[at];
}

static int slots_for(int n) {
    int nslot = 64;
    while (nslot < 2 * n + 2) nslot *= 2;
    return nslot;
}

void tune_db_put(TuneDb *db, const TuneRecord *r) {
    if (2 * (db->n + 1) > db->nslot) {
        free(db->slot);
        db->nslot = slots_for(2 * db->n);
        db->slot = xcalloc((size_t)db->nslot, sizeof *db->slot);
        for (int i = 0; i < db->n; i++) *slot_of(db->slot, db->nslot, db->r, &db->r[i], ALL_KEY_FIELDS) = i + 1;
    }
    int *s = slot_of(db->slot, db->nslot, db->r, r, ALL_KEY_FIELDS);
    if (*s) { db->r[*s - 1] = *r; db->r[*s - 1].order = ++db->puts; return; }
    if (db->n == db->cap) {
        db->cap = db->cap ? 2 * db->cap : 64;
        TuneRecord *grown = xmalloc((size_t)db->cap * sizeof *grown);
        if (db->n) memcpy(grown, db->r, (size_t)db->n * sizeof *grown);
        free(db->r);
        db->r = grown;
    }
    db->r[db->n] = *r;
    db->r[db->n].order = ++db->puts;
    *s = ++db->n;
}

const TuneRecord *tune_db_lookup(const TuneDb *db, const TuneRecord *want) {
    if (!db->nslot) return NULL;
    int s = *slot_of(db->slot, db->nslot, db->r, want, ALL_KEY_FIELDS);
    return s ? &db->r[s - 1] : NULL;
}

unsigned char *tune_db_newest(const TuneDb *db) {
    int nslot = slots_for(db->n), *slot = xcalloc((size_t)nslot, sizeof *slot);
    unsigned char *keep = xcalloc((size_t)db->n + 1, 1);
    for (int i = 0; i < db->n; i++) {   /* each lineage's slot ends on its newest record */
        int *s = slot_of(slot, nslot, db->r, &db->r[i], LINEAGE_FIELDS);
        if (!*s || db->r[i].order > db->r[*s - 1].order) *s = i + 1;
    }
    for (int i = 0; i < db->n; i++) keep[i] = *slot_of(slot, nslot, db->r, &db->r[i], LINEAGE_FIELDS) == i + 1;
    free(slot);
    return keep;
}
