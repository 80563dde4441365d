# tests/gpu/pool.sh: the job runner of tests/gpu.sh (sourced after tests/lib.sh, whose tally and counts it uses).
# A job is one test program or script, its output in its own log. Jobs run as parallel processes on the one GPU,
# at most POOL_JOBS at a time and at most POOL_GIB of their estimated GPU memory together; then the jobs that must
# run alone (a timing, or a check of the GPU's free memory, that other processes would disturb), one at a time with
# nothing beside them; then, alone too, the parallel jobs that ran out of GPU memory beside others.
#
#   pool_init DIR            logs under DIR/<part>/<name>.log; POOL_JOBS, POOL_GIB, POOL_TIMEOUT, POOL_DEADLINE
#                            (seconds from pool_init at which running jobs are stopped, and no job starts in the
#                            POOL_DEADLINE_MARGIN seconds, default 10, before it; 0: no deadline)
#   pool_add PART NAME MODE GIB SECONDS CMD
#                            MODE par or alone; GIB its GPU memory at its peak (an estimate; 0: none); SECONDS how
#                            long it takes on its own (an estimate: the longest start first); CMD for sh -c
#   pool_run                 runs them all, printing each job's result lines as it ends; then a summary row per
#                            job, in the order they were added (pool_row, which the caller defines: NAME OK FAIL
#                            SKIP SECONDS NOTE)
#   pool_parts_report        the wall time of each part (its first start to its last end) and its jobs' time
# A job ends as a failure when it prints no "RESULT p f s" line, exits non-zero with no failure counted, or runs
# past its time (POOL_TIMEOUT seconds, default 450); a job whose log says it ran out of GPU memory, and that
# failed beside others, runs again alone (its first log kept as NAME.beside.log); alone, it is counted as it ends
# ("does not fit": a skip, where the part says so with pool_oom_is_skip PART).

POOL_SPEC="part name mode gib secs"
pool_init() {
    POOL_LOGS=$1
    POOL_DIR=$(mktemp -d "${TMPDIR:-/tmp}/gpt2gen-gpu-pool.XXXXXX") || { echo "cannot make the pool's folder" >&2; exit 1; }
    : > "$POOL_DIR/queue"
    POOL_N=0
    POOL_T0=$(date +%s)
    POOL_OOM_SKIP=" "
    POOL_RUNNING=""
    POOL_TIMEOUT=${POOL_TIMEOUT:-450}
    POOL_DEADLINE=${POOL_DEADLINE:-0}
    command -v timeout >/dev/null 2>&1 && POOL_HAVE_TIMEOUT=1 || POOL_HAVE_TIMEOUT=""
    trap 'pool_stop_all; exit 130' INT TERM
}
pool_oom_is_skip() { POOL_OOM_SKIP="$POOL_OOM_SKIP$1 "; }

pool_add() {
    POOL_N=$((POOL_N + 1))
    printf '%s\n' "$6" > "$POOL_DIR/$POOL_N.cmd"
    echo "$POOL_N $1 $2 $3 $4 $5" >> "$POOL_DIR/queue"
}

# field F ($POOL_SPEC order) of job ID
pool_field() { awk -v id="$1" -v f="$2" '$1 == id { print $(f + 1) }' "$POOL_DIR/queue"; }
pool_now() { echo $(( $(date +%s) - POOL_T0 )); }

