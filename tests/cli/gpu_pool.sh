#!/bin/sh
# The GPU suite's job runner (tests/gpu/pool.sh, which tests/gpu.sh = `make test-gpu` uses) with stand-in jobs,
# no GPU needed: jobs run in parallel up to the job limit and the memory budget, the "alone" ones with nothing
# beside them and after the parallel ones (the parallel ones with GPT2GEN_GPU_SHARED=1, the alone ones with 0); each job's counts are added up; a job that crashes, exits non-zero,
# or runs past its time limit fails; one that ran out of GPU memory beside others runs again alone (and, in a part
# that says so, counts as a skip when it does not fit alone either); the deadline stops the rest.
. "$(dirname "$0")/../lib.sh"
scratch own-cache
cd "$ROOT" || exit 1

# runs the pool with the jobs that $1 (a file of pool_add lines) adds, in a child shell: its output in $WORK/out,
# its rows in $WORK/rows, its counts in the last line of out ("COUNTS p f s")
pool() {
    rm -rf "$WORK/logs" "$WORK/live" "$WORK/trace"; mkdir -p "$WORK/live"; : > "$WORK/rows"; : > "$WORK/trace"
    (
        unset OMP_NUM_THREADS
        w=$WORK
        . tests/lib.sh   # the pool's own counts (and an empty WORK)
        WORK=$w
        . tests/gpu/pool.sh
        pool_row() { echo "$*" >> "$WORK/rows"; }
        POOL_JOBS=${JOBS:-3}; POOL_GIB=${GIB:-100}; POOL_TIMEOUT=${TMO:-30}; POOL_DEADLINE=${DEADLINE:-0}; POOL_OMP=2
        pool_init "$WORK/logs"
        . "$1"
        pool_run
        echo "COUNTS $PASSED $FAILED $SKIPPED"
    ) > "$WORK/out" 2>&1
}
# a stand-in job: NAME SECONDS LINES...: notes its start (with the jobs running beside it) and end in the trace,
# sleeps, then prints LINES (\n between them)
cat > "$WORK/job.sh" <<'EOF'
n=$1; s=$2; shift 2
beside=$(ls "$WORK/live" | xargs)
echo "start $n [$beside] omp=${OMP_NUM_THREADS:-} shared=${GPT2GEN_GPU_SHARED:-}" >> "$WORK/trace"
touch "$WORK/live/$n"
sleep "$s"
rm -f "$WORK/live/$n"
echo "end $n" >> "$WORK/trace"
printf "$*\n"
EOF
export WORK
J="sh $WORK/job.sh"

# 1: five parallel jobs of 1 s, three at a time, and an alone job; counts and rows
cat > "$WORK/jobs1" <<EOF
for i in 1 2 3 4 5; do pool_add p1 par\$i par 10 1 "$J par\$i 1 'ok   a\$i\nRESULT 1 0 0'"; done
pool_add p1 solo alone 10 5 "$J solo 1 'ok   s\nskip t: why\nRESULT 1 0 1'"
EOF
t0=$(date +%s); pool "$WORK/jobs1"; dt=$(( $(date +%s) - t0 ))
most=$(awk '/^start par/ { n = gsub(/par[0-9]/, "&") } n > m { m = n } END { print m }' "$WORK/trace")
if tail -1 "$WORK/out" | grep -qx 'COUNTS 6 0 1' && [ "$(wc -l < "$WORK/rows")" -eq 6 ] && [ "$most" -eq 3 ] && [ $dt -le 8 ] \
   && grep -q '^start solo \[\] omp= shared=0$' "$WORK/trace" && [ "$(tail -1 "$WORK/trace")" = "end solo" ] \
   && grep -q 'start par1 .*omp=2 shared=1$' "$WORK/trace" && grep -q '^ok   a3$' "$WORK/out" && [ -f "$WORK/logs/p1/par5.log" ]
then ok parallel_then_alone "$dt s, at most $most at once"
else fail parallel_then_alone "$dt s, at most $most at once: $(tr '\n' '|' < "$WORK/trace") $(tail -3 "$WORK/out")"; fi

# 2: the memory budget: jobs of 60 and 50 GiB in 100 never run together; a 10 GiB one fills in beside either
cat > "$WORK/jobs2" <<EOF
pool_add p2 big par 60 9 "$J big 1 'RESULT 1 0 0'"
pool_add p2 mid par 50 8 "$J mid 1 'RESULT 1 0 0'"
pool_add p2 small par 10 1 "$J small 1 'RESULT 1 0 0'"
EOF
pool "$WORK/jobs2"
if grep -q '^start mid \[\]' "$WORK/trace" && grep -q '^start small \[big\]' "$WORK/trace" && tail -1 "$WORK/out" | grep -qx 'COUNTS 3 0 0'
then ok memory_budget; else fail memory_budget "$(tr '\n' '|' < "$WORK/trace")"; fi

