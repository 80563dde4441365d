#!/bin/sh
# Plots (docs/training.md, "Plots"; runtime/train/plot.h): a short CPU run keeps <run>/plot.svg (rewritten at each
# validation, never left half-written), whose every series holds exactly the values of metrics.jsonl, drawn as an
# affine map of them; `gpt2gen plot` overlays two runs (one series per run in each panel, names that need XML
# escaping kept); a long series is decimated to its buckets' lowest and highest points; a resumed run's repeated
# steps count once (the later); a torn last line is left out, and an empty file, garbage, a missing folder or a
# folder without a log is one error naming it. Headless Chromium (Debian's `chromium`, installed by .ci/run) renders
# the SVG, and the PNG holds the series' colours; without it the browser checks are skipped (failed in CI).
. "$(dirname "$0")/../lib.sh"
. "$ROOT/tests/train_env.sh"
P() { "$GPT2GEN" plot "$@"; }

# check.py SVG [--upto auto] NAME=METRICS...: the SVG's series against the logs; prints how many series each panel
# holds and each series' points ("loss:2 accuracy:1 lr:1 tok_s:1 | run/train_loss:16 ...")
cat > "$WORK/check.py" <<'PY'
import json, math, sys, xml.etree.ElementTree as ET
NS = "{http://www.w3.org/2000/svg}"
KEYS = {"step": [("train_loss", "loss"), ("lr", "lr"), ("tok_s", "tok_s")], "val": [("val_loss", "val_loss")],
        "eval": [("accuracy", "accuracy")]}
PANEL = {"train_loss": "loss", "val_loss": "loss", "accuracy": "accuracy", "lr": "lr", "tok_s": "tok_s"}

def series(path, upto=None):
    """the series of a metrics.jsonl as plot.h reads it: nulls left out, a repeated step's later record wins"""
    out = {k: [] for k in PANEL}
    lines = open(path, "rb").read().split(b"\n")
    for i, raw in enumerate(lines):
        if not raw.strip(): continue
        try: rec = json.loads(raw)
        except ValueError:
            if i == len(lines) - 1: break          # the torn last line
            raise
        if rec.get("event") not in KEYS or (upto is not None and rec["step"] > upto): continue
        for name, key in KEYS[rec["event"]]:
            pts = out[name]
            while pts and pts[-1][0] >= rec["step"]: pts.pop()
            v = rec.get(key)
            if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v): pts.append((rec["step"], float(v)))
    return out