# starts job ID in the background; ALONE=1: without the parallel jobs' OMP_NUM_THREADS and GPT2GEN_GPU_SHARED (a
# parallel job's GPU tests leave out the GPU's free memory, which the others change: docs/environment.md)
pool_start() {
    jid=$1
    set -- $(awk -v id="$jid" '$1 == id' "$POOL_DIR/queue")
    part=$2; name=$3; t=$POOL_TIMEOUT
    if [ "$POOL_DEADLINE" -gt 0 ]; then left=$((POOL_DEADLINE - $(pool_now))); [ "$left" -lt "$t" ] && t=$left; fi
    mkdir -p "$POOL_LOGS/$part"
    log="$POOL_LOGS/$part/$name.log"
    echo "$t" > "$POOL_DIR/$jid.limit"
    date +%s > "$POOL_DIR/$jid.t0"
    rm -f "$POOL_DIR/$jid.rc"
    omp=${POOL_OMP:-}
    [ "$POOL_ALONE" = 1 ] && omp=""
    shared=1
    [ "$POOL_ALONE" = 1 ] && shared=0
    (
        [ -n "$omp" ] && [ -z "$OMP_NUM_THREADS" ] && export OMP_NUM_THREADS="$omp"
        export GPT2GEN_GPU_SHARED=$shared
        if [ -n "$POOL_HAVE_TIMEOUT" ]; then
            # the timeout's pid is its process group's (timeout makes one): pool_stop_all stops the whole job
            sh -c 'echo $$ > "$1"; shift; exec timeout -k 10 "$@"' sh "$POOL_DIR/$jid.pid" "$t" sh -c "$(cat "$POOL_DIR/$jid.cmd")"
        else
            sh -c 'echo $$ > "$1"; shift; exec "$@"' sh "$POOL_DIR/$jid.pid" sh -c "$(cat "$POOL_DIR/$jid.cmd")"
        fi > "$log" 2>&1 < /dev/null
        echo $? > "$POOL_DIR/$jid.rc.tmp"; mv "$POOL_DIR/$jid.rc.tmp" "$POOL_DIR/$jid.rc"
    ) &
    echo $! > "$POOL_DIR/$jid.sub"
    POOL_RUNNING="$POOL_RUNNING $jid"
    pool_first "$part"
}

pool_stop_all() {
    for sid in $POOL_RUNNING; do
        p=$(cat "$POOL_DIR/$sid.pid" 2>/dev/null)
        [ -n "$p" ] && { kill -TERM -- "-$p" 2>/dev/null || kill -TERM "$p" 2>/dev/null; }
    done
}

# the part's first start and last end, and its jobs' seconds: POOL_P_<part>_t0, _t1, _sum
pool_first() { eval "[ -n \"\$POOL_P_$1_t0\" ] || POOL_P_$1_t0=\$(date +%s)"; }
pool_last() {
    eval "POOL_P_$1_t1=\$(date +%s); POOL_P_$1_sum=\$(( \${POOL_P_$1_sum:-0} + $2 )); POOL_P_$1_n=\$(( \${POOL_P_$1_n:-0} + 1 ))"
    case " $POOL_PARTS_SEEN " in *" $1 "*) ;; *) POOL_PARTS_SEEN="$POOL_PARTS_SEEN $1" ;; esac
}

# the job IDs still running, less those that ended; each ended one reported (pool_done)
pool_reap() {
    still=""
    for rid in $POOL_RUNNING; do
        if [ -f "$POOL_DIR/$rid.rc" ]; then wait "$(cat "$POOL_DIR/$rid.sub")" 2>/dev/null; pool_done "$rid"
        else still="$still $rid"; fi
    done
    POOL_RUNNING=$still
}

pool_gib_running() {
    gsum=0
    for gid in $POOL_RUNNING; do gsum=$((gsum + $(pool_field "$gid" 4))); done
    echo $gsum
}

# job ID ended: its counts added up (tally), its result lines printed, its row written; or queued to run alone
pool_done() {
    did=$1
    set -- $(awk -v id="$did" '$1 == id' "$POOL_DIR/queue")
    part=$2; name=$3; mode=$4
    rc=$(cat "$POOL_DIR/$did.rc"); limit=$(cat "$POOL_DIR/$did.limit")
    dt=$(( $(date +%s) - $(cat "$POOL_DIR/$did.t0") ))
    log="$POOL_LOGS/$part/$name.log"
    pool_last "$part" "$dt"
    oom=""
    grep -Eqi 'out of (GPU )?memory' "$log" && oom=1
    bad=""
    { [ "$rc" -ne 0 ] || grep -q '^FAIL' "$log" || ! grep -q '^RESULT ' "$log"; } && bad=1
    if [ -n "$oom" ] && [ -n "$bad" ] && [ "$mode" = par ]; then
        mv "$log" "$POOL_LOGS/$part/$name.beside.log"
        echo "== $part/$name ($dt s): out of GPU memory beside other jobs; runs again alone at the end"
        echo "$did" >> "$POOL_DIR/again"
        return
    fi
    if [ -n "$oom" ] && [ -n "$bad" ] && case "$POOL_OOM_SKIP" in *" $part "*) true ;; *) false ;; esac; then
        echo "== $part/$name ($dt s, $log)"
        skip "$name" "does not fit this GPU's memory, run alone (see $log)"
        pool_keep_row "$did" "$name" 0 0 1 "$dt" "does not fit"
        return
    fi
    if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then   # timeout's: the lines it printed count, and one failure
        echo "== $part/$name ($dt s, $log)"
        grep -E '^(ok|FAIL|skip) ' "$log"
        TALLY_P=$(grep -c '^ok ' "$log"); TALLY_F=$(grep -c '^FAIL' "$log"); TALLY_S=$(grep -c '^skip ' "$log")
        PASSED=$((PASSED + TALLY_P)); FAILED=$((FAILED + TALLY_F)); SKIPPED=$((SKIPPED + TALLY_S))
        TALLY_NOTE="stopped after $limit s (its time limit: POOL_TIMEOUT or the deadline)"
        fail "$name" "$TALLY_NOTE (see $log)"
        TALLY_F=$((TALLY_F + 1))
    else
        echo "== $part/$name ($dt s, $log)"
        grep -E '^(ok|FAIL|skip) ' "$log"
        tally "$name" "$log" "$rc"
    fi
    pool_keep_row "$did" "$name" "$TALLY_P" "$TALLY_F" "$TALLY_S" "$dt" "$TALLY_NOTE"
}