# 3: failures: a FAIL line, a crash (no RESULT line), a non-zero exit with nothing failed, a job past its time
cat > "$WORK/jobs3" <<EOF
pool_add p3 failing par 0 1 "$J failing 0 'ok   x\nFAIL y: wrong\nRESULT 1 1 0'; exit 1"
pool_add p3 crash par 0 1 "$J crash 0 'ok   x'; kill -SEGV \\\$\\\$"
pool_add p3 exit3 par 0 1 "$J exit3 0 'RESULT 2 0 0'; exit 3"
pool_add p3 slow par 0 1 "echo 'ok   early'; sleep 30"
EOF
TMO=2 pool "$WORK/jobs3"
if tail -1 "$WORK/out" | grep -qx 'COUNTS 4 4 0' && grep -q '^FAIL crash: crashed or printed no RESULT line' "$WORK/out" \
   && grep -q '^FAIL exit3: exit code 3' "$WORK/out" && grep -q '^FAIL slow: stopped after 2 s' "$WORK/out" && grep -q '^FAIL y: wrong' "$WORK/out"
then ok failures_counted; else fail failures_counted "$(grep -E '^(FAIL|COUNTS)' "$WORK/out" | tr '\n' '|')"; fi

# 4: out of GPU memory beside others: again alone at the end, counted once; a config that does not fit alone either
#    is a skip where its part says so, a failure elsewhere
cat > "$WORK/jobs4" <<EOF
pool_oom_is_skip p4c
pool_add p4 oomonce par 0 2 "if [ -f $WORK/oomed ]; then $J oomonce 0 'ok   fine\nRESULT 1 0 0'; else touch $WORK/oomed; $J oomonce 0 'gpt2gen: out of GPU memory: x\nRESULT 0 1 0'; exit 1; fi"
pool_add p4 other par 0 1 "$J other 2 'RESULT 1 0 0'"
pool_add p4c never par 0 1 "$J never 0 'CUDA_ERROR_OUT_OF_MEMORY: out of memory'; exit 1"
pool_add p4 neverp par 0 1 "$J neverp 0 'out of memory'; exit 1"
EOF
rm -f "$WORK/oomed"; pool "$WORK/jobs4"
again=$(awk '/^end other/ { e = NR } /^start oomonce \[\]/ { s = NR } END { print (s > e && e > 0) ? "after" : "before" }' "$WORK/trace")
if tail -1 "$WORK/out" | grep -qx 'COUNTS 2 1 1' && [ "$again" = after ] && grep -q '^ok   fine' "$WORK/out" \
   && grep -q '^skip never: does not fit' "$WORK/out" && grep -q '^FAIL neverp: crashed' "$WORK/out" && [ -f "$WORK/logs/p4/oomonce.beside.log" ]
then ok out_of_memory_again_alone; else fail out_of_memory_again_alone "$(tr '\n' '|' < "$WORK/trace") $(grep -E '^(ok|FAIL|skip|COUNTS|==)' "$WORK/out" | tr '\n' '|')"; fi

# 5: the deadline: a running job is stopped at it, a job not yet started is a skip
cat > "$WORK/jobs5" <<EOF
pool_add p5 long par 0 9 "echo 'ok   a'; sleep 60"
pool_add p5 later par 0 1 "$J later 0 'RESULT 1 0 0'"
EOF
t0=$(date +%s); JOBS=1 DEADLINE=3 POOL_DEADLINE_MARGIN=1 pool "$WORK/jobs5"; dt=$(( $(date +%s) - t0 ))
if [ $dt -le 10 ] && tail -1 "$WORK/out" | grep -qx 'COUNTS 1 1 1' && grep -q '^skip later: not started' "$WORK/out"
then ok deadline "$dt s"; else fail deadline "$dt s: $(grep -E '^(ok|FAIL|skip|COUNTS)' "$WORK/out" | tr '\n' '|')"; fi

# 6: tests/gpu.sh on a machine without a GPU: one skip that says so, exit code 0
if ! nvidia-smi -L >/dev/null 2>&1; then
    out=$(sh tests/gpu.sh 2>&1); rc=$?
    if [ $rc -eq 0 ] && printf '%s\n' "$out" | grep -q '^skip gpu_suite: no GPU here' && printf '%s\n' "$out" | grep -qx '0 passed, 0 failed, 1 skipped'
    then ok no_gpu_skips; else fail no_gpu_skips "rc $rc: $out"; fi
fi
finish
