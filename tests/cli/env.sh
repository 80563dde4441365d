#!/bin/sh
# The environment is read and checked once, at start: a value outside a variable's domain, or launchers whose
# variables disagree, is one message naming the variable(s) and what it accepts, and exit code 2 (no training).
. "$(dirname "$0")/../lib.sh"
M=configs/tiny.lua
bad() {   # name, expected text, then VAR=value...
    name=$1 want=$2; shift 2
    out=$(env "$@" "$GPT2GEN" train $M --backend cpu --set train.steps=1 2>&1); rc=$?
    if [ $rc -eq 2 ] && [ "$(printf '%s\n' "$out" | wc -l)" -eq 1 ] && printf '%s' "$out" | grep -qF "$want"; then ok "$name"
    else fail "$name" "rc=$rc: $out"; fi
}
for v in 2s abc -5 0; do
    bad "lock_timeout_$v" "GPT2GEN_LOCK_TIMEOUT=\"$v\": expected a positive number of seconds" GPT2GEN_LOCK_TIMEOUT=$v
done
bad nccl_timeout_bad 'GPT2GEN_NCCL_TIMEOUT="x": expected a positive number of seconds' GPT2GEN_NCCL_TIMEOUT=x
bad comm_overlap_false 'GPT2GEN_COMM_OVERLAP="false": expected 0 or 1' GPT2GEN_COMM_OVERLAP=false
bad cpu_processes_true 'GPT2GEN_CPU_PROCESSES="true": expected 0 or 1' GPT2GEN_CPU_PROCESSES=true
bad profile_yes 'GPT2GEN_PROFILE="yes": expected 0 or 1' GPT2GEN_PROFILE=yes
bad queue_profile_2 'GPT2GEN_QUEUE_PROFILE="2": expected 0 or 1' GPT2GEN_QUEUE_PROFILE=2
bad launchers_disagree 'OMPI_COMM_WORLD_RANK=1 and PMI_RANK=0 disagree' \
    OMPI_COMM_WORLD_RANK=1 OMPI_COMM_WORLD_SIZE=2 OMPI_COMM_WORLD_LOCAL_RANK=1 PMI_RANK=0 PMI_SIZE=2 MPI_LOCALRANKID=0
bad launchers_world_disagree 'OMPI_COMM_WORLD_SIZE=2 and SLURM_NTASKS=4 disagree' \
    OMPI_COMM_WORLD_RANK=1 OMPI_COMM_WORLD_SIZE=2 OMPI_COMM_WORLD_LOCAL_RANK=1 SLURM_PROCID=1 SLURM_NTASKS=4 SLURM_LOCALID=1 SLURM_STEP_ID=0
bad join_timeout_bad 'GPT2GEN_JOIN_TIMEOUT="-1": expected a positive number of seconds' GPT2GEN_JOIN_TIMEOUT=-1
bad torchrun_port 'MASTER_PORT="0": expected a TCP port, 1 to 65535' RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=0
bad torchrun_half 'MASTER_ADDR is set but MASTER_PORT is not' RANK=0 WORLD_SIZE=2 LOCAL_RANK=0 MASTER_ADDR=127.0.0.1
bad torchrun_disagrees 'WORLD_SIZE=2 and SLURM_NTASKS=4 disagree' \
    RANK=1 WORLD_SIZE=2 LOCAL_RANK=1 SLURM_PROCID=1 SLURM_NTASKS=4 SLURM_LOCALID=1 SLURM_STEP_ID=0
finish
