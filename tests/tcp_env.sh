# tests/tcp_env.sh: what the tests of ranks started by hand over TCP (tests/cli/tcp.sh, tests/cli/tcp_resume.sh)
# share, sourced after tests/train_env.sh, which sets M: free_port and rank (each rank's port is $PORT).
# free_port: a TCP port nothing on this host listens at or uses, below the ephemeral range (so no outgoing connection
# takes it meanwhile), from this shell's pid and the clock, checked against /proc/net/tcp*
free_port() {
    i=0
    while [ $i -lt 200 ]; do
        p=$(( 20000 + ( $$ * 7 + $(date +%N | sed 's/^0*//;s/^$/0/') / 1000 + i * 131 ) % 12000 ))
        hex=$(printf ':%04X ' "$p")
        if ! cat /proc/net/tcp /proc/net/tcp6 2>/dev/null | grep -q "$hex"; then echo "$p"; return 0; fi
        i=$((i + 1))
    done
    echo 29999
}
# rank R WORLD LOG [VAR=value...] -- [options]: one rank, torchrun's variables; execs `timeout`, whose child is the
# rank (run it as `rank ... &`, then $! is timeout's pid: a signal to it is passed on, `pkill -P $!` reaches the rank;
# or as `(rank ...)`)
rank() {
    r=$1 w=$2 log=$3; shift 3
    vars=""
    while [ $# -gt 0 ] && [ "$1" != -- ]; do vars="$vars $1"; shift; done
    [ "$1" = -- ] && shift
    # shellcheck disable=SC2086
    exec env RANK=$r WORLD_SIZE=$w LOCAL_RANK=$r MASTER_ADDR=127.0.0.1 MASTER_PORT=$PORT GPT2GEN_JOIN_TIMEOUT=20 $vars \
        timeout 120 "$GPT2GEN" train $M --backend cpu -q "$@" > "$log" 2>&1
}
