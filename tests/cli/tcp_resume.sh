#!/bin/sh
# Checkpoints without a shared file system: 2 CPU ranks started by hand as torchrun starts them, over TCP on
# 127.0.0.1, each with its own checkpoint.dir, under ZeRO-1 (runtime/train/train_checkpoint.c, resume_ranks.c).
# Rank 0 gets rank 1's master weights over the ranks' connection, not from rank 1's folder, so the model file is the
# one the ranks emulated in one process (one folder) write, byte for byte, as are the state parts; a resume where
# each rank reads only its own folder continues to the bits of the run that never stopped (and of `--gpus 2
# --backend cpu`); a rank 1 that lacks its part of the newest step makes rank 0 pass over that step, naming rank 1;
# one that lacks every part stops both ranks with the message naming rank 1; a ZeRO-0 checkpoint, all in rank 0's
# folder, resumes as ZeRO-1 with nothing in rank 1's; and so does a model of another architecture, whose record every
# rank reads from rank 0's header. Loopback only; every wait is bounded.
. "$(dirname "$0")/../lib.sh"
. "$ROOT/tests/train_env.sh"
export OMP_NUM_THREADS=1   # 2 processes on a few cores
M="$M --set train.batch_size=2 --set train.total_batch_size=128 --set train.steps=8 --set checkpoint.every=4"
M="$M --set eval.val_every=4 --set eval.val_batches=2"
vals() { grep -o '"loss":[-0-9.e]*\|"norm":[-0-9.e]*\|"val_loss":[-0-9.e]*' "$1" | cut -d: -f2; }
. "$ROOT/tests/tcp_env.sh"
# pair NAME [options]: ranks 0 and 1 into $WORK/NAME-r0 and $WORK/NAME-r1 (logs NAME-0.log, NAME-1.log); RC0, RC1
pair() {
    name=$1; shift
    PORT=$(free_port)
    rank 0 2 "$WORK/$name-0.log" -- "$@" --set checkpoint.dir="$WORK/$name-r0" & p0=$!
    rank 1 2 "$WORK/$name-1.log" -- "$@" --set checkpoint.dir="$WORK/$name-r1" & p1=$!
    wait $p0; RC0=$?; wait $p1; RC1=$?
}
logs() { cat "$WORK/$1-0.log" "$WORK/$1-1.log"; }
# same_step8 NAME REF: the model and both state parts of step 8 are REF's (a folder of the emulation) byte for byte
same_step8() {
    cmp -s "$WORK/$1-r0/model_00000008.bin" "$2/model_00000008.bin" && cmp -s "$WORK/$1-r0/state_00000008.bin" "$2/state_00000008.bin" \
        && cmp -s "$WORK/$1-r1/state_00000008.r1.bin" "$2/state_00000008.r1.bin" && [ -f "$WORK/$1-r0/done_00000008.bin" ]
}

# the reference: the ranks emulated in one process, one folder (ZeRO-1, the default with several ranks)
"$GPT2GEN" train $M --backend cpu -q --gpus 2 --set checkpoint.dir="$WORK/emu" > "$WORK/emu.log" 2>&1
vals "$WORK/emu/metrics.jsonl" > "$WORK/emu.txt"

# save: every file of the emulation's, each in its rank's folder; nothing of rank 1's in rank 0's, nor the reverse
pair s --set train.zero_stage=1
vals "$WORK/s-r0/metrics.jsonl" > "$WORK/s.txt"
if [ $RC0 -eq 0 ] && [ $RC1 -eq 0 ] && [ "$(wc -l < "$WORK/s.txt")" -eq 19 ] && cmp -s "$WORK/emu.txt" "$WORK/s.txt" && same_step8 s "$WORK/emu" \
   && [ -z "$(ls "$WORK/s-r0" | grep '\.r1\.bin')" ] && [ "$(ls "$WORK/s-r1")" = "$(printf 'state_00000004.r1.bin\nstate_00000008.r1.bin')" ]; then
    ok zero1_separate_folders_save "model_00000008.bin equals the emulation's"
else fail zero1_separate_folders_save "rc=$RC0 $RC1: $(ls "$WORK/s-r0" "$WORK/s-r1"; logs s; diff "$WORK/emu.txt" "$WORK/s.txt" | head -4)"; fi