# a job's row, kept until pool_run writes them all (pool_row) in the order the jobs were added
pool_keep_row() { printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$@" >> "$POOL_DIR/rows"; }

# the queue's jobs of MODE, the longest (by its estimate) first
pool_ids() { awk -v m="$1" '$4 == m { print $6, $1 }' "$POOL_DIR/queue" | sort -rn -s -k1,1 | awk '{ print $2 }'; }

pool_not_started() {   # ID: counted as a skip, the deadline having passed
    set -- $(awk -v id="$1" '$1 == id' "$POOL_DIR/queue")
    skip "$3" "not started: POOL_DEADLINE ($POOL_DEADLINE s) reached"
    pool_keep_row "$1" "$3" 0 0 1 0 "not started (deadline)"
}
pool_past_deadline() { [ "$POOL_DEADLINE" -gt 0 ] && [ $((POOL_DEADLINE - $(pool_now))) -le "${POOL_DEADLINE_MARGIN:-10}" ]; }

pool_run() {
    waiting=$(pool_ids par)
    while [ -n "$waiting" ] || [ -n "$POOL_RUNNING" ]; do
        pool_reap
        rest=""
        for wid in $waiting; do
            n=$(echo $POOL_RUNNING | wc -w)
            if pool_past_deadline; then pool_not_started "$wid"; continue; fi
            g=$(pool_field "$wid" 4)
            if [ "$n" -lt "$POOL_JOBS" ] && { [ "$n" -eq 0 ] || [ $(( $(pool_gib_running) + g )) -le "$POOL_GIB" ]; }; then
                POOL_ALONE=0; pool_start "$wid"
            else rest="$rest $wid"; fi
        done
        waiting=$rest
        [ -n "$POOL_RUNNING" ] && sleep 0.5
    done
    for aid in $(pool_ids alone) $(cat "$POOL_DIR/again" 2>/dev/null); do
        if pool_past_deadline; then pool_not_started "$aid"; continue; fi
        # a job of the retry list runs as one of mode alone now
        awk -v id="$aid" '$1 == id { $4 = "alone" } { print }' "$POOL_DIR/queue" > "$POOL_DIR/queue.new" && mv "$POOL_DIR/queue.new" "$POOL_DIR/queue"
        POOL_ALONE=1; pool_start "$aid"
        while [ -n "$POOL_RUNNING" ]; do sleep 0.5; pool_reap; done
    done
    sort -n -k1,1 "$POOL_DIR/rows" 2>/dev/null | while IFS="$(printf '\t')" read -r rid name p f s dt note; do
        pool_row "$name" "$p" "$f" "$s" "$dt" "$note"
    done
    rm -rf "$POOL_DIR"
    trap - INT TERM
}

pool_parts_report() {
    for p in $POOL_PARTS_SEEN; do
        eval "t0=\$POOL_P_${p}_t0; t1=\$POOL_P_${p}_t1; sum=\$POOL_P_${p}_sum; n=\$POOL_P_${p}_n"
        echo "part $p: $n jobs, wall $((t1 - t0)) s (its first start to its last end; the parts overlap), $sum s of job time"
    done
}