def decimate(pts, most=2000):
    if len(pts) <= most: return pts
    n, b, keep = len(pts), most // 2, []
    for k in range(b):
        lo = hi = k * n // b
        for i in range(k * n // b, (k + 1) * n // b):
            if pts[i][1] < pts[lo][1]: lo = i
            if pts[i][1] > pts[hi][1]: hi = i
        keep += [pts[min(lo, hi)]] + ([pts[max(lo, hi)]] if lo != hi else [])
    return keep

def affine(pairs, what):
    """pairs of (value, pixel) all on one line, to the 0.1 pixel they are printed to"""
    if not pairs: return
    (v0, p0), (v1, p1) = min(pairs), max(pairs)
    if v1 == v0: return
    a = (p1 - p0) / (v1 - v0)
    bad = [(v, p) for v, p in pairs if abs(p0 + a * (v - v0) - p) > 0.11]
    assert not bad, "%s: pixels not an affine map of the values: %s" % (what, bad[:3])

svg, args = sys.argv[1], sys.argv[2:]
upto = args[:2] == ["--upto", "auto"]
if upto: args = args[2:]
root = ET.parse(svg).getroot()
assert root.tag == NS + "svg" and root.get("version") == "1.1" and root.get("font-family") == "sans-serif", root.attrib
w, h = float(root.get("width")), float(root.get("height"))
assert root.get("viewBox") == "0 0 %g %g" % (w, h), root.get("viewBox")
text = open(svg, encoding="utf-8").read()
assert "<script" not in text and "http://" not in text.replace('xmlns="http://www.w3.org/2000/svg"', ""), "script or link"
lines = {}
for p in root.iter(NS + "polyline"):
    if p.get("class") == "series": lines.setdefault(p.get("data-run"), {})[p.get("data-series")] = p
panels, counts = {}, []
for g in root.iter(NS + "g"):
    if g.get("class") == "panel":
        ps = [p for p in g.iter(NS + "polyline") if p.get("class") == "series"]
        panels[g.get("data-panel")] = ps
        xs = [(float(x), float(xy.split(",")[0])) for p in ps for x, xy in zip(p.get("data-x").split(), p.get("points").split())]
        ys = [(float(y), -float(xy.split(",")[1])) for p in ps for y, xy in zip(p.get("data-y").split(), p.get("points").split())]
        affine(xs, g.get("data-panel") + " x"); affine(ys, g.get("data-panel") + " y")
runs = dict(a.split("=", 1) for a in args)
assert set(lines) == set(runs), "runs in the SVG: %s, expected %s" % (sorted(lines), sorted(runs))
for name, path in runs.items():
    k = None
    if upto: k = max(float(x) for x in lines[name]["val_loss"].get("data-x").split())
    want = series(path, k)
    got = lines[name]
    assert set(got) == {s for s in want if want[s]}, "%s: series %s, expected %s" % (name, sorted(got), sorted(s for s in want if want[s]))
    for s, p in got.items():
        exp = decimate(want[s])
        xs = [float(v) for v in p.get("data-x").split()]
        ys = [float(v) for v in p.get("data-y").split()]
        assert int(p.get("data-source-points")) == len(want[s]), (name, s, p.get("data-source-points"), len(want[s]))
        assert int(p.get("data-points")) == len(exp) == len(p.get("points").split()), (name, s, p.get("data-points"), len(exp))
        assert list(zip(xs, ys)) == exp, "%s %s: %s... expected %s..." % (name, s, list(zip(xs, ys))[:4], exp[:4])
        counts.append("%s/%s:%d" % (name, s, len(want[s])))
    if upto: counts.append("upto:%d" % k)
print(" ".join("%s:%d" % (k, len(v)) for k, v in panels.items()), "|", " ".join(sorted(counts)))
PY
check() { python3 "$WORK/check.py" "$@" 2>&1; }

# png.py PNG HEX...: the PNG (parsed with zlib) holds many distinct colours, and at least 40 pixels of each colour
PNG_PY='
import struct, sys, zlib
data = open(sys.argv[1], "rb").read()
assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
pos, idat = 8, []
while pos < len(data):
    n, kind = struct.unpack(">I4s", data[pos:pos + 8])
    if kind == b"IHDR": w, h, depth, ctype, _, _, lace = struct.unpack(">IIBBBBB", data[pos + 8:pos + 21])
    if kind == b"IDAT": idat.append(data[pos + 8:pos + 8 + n])
    pos += 12 + n
assert depth == 8 and ctype in (2, 6) and lace == 0, (depth, ctype, lace)
bpp = 3 if ctype == 2 else 4
raw, stride, prev, counts = zlib.decompress(b"".join(idat)), w * bpp, bytearray(w * bpp), {}
for y in range(h):
    f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
    for i in range(stride):
        a = line[i - bpp] if i >= bpp else 0
        b = prev[i]; c = prev[i - bpp] if i >= bpp else 0
        if f == 1: line[i] = (line[i] + a) & 255
        elif f == 2: line[i] = (line[i] + b) & 255
        elif f == 3: line[i] = (line[i] + (a + b) // 2) & 255
        elif f == 4:
            p = a + b - c; pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
            line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
    for i in range(0, stride, bpp): counts[bytes(line[i:i + 3])] = counts.get(bytes(line[i:i + 3]), 0) + 1
    prev = line
near = lambda col: sum(n for k, n in counts.items() if max(abs(k[j] - col[j]) for j in range(3)) <= 24)
got = {hx: near(bytes.fromhex(hx)) for hx in sys.argv[2:]}
print("%dx%d, %d colours, %s" % (w, h, len(counts), got))
sys.exit(0 if len(counts) >= 20 and all(n >= 40 for n in got.values()) else 1)'
# shot SVG PNG HEX...: Chromium's screenshot of SVG, with the colours in it
CHROMIUM=$(command -v chromium || command -v chromium-browser)
shot() {
    svg=$1 png=$2; shift 2
    rm -f "$png"
    env -u ASAN_OPTIONS -u UBSAN_OPTIONS HOME="$WORK" XDG_CONFIG_HOME="$WORK/xdg" XDG_CACHE_HOME="$WORK/xdg" \
        timeout 120 "$CHROMIUM" --headless --no-sandbox --disable-gpu --hide-scrollbars --user-data-dir="$WORK/chromium" \
        --screenshot="$png" --window-size=1200,820 "file://$svg" > "$WORK/chromium.log" 2>&1
    [ -s "$png" ] || { echo "no screenshot: $(tail -3 "$WORK/chromium.log")"; return 1; }
    python3 -c "$PNG_PY" "$png" "$@"
}
browser() {   # NAME SVG PNG HEX...
    name=$1; shift
    if [ -z "$CHROMIUM" ]; then
        if [ "$CI" = true ]; then fail "$name" "no chromium (.ci/run installs it)"; else skip "$name" "no chromium (apt-get install chromium)"; fi
    elif out=$(shot "$@" 2>&1); then ok "$name" "$out"
    else fail "$name" "$out"; fi
}

# an evaluation set of 16 examples (llm.c's format), for the accuracy panel
python3 "$ROOT/tests/evalset.py" "$WORK/set.bin" 16 5 10 5

# --- training keeps plot.svg: at each validation, and at the end --------------------------------------------------
A="$WORK/runs/run-a"
"$GPT2GEN" train $M --backend cpu -q --set checkpoint.dir="$A" --set train.steps=16 --set eval.val_every=4 \
    --set eval.hellaswag="$WORK/set.bin" > "$WORK/a.log" 2>&1 &
pid=$!
if wait_steps "$A" 6; then cp "$A/plot.svg" "$WORK/early.svg" 2>/dev/null; fi
wait $pid; rc=$?
[ $rc -eq 0 ] || { fail train_run_a "rc=$rc: $(tail -5 "$WORK/a.log")"; finish; }
out=$(check "$A/plot.svg" "run-a=$A/metrics.jsonl"); crc=$?
want="loss:2 accuracy:1 lr:1 tok_s:1 | run-a/accuracy:5 run-a/lr:16 run-a/tok_s:16 run-a/train_loss:16 run-a/val_loss:5"
if [ $crc -eq 0 ] && [ "$out" = "$want" ]; then ok run_plot_holds_metrics "$out"
else fail run_plot_holds_metrics "$out (expected $want)"; fi
# the copy taken at step 6 or later is the plot of the last validation before it: every record up to that step
out=$(check "$WORK/early.svg" --upto auto "run-a=$A/metrics.jsonl"); crc=$?
case $out in *upto:16*) crc=1 ;; esac
if [ $crc -eq 0 ] && [ -f "$WORK/early.svg" ]; then ok plot_rewritten_at_validation "$out"
else fail plot_rewritten_at_validation "${out:-no plot.svg while training}"; fi
left=$(ls "$A" | grep -c 'plot\.svg\.tmp')
if [ "$left" -eq 0 ] && grep -q '</svg>' "$A/plot.svg"; then ok plot_written_whole; else fail plot_written_whole "$(ls "$A")"; fi
browser run_plot_renders "$A/plot.svg" "$WORK/a.png" 1f77b4 ff7f0e 2ca02c 9467bd 17becf

# --- gpt2gen plot: two runs overlaid; a name that needs escaping ----------------------------------------------------
B="$WORK/runs/b&<x>\"q'"
"$GPT2GEN" train $M --backend cpu -q --set checkpoint.dir="$B" --set train.steps=8 --set train.lr=1e-3 > "$WORK/b.log" 2>&1 \
    || { fail train_run_b "$(tail -5 "$WORK/b.log")"; finish; }
out=$(cd "$WORK" && P runs/run-a/ "$B/metrics.jsonl" -o "$WORK/two.svg" 2>&1); rc=$?
chk=$(check "$WORK/two.svg" "run-a=$A/metrics.jsonl" "b&<x>\"q'=$B/metrics.jsonl"); crc=$?
want="loss:4 accuracy:1 lr:2 tok_s:2 | b&<x>\"q'/lr:8 b&<x>\"q'/tok_s:8 b&<x>\"q'/train_loss:8 b&<x>\"q'/val_loss:3 run-a/accuracy:5 run-a/lr:16 run-a/tok_s:16 run-a/train_loss:16 run-a/val_loss:5"
if [ $rc -eq 0 ] && [ $crc -eq 0 ] && [ "$chk" = "$want" ] && [ "$out" = "wrote $WORK/two.svg (2 runs)" ]; then ok plot_overlays_two_runs
else fail plot_overlays_two_runs "rc=$rc $out: $chk (expected $want)"; fi
browser overlay_renders "$WORK/two.svg" "$WORK/two.png" 1f77b4 ff7f0e

# the default output is plot.svg here; '-' is standard output; the same run twice is told apart by its paths
mkdir -p "$WORK/here" && out=$(cd "$WORK/here" && P "$A" 2>&1 && P "$A" -o - > "$WORK/stdout.svg") && \
    cmp -s "$WORK/here/plot.svg" "$WORK/stdout.svg" && cmp -s "$WORK/here/plot.svg" "$A/plot.svg"; rc=$?
if [ $rc -eq 0 ]; then ok default_output_and_stdout; else fail default_output_and_stdout "$out"; fi
cp -r "$A" "$WORK/run-a"
chk=$(P "$A" "$WORK/run-a" -o "$WORK/same.svg" >/dev/null 2>&1 && check "$WORK/same.svg" "$A=$A/metrics.jsonl" "$WORK/run-a=$A/metrics.jsonl"); rc=$?
if [ $rc -eq 0 ]; then ok same_names_told_apart; else fail same_names_told_apart "$chk"; fi

# --- long, resumed, torn, hostile -----------------------------------------------------------------------------------
# 5000 steps: 2000 points (each bucket's lowest and highest) out of 5000, spikes kept; steps 3..5 logged again (a
# resumed run) count once, the later; nulls are no points; an unknown event and a line without one are ignored
python3 - "$WORK/long.jsonl" "$WORK/resumed.jsonl" <<'PY'
import json, math, sys
with open(sys.argv[1], "w") as f:
    f.write(json.dumps({"event": "start", "config": "x", "steps": 6000}) + "\n")
    for s in range(1, 5001):
        loss = 3 + math.sin(s / 50) + (5 if s == 4321 else 0)
        f.write(json.dumps({"event": "step", "step": s, "loss": round(loss, 6), "lr": 1e-4 * s / 5000, "tok_s": 1e6 + s}, separators=(",", ":")) + "\n")
        if s % 500 == 0: f.write('{"event":"val","step":%d,"val_loss":%.6f}\n' % (s, loss + 0.1))
with open(sys.argv[2], "w") as f:
    for s, l in [(1, 5.0), (2, 4.0), (3, 3.5), (4, 3.0), (5, None), (3, 3.4), (4, 3.1), (5, 2.9), (6, 2.8)]:
        f.write(json.dumps({"event": "step", "step": s, "loss": l, "lr": 0.001, "tok_s": 100.0}) + "\n")
    f.write('{"event":"other","step":"x"}\n{"pad":0}\n{"event":"val","step":6,"val_loss":3.25}\n')
PY
P "$WORK/long.jsonl" -o "$WORK/long.svg" > /dev/null 2>&1; rc=$?
chk=$(check "$WORK/long.svg" "long=$WORK/long.jsonl"); crc=$?
pts=$(grep -o 'data-series="train_loss" data-points="[0-9]*" data-source-points="[0-9]*"' "$WORK/long.svg")
if [ $rc -eq 0 ] && [ $crc -eq 0 ] && [ "$pts" = 'data-series="train_loss" data-points="2000" data-source-points="5000"' ]
then ok long_series_decimated "$chk"; else fail long_series_decimated "rc=$rc $pts: $chk"; fi
P "$WORK/resumed.jsonl" -o "$WORK/resumed.svg" > /dev/null 2>&1; rc=$?
chk=$(check "$WORK/resumed.svg" "resumed=$WORK/resumed.jsonl"); crc=$?
y=$(python3 -c 'import sys, xml.etree.ElementTree as ET
print(*[p.get("data-y") for p in ET.parse(sys.argv[1]).iter("{http://www.w3.org/2000/svg}polyline") if p.get("data-series") == "train_loss"])' "$WORK/resumed.svg" 2>&1)
if [ $rc -eq 0 ] && [ $crc -eq 0 ] && [ "$y" = "5 4 3.4 3.1 2.9 2.8" ]; then ok resumed_steps_count_once "$y"
else fail resumed_steps_count_once "rc=$rc y='$y': $chk"; fi

# a torn last line (a run writing it): left out, with a note; the plot is the log's without it
cp "$A/metrics.jsonl" "$WORK/torn.jsonl" && printf '{"event":"step","step":17,"lo' >> "$WORK/torn.jsonl"
out=$(P "$WORK/torn.jsonl" -o "$WORK/torn.svg" 2>&1 >/dev/null); rc=$?
chk=$(check "$WORK/torn.svg" "torn=$A/metrics.jsonl"); crc=$?
if [ $rc -eq 0 ] && [ $crc -eq 0 ] && printf '%s' "$out" | grep -q "torn.jsonl: its last line is cut short"; then ok torn_last_line_left_out
else fail torn_last_line_left_out "rc=$rc $out: $chk"; fi

# errors: one line naming the file (and the line), exit 1 (2 for usage); nothing written
expect_error() {   # NAME CODE TEXT ARG...
    name=$1 code=$2 text=$3; shift 3
    rm -f "$WORK/bad.svg"
    out=$(P "$@" -o "$WORK/bad.svg" 2>&1); rc=$?
    if [ $rc -eq "$code" ] && [ ! -e "$WORK/bad.svg" ] && [ "$(printf '%s\n' "$out" | wc -l)" -eq 1 ] \
       && printf '%s' "$out" | grep -qF -- "$text"; then ok "$name"
    else fail "$name" "rc=$rc: $out"; fi
}
: > "$WORK/empty.jsonl"
printf '{"event":"step","step":1,"loss":3}\nnot json at all\n{"event":"step","step":2,"loss":2}\n' > "$WORK/garbage.jsonl"
printf '{"event":"step","step":1,"loss":"3.5"}\n' > "$WORK/string.jsonl"
printf '{"event":"step","step":1.5,"loss":3}\n' > "$WORK/halfstep.jsonl"
printf '[1,2]\n' > "$WORK/array.jsonl"
python3 -c 'import random, sys; r = random.Random(1); open(sys.argv[1], "wb").write(bytes(r.randrange(256) for _ in range(3000)) + b"\n")' "$WORK/binary.jsonl"
mkdir -p "$WORK/nolog"
expect_error empty_file_no_steps 1 "empty.jsonl: no step records" "$WORK/empty.jsonl"
expect_error garbage_line_named 1 "garbage.jsonl:2: not a JSON object" "$WORK/garbage.jsonl"
expect_error string_value_named 1 "string.jsonl:1: \"loss\" is not a number" "$WORK/string.jsonl"
expect_error fractional_step_named 1 "halfstep.jsonl:1: a \"step\" record whose \"step\" is not a whole number" "$WORK/halfstep.jsonl"
expect_error array_line_named 1 "array.jsonl:1: not a JSON object" "$WORK/array.jsonl"
expect_error binary_file 1 "binary.jsonl:" "$WORK/binary.jsonl"
expect_error missing_folder 1 "$WORK/nowhere: no such file" "$WORK/nowhere"
expect_error folder_without_log 1 "nolog: no metrics.jsonl in this folder" "$WORK/nolog"
expect_error second_run_bad 1 "empty.jsonl: no step records" "$A" "$WORK/empty.jsonl"
expect_error no_runs 2 "expected one or more run folders"
cp "$A/metrics.jsonl" "$WORK/log.jsonl"
out=$(P "$WORK/log.jsonl" -o "$WORK/log.jsonl" 2>&1); rc=$?
if [ $rc -eq 1 ] && printf '%s' "$out" | grep -q "that is the metrics log of" && cmp -s "$A/metrics.jsonl" "$WORK/log.jsonl"
then ok log_not_overwritten; else fail log_not_overwritten "rc=$rc: $out"; fi
expect_error unknown_option 2 "unknown option '--bogus'" "$A" --bogus
out=$(P --help); case $out in "usage: gpt2gen plot RUN..."*) ok help ;; *) fail help "$out" ;; esac

finish