# resume, each rank from its own folder holding only its own files of step 4: the uninterrupted run's bits
mkdir -p "$WORK/p-r0" "$WORK/p-r1"
cp "$WORK/s-r0"/*_00000004.bin "$WORK/p-r0/" && cp "$WORK/s-r1/state_00000004.r1.bin" "$WORK/p-r1/"
pair p --set train.zero_stage=1 --resume
vals "$WORK/p-r0/metrics.jsonl" > "$WORK/p.txt"
if [ $RC0 -eq 0 ] && [ $RC1 -eq 0 ] && [ -s "$WORK/p.txt" ] && tail -n "$(wc -l < "$WORK/p.txt")" "$WORK/emu.txt" | cmp -s - "$WORK/p.txt" \
   && same_step8 p "$WORK/emu"; then ok zero1_separate_folders_resume_exact "losses after resume: $(grep -o '"loss":[-0-9.e]*' "$WORK/p-r0/metrics.jsonl" | cut -d: -f2 | tr '\n' ' ')"
else fail zero1_separate_folders_resume_exact "rc=$RC0 $RC1: $(logs p; diff "$WORK/p.txt" "$WORK/emu.txt" | head -4)"; fi

# rank 1 lacks its part of step 8 (it has step 4's): rank 0 passes over step 8 naming rank 1, and both go on from 4
cp -r "$WORK/s-r0" "$WORK/f-r0" && cp -r "$WORK/s-r1" "$WORK/f-r1" && rm "$WORK/f-r1/state_00000008.r1.bin"
pair f --set train.zero_stage=1 --resume
if [ $RC0 -eq 0 ] && [ $RC1 -eq 0 ] && same_step8 f "$WORK/emu" \
   && grep -qF "resume: skipped step 8: rank 1 has no part of step 8 in $WORK/f-r1 (state_00000008.r1.bin)" "$WORK/f-0.log" \
   && grep -q "resuming from .*f-r0/state_00000004.bin (step 4)" "$WORK/f-0.log"; then ok zero1_rank_lacks_newest_part_falls_back
else fail zero1_rank_lacks_newest_part_falls_back "rc=$RC0 $RC1: $(logs f)"; fi

# rank 1's folder holds no part at all: both stop at once, each with the message naming rank 1 and its folder
cp -r "$WORK/s-r0" "$WORK/m-r0" && mkdir -p "$WORK/m-r1"
t0=$(date +%s); pair m --set train.zero_stage=1 --resume; t=$(( $(date +%s) - t0 ))
want="rank 1 has no part of step 8 in $WORK/m-r1 (state_00000008.r1.bin)"
if [ $RC0 -eq 1 ] && [ $RC1 -eq 1 ] && [ $t -le 30 ] && grep -qF "gpt2gen: rank 0: $want" "$WORK/m-0.log" && grep -qF "gpt2gen: rank 1: $want" "$WORK/m-1.log" \
   && ! grep -q '^step ' "$WORK/m-0.log"; then ok zero1_rank_lacks_every_part_stops "$(grep -o 'rank 1 has no part[^;]*' "$WORK/m-1.log" | head -1)"
else fail zero1_rank_lacks_every_part_stops "rc=$RC0 $RC1 in $t s: $(logs m)"; fi

# a ZeRO-0 checkpoint is all in rank 0's folder: it resumes as ZeRO-1 with rank 1's folder empty, to the same bits
pair z --set train.zero_stage=0
mkdir -p "$WORK/q-r0" "$WORK/q-r1"
cp "$WORK/z-r0"/*_00000004.bin "$WORK/q-r0/"
pair q --set train.zero_stage=1 --resume
vals "$WORK/q-r0/metrics.jsonl" > "$WORK/q.txt"
if [ $RC0 -eq 0 ] && [ $RC1 -eq 0 ] && [ ! -e "$WORK/z-r1/state_00000004.r1.bin" ] && [ -s "$WORK/q.txt" ] \
   && tail -n "$(wc -l < "$WORK/q.txt")" "$WORK/emu.txt" | cmp -s - "$WORK/q.txt" && same_step8 q "$WORK/emu"; then ok zero0_checkpoint_resumes_as_zero1
else fail zero0_checkpoint_resumes_as_zero1 "rc=$RC0 $RC1: $(ls "$WORK/z-r0" "$WORK/z-r1"; logs q)"; fi

# the Llama-shaped micro model (tests/cli/arch.sh's): the resume the ranks agree on from rank 0's header carries its
# architecture record to rank 1, whose part then fits, and the run continues to the emulation's bits
printf 'base "%s/tests/configs/micro.lua"\nname = "llama"\nmodel = { norm = "rmsnorm", position = "rope", mlp = "swiglu", n_ffn = 160, n_kv_head = 1, bias = false, tie_embeddings = false }\n' "$ROOT" > "$WORK/llama.lua"
M=$(printf '%s' "$M" | sed "s#tests/configs/micro.lua#$WORK/llama.lua#")
"$GPT2GEN" train $M --backend cpu -q --gpus 2 --set checkpoint.dir="$WORK/lemu" > "$WORK/lemu.log" 2>&1
vals "$WORK/lemu/metrics.jsonl" > "$WORK/lemu.txt"
pair ls --set train.zero_stage=1
mkdir -p "$WORK/lp-r0" "$WORK/lp-r1"
cp "$WORK/ls-r0"/*_00000004.bin "$WORK/lp-r0/" && cp "$WORK/ls-r1/state_00000004.r1.bin" "$WORK/lp-r1/"
pair lp --set train.zero_stage=1 --resume
vals "$WORK/lp-r0/metrics.jsonl" > "$WORK/lp.txt"
if [ $RC0 -eq 0 ] && [ $RC1 -eq 0 ] && [ -s "$WORK/lp.txt" ] && [ "$(wc -l < "$WORK/lemu.txt")" -eq 19 ] \
   && tail -n "$(wc -l < "$WORK/lp.txt")" "$WORK/lemu.txt" | cmp -s - "$WORK/lp.txt" && same_step8 lp "$WORK/lemu"; then ok other_architecture_resume_exact
else fail other_architecture_resume_exact "rc=$RC0 $RC1: $(logs lp; diff "$WORK/lp.txt" "$WORK/lemu.txt" | head -4)"; fi
finish
