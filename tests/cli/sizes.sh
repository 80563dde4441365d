#!/bin/sh
# Sizes (tools/check_sizes.py): no product C file over 450 lines, no C function over 60. The checker is first run on
# a generated tree whose violations are known (a 451-line file; a 61-line function with a signature over two lines;
# beside them what must not count: a 450-line file, a 60-line function, braces in strings, comments, struct bodies
# and initializers, a long file under tests/, and a long kernel template, which is a note), then on this repository.
. "$(dirname "$0")/../lib.sh"
scratch
CHECK="python3 $ROOT/tools/check_sizes.py"
T="$WORK/tree"
mkdir -p "$T/templates" "$T/tests" "$T/lib"

# lines N: N lines "int vI;" (a file of N lines with nothing else in it)
lines() { awk -v n="$1" 'BEGIN { for (i = 1; i <= n; i++) printf "int v%d;\n", i }'; }
lines 451 > "$T/big.c"
lines 450 > "$T/lib/edge.c"
lines 500 > "$T/tests/test_long.c"
lines 500 > "$T/templates/long.cu"
# body N: N lines of a function's body
body() { awk -v n="$1" 'BEGIN { for (i = 1; i <= n; i++) printf "    x += %d;\n", i }'; }
{
    echo '/* a comment with a brace } in it */'
    echo 'typedef struct { int a; } Pair;'
    echo 'static const Pair TABLE[] = {{1}, {2}};'
    echo 'static const char *BRACES = "}}{";'
    echo 'static int long_fn(int x,'          # line 5: 2 signature lines + 58 body lines + 1 closing brace = 61
    echo '                   const char *s) {'
    body 57
    echo '    return x + (s[0] == '"'"'{'"'"');'
    echo '}'
} > "$T/fn.c"
{
    echo 'int fits_fn(int x) {'               # 1 + 58 + 1 = 60 lines
    body 58
    echo '}'
} > "$T/lib/fits.c"

out=$($CHECK "$T" 2>&1); rc=$?
got=$(printf '%s\n' "$out" | grep -v '^note: ' | sed "s|^$T/||" | sort)
want=$(printf '%s\n' "big.c:1: file is 451 lines (max 450)" "fn.c:5: function long_fn is 61 lines (max 60)")
if [ "$rc" -eq 1 ] && [ "$got" = "$want" ]; then ok fixture_violations_reported
else fail fixture_violations_reported "exit $rc, reported: $(printf '%s' "$got" | tr '\n' '|')"; fi
if printf '%s\n' "$out" | grep -q "^note: $T/templates/long.cu:1: file is 500 lines"; then ok fixture_template_noted
else fail fixture_template_noted "no note for templates/long.cu in: $(printf '%s' "$out" | tr '\n' '|')"; fi

rm "$T/big.c" "$T/fn.c"
out=$($CHECK "$T" 2>&1); rc=$?
if [ "$rc" -eq 0 ] && printf '%s\n' "$out" | grep -q '^sizes: 3 files, 1 functions checked, all within limits$'; then
    ok fixture_within_limits
else fail fixture_within_limits "exit $rc: $(printf '%s' "$out" | tr '\n' '|')"; fi

out=$($CHECK 2>&1); rc=$?
if [ "$rc" -eq 0 ]; then ok tree_within_limits "$(printf '%s\n' "$out" | tail -1)"
else fail tree_within_limits "$(printf '%s\n' "$out" | grep -v '^note: ' | tr '\n' '|')"; fi
finish
