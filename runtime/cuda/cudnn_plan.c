/* cudnn_plan: a graph of cuDNN's composite attention (runtime/cuda/cudnn_graph.c) finalized into its execution
   plan: the engine configs cuDNN's heuristics offer, tried in turn (GPT2GEN_CUDNN_DEBUG=1 prints each). */
#include "runtime/cuda/cudnn_internal.h"
#include <cudnn_graph.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- execution plans ---- */

/* 1 if the engine of cfg carries the NONDETERMINISTIC numerical note; also its global index */
static int engine_nondeterministic(const CudnnLib *L, cudnnBackendDescriptor_t cfg, int64_t *index) {
    cudnnBackendDescriptor_t eng = NULL;
    int nondet = 0;
    *index = -1;
    if (L->cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINE_DESCRIPTOR, &eng) != CUDNN_STATUS_SUCCESS) return 0;
    int64_t n = 0;
    if (L->cudnnBackendGetAttribute(cfg, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n, &eng) ==
        CUDNN_STATUS_SUCCESS) {
        cudnnBackendNumericalNote_t notes[CUDNN_NUMERICAL_NOTE_TYPE_COUNT + 8];
        L->cudnnBackendGetAttribute(eng, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &n, index);
        if (L->cudnnBackendGetAttribute(eng, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE,
                                        (int64_t)(sizeof notes / sizeof notes[0]), &n, notes) == CUDNN_STATUS_SUCCESS)
            for (int64_t i = 0; i < n && i < (int64_t)(sizeof notes / sizeof notes[0]); i++)
                if (notes[i] == CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC) nondet = 1;
    }
    L->cudnnBackendDestroyDescriptor(eng);
    return nondet;
}

/* The engine configs cuDNN's heuristics of mode mi (0: A, 1: FALLBACK) offer for the operation graph og, at most
   64, into cfgs and *got. 1 where the heuristics failed (last says why), -1 where an engine config's descriptor
   failed (g->failed), -2 where the heuristics' own did. */
static int heuristic_configs(Graph *g, cudnnBackendDescriptor_t og, int mi, cudnnBackendDescriptor_t cfgs[64],
                             int64_t *got, int debug, char *last, size_t last_n) {
    const CudnnLib *L = g->L;
    const cudnnBackendHeurMode_t modes[2] = {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK};
    *got = 0;
    cudnnBackendDescriptor_t heur = g_new(g, CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, "the engine heuristics");
    if (!heur) return -2;
    cudnnStatus_t st = L->cudnnBackendSetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH,
                                                   CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &og);
    if (st == CUDNN_STATUS_SUCCESS)
        st = L->cudnnBackendSetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &modes[mi]);
    if (st == CUDNN_STATUS_SUCCESS) st = L->cudnnBackendFinalize(heur);
    int64_t count = 0;
    if (st == CUDNN_STATUS_SUCCESS)
        st = L->cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0,
                                         &count, NULL);
    if (st != CUDNN_STATUS_SUCCESS) {
        char text[400];
        cudnn_status_text(L, st, text, sizeof text);
        snprintf(last, last_n, "heuristics mode %s: %s", mi ? "FALLBACK" : "A", text);
        if (debug) fprintf(stderr, "cudnn_attention: %s graph: %s\n", g->name, last);
        return 1;
    }
    if (count > 64) count = 64;
    for (int64_t i = 0; i < count; i++) cfgs[i] = g_new(g, CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, "an engine config");
    if (g->failed[0]) return -1;
    if (count > 0)
        st = L->cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, count,
                                         got, cfgs);
    if (debug) fprintf(stderr, "cudnn_attention: %s graph: heuristics mode %s: %lld engine config(s)\n", g->name,
                       mi ? "FALLBACK" : "A", (long long)*got);
    if (st != CUDNN_STATUS_SUCCESS) *got = 0;
    return 0;
}

/* The execution plan of engine config cfg (engine index, non-deterministic or not) finalized and kept in g: 0, else
   -1 with last saying why. */
static int try_engine(Graph *g, cudnnHandle_t handle, cudnnBackendDescriptor_t cfg, int64_t index, int nondet,
                      int debug, char *last, size_t last_n) {
    const CudnnLib *L = g->L;
    cudnnBackendDescriptor_t plan = NULL;
    cudnnStatus_t st = L->cudnnBackendCreateDescriptor(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, &plan);
    if (st == CUDNN_STATUS_SUCCESS) {
        L->cudnnBackendSetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle);
        st = L->cudnnBackendSetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG,
                                         CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &cfg);
    }
    if (st == CUDNN_STATUS_SUCCESS) st = L->cudnnBackendFinalize(plan);
    int64_t ws = 0, n = 0;
    if (st == CUDNN_STATUS_SUCCESS)
        st = L->cudnnBackendGetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64,
                                         1, &n, &ws);
    if (st == CUDNN_STATUS_SUCCESS) {
        if (debug) fprintf(stderr, "cudnn_attention: %s graph: engine %lld%s finalized, workspace %lld bytes\n",
                           g->name, (long long)index, nondet ? " (non-deterministic)" : "", (long long)ws);
        g->plan = plan;
        g->workspace = ws;
        g->nondeterministic = nondet;
        g_keep(g, plan);
        return 0;
    }
    char text[400];
    cudnn_status_text(L, st, text, sizeof text);
    snprintf(last, last_n, "engine %lld: %s", (long long)index, text);
    if (debug) fprintf(stderr, "cudnn_attention: %s graph: %s\n", g->name, last);
    if (plan) L->cudnnBackendDestroyDescriptor(plan);
    return -1;
}

int cudnn_make_plan(Graph *g, cudnnHandle_t handle, int prefer_deterministic, int debug, char *why, size_t why_n) {
    const CudnnLib *L = g->L;
    if (g->failed[0]) { snprintf(why, why_n, "building the %s graph: %s", g->name, g->failed); return -1; }
    cudnnBackendDescriptor_t og = g_new(g, CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, "the operation graph");
    if (og) L->cudnnBackendSetAttribute(og, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle);
    g_set(g, og, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, g->n_ops, g->ops, "the operation graph");
    g_finalize(g, og, "the operation graph");
    if (g->failed[0]) { snprintf(why, why_n, "building the %s graph: %s", g->name, g->failed); return -1; }

    char last[512] = "the heuristics returned no engine config";
    int tried = 0;
    for (int mi = 0; mi < 2; mi++) {
        cudnnBackendDescriptor_t cfgs[64];
        int64_t got;
        int rc = heuristic_configs(g, og, mi, cfgs, &got, debug, last, sizeof last);
        if (rc == -2) break;
        if (rc < 0) { snprintf(why, why_n, "the %s graph: %s", g->name, g->failed); return -1; }
        if (rc > 0) continue;
        /* pass 0 takes deterministic engines only, pass 1 the rest */
        for (int pass = prefer_deterministic ? 0 : 1; pass < 2; pass++)
            for (int64_t i = 0; i < got; i++) {
                int64_t index;
                const int nondet = engine_nondeterministic(L, cfgs[i], &index);
                if (pass == 0 && nondet) continue;
                if (pass == 1 && prefer_deterministic && !nondet) continue;
                tried++;
                if (!try_engine(g, handle, cfgs[i], index, nondet, debug, last, sizeof last)) return 0;
            }
    }
    snprintf(why, why_n, "no engine config finalized for the %s graph (%d tried; last: %s)", g->name, tried, last);
    return -1;
}
