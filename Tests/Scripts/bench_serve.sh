#!/usr/bin/env bash
# `make bench-serve`: GET /v1/model requests per second and latency percentiles of a throwaway
# server on 127.0.0.1, idle and while a training runs, POST /v1/recognize of one photo, then UPLOADERS (default 20) people uploading
# 25 crops each at once; before them, the enrollment latency of one more person (upload answered ->
# a published model that lists them). BASE (default builtin; `none`: every training from scratch, a
# long one) is the server's --base. Bounded: REQUESTS per phase (default 3000), CONCURRENCY parallel
# connections (default 8), TIME_LIMIT seconds per phase (default 30). It is a benchmark, not a test:
# the numbers depend on the machine and on what else runs on it.
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${BIN:-.build/release/facetrain}
REQUESTS=${REQUESTS:-3000}
CONCURRENCY=${CONCURRENCY:-8}
TIME_LIMIT=${TIME_LIMIT:-30}
UPLOADERS=${UPLOADERS:-20}
BASE=${BASE:-builtin}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/facetrain-bench-serve-XXXXXX")
server=""
cleanup() { [ -n "$server" ] && kill "$server" 2>/dev/null; rm -rf "$WORK"; }
trap cleanup EXIT

# Every client here is 127.0.0.1, standing for phones on many addresses: the per-address cap is the total.
# Users 3..22 are enrolled first; the next UPLOADERS upload at once later; the last one enrolls alone.
"$BIN" synth --out "$WORK/synth" --users $((21 + UPLOADERS)) --per-user 25 --seed 9 > /dev/null
mkdir "$WORK/data" && cp -r "$WORK/synth/1" "$WORK/synth/2" "$WORK/data/"
openssl rand -hex 24 > "$WORK/token"
AUTH="Authorization: Bearer $(cat "$WORK/token")"
"$BIN" serve --data "$WORK/data" --models "$WORK/models" --listen 127.0.0.1:0 --token-file "$WORK/token" \
    --base "$BASE" --train-after off --connections-per-address 64 2> "$WORK/serve.log" &
server=$!
for _ in $(seq 100); do grep -q "listening on" "$WORK/serve.log" && break; sleep 0.1; done
API=$(grep -o 'http://127.0.0.1:[0-9]*' "$WORK/serve.log" | head -n 1)
case "$API" in http://127.0.0.1:*) ;; *) echo "the server did not start" >&2; cat "$WORK/serve.log" >&2; exit 1 ;; esac

json() { python3 -c "import json, sys; print(json.load(sys.stdin)$1)"; }
for user in $(seq 3 22); do
    id=$(curl -sS -H "$AUTH" -d "{\"name\": \"Person $user\"}" "$API/v1/users" | json '["id"]')
    files=()
    for crop in "$WORK/synth/$user"/*.jpg; do files+=(-F "photos=@$crop"); done
    curl -sS -o /dev/null -H "$AUTH" "${files[@]}" "$API/v1/users/$id/photos"
done
wait_for() {
    for _ in $(seq 1200); do
        state=$(curl -sS -H "$AUTH" "$API/v1/training/$1" | json '["record"]["state"]')
        case "$state" in queued|running) sleep 0.5 ;; *) return 0 ;; esac
    done
}
wait_for "$(curl -sS -H "$AUTH" -X POST "$API/v1/training" | json '["job"]')"

# One curl process drives every request (keep-alive, CONCURRENCY at a time) and writes one timing line each.
for _ in $(seq "$REQUESTS"); do printf 'url = "%s/v1/model"\noutput = "/dev/null"\n' "$API"; done > "$WORK/urls"
phase() {
    curl -s -Z --parallel-max "$CONCURRENCY" -m "$TIME_LIMIT" -K "$WORK/urls" \
        -w '%{http_code} %{time_total}\n' > "$WORK/$1.times" 2> /dev/null || true
}
report() {
    python3 - "$1" "$2" "$3" <<'PY'
import sys
name, path, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
lines = [line.split() for line in open(path) if line.strip()]
ok = sorted(float(t) for code, t in lines if code == "200")
failed = len(lines) - len(ok)
def percentile(p):
    return ok[min(len(ok) - 1, int(p / 100 * len(ok)))] * 1000 if ok else float("nan")
print(f"| {name} | {len(ok)} | {failed} | {len(ok) / seconds:.0f} | {percentile(50):.1f} | {percentile(99):.1f} |")
PY
}
elapsed() { local start=$1; python3 -c "import time; print(time.time() - $start)"; }

echo "| GET /v1/model on 127.0.0.1 ($CONCURRENCY connections) | answered 200 | other | requests/s | p50 ms | p99 ms |"
echo "| --- | --- | --- | --- | --- | --- |"
start=$(python3 -c 'import time; print(time.time())')
phase idle
report "idle" "$WORK/idle.times" "$(elapsed "$start")"
# A user renamed makes the next training differ; it runs while the requests are sent.
curl -sS -o /dev/null -H "$AUTH" -X PATCH -d '{"name": "Renamed"}' "$API/v1/users/3"
job=$(curl -sS -H "$AUTH" -X POST "$API/v1/training" | json '["job"]')
start=$(python3 -c 'import time; print(time.time())')
phase training
seconds=$(elapsed "$start")
state=$(curl -sS -H "$AUTH" "$API/v1/training/$job" | json '["record"]["state"]')
report "while training job $job (state at the end: $state)" "$WORK/training.times" "$seconds"
wait_for "$job"
# How much of the phase the training covered: it is short once the embeddings are cached.
curl -sS -H "$AUTH" "$API/v1/training/$job" | python3 -c '
import datetime, json, sys
record = json.load(sys.stdin)["record"]
start, end = (datetime.datetime.fromisoformat(record[key].replace("Z", "+00:00")) for key in ("startedAt", "finishedAt"))
job, state = record["job"], record["state"]
print(f"(training job {job}: {state} in {(end - start).total_seconds():.0f} s, to the second; the phase took {float(sys.argv[1]):.1f} s)")' "$seconds"
# POST /v1/recognize: a 640 x 480 photo of three enrolled people (drawn crops at 150, 120 and 110 px
# on grey), RECOGNIZE_REQUESTS times, RECOGNIZE_CONCURRENCY at once (issue #32: p50 <= 50 ms, p99 <= 150 ms
# with 4).
python3 - "$WORK/synth" "$WORK/group.jpg" <<'PY'
import sys
from PIL import Image
synth, out = sys.argv[1:]
canvas = Image.new("RGB", (640, 480), (95, 105, 115))
for user, x, y, side in [(3, 40, 100, 150), (4, 260, 120, 120), (5, 450, 90, 110)]:
    canvas.paste(Image.open(f"{synth}/{user}/3.jpg").convert("RGB").resize((side, side)), (x, y))
canvas.save(out, quality=90)
PY
# Each request its own block (`next` between them): curl applies options to one request only.
for index in $(seq "${RECOGNIZE_REQUESTS:-200}"); do
    [ "$index" = 1 ] || echo next
    printf 'url = "%s/v1/recognize"\nform = "photo=@%s"\nheader = "%s"\noutput = "/dev/null"\n' \
        "$API" "$WORK/group.jpg" "$AUTH"
    printf 'write-out = "%%{http_code} %%{time_total}\\n"\n'
done > "$WORK/recognize-urls"
echo
echo "| POST /v1/recognize, 640 x 480, 3 faces (${RECOGNIZE_CONCURRENCY:-4} connections) | answered 200 | other | requests/s | p50 ms | p99 ms |"
echo "| --- | --- | --- | --- | --- | --- |"
start=$(python3 -c 'import time; print(time.time())')
curl -s -Z --parallel-max "${RECOGNIZE_CONCURRENCY:-4}" -m "$TIME_LIMIT" -K "$WORK/recognize-urls" \
    > "$WORK/recognize.times" 2> /dev/null || true
report "recognize" "$WORK/recognize.times" "$(elapsed "$start")"
echo
# Enrollment latency: one more person registers and uploads 25 crops in one request; a training is
# asked for at once; from the upload's answer to the published model (GET /v1/model) that lists them.
late=$((23 + UPLOADERS))
id=$(curl -sS -H "$AUTH" -d '{"name": "Late person"}' "$API/v1/users" | json '["id"]')
files=()
for crop in "$WORK/synth/$late"/*.jpg; do files+=(-F "photos=@$crop"); done
curl -sS -o /dev/null -H "$AUTH" "${files[@]}" "$API/v1/users/$id/photos"
start=$(python3 -c 'import time; print(time.time())')
job=$(curl -sS -H "$AUTH" -X POST "$API/v1/training" | json '["job"]')
wait_for "$job"
seconds=$(elapsed "$start")
curl -sS -H "$AUTH" "$API/v1/training/$job" > "$WORK/late-job.json"
curl -sS "$API/v1/model" > "$WORK/late-model.json" || true
python3 - "$WORK" "$id" "$seconds" "$BASE" <<'PY'
import json, sys
work, id, seconds, base = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
record = json.load(open(f"{work}/late-job.json"))["record"]
try:
    model = json.load(open(f"{work}/late-model.json"))
except ValueError:
    model = {}
known = any(user.get("id") == id for user in model.get("users", []))
if record["state"] == "succeeded" and known:
    print(f"(enrollment latency, --base {base}: {seconds:.1f} s from the upload's answer to a published model "
          f"that lists the new person, version {model.get('version')}, {len(model.get('users', []))} users)")
else:
    print(f"(enrollment latency, --base {base}: not reached: training {record['state']}, "
          f"{record.get('reason') or record.get('error') or 'the published model does not list the new person'})")
PY
# UPLOADERS people register, then all upload their 25 crops at the same moment.
ids=()
for user in $(seq 23 $((22 + UPLOADERS))); do
    ids+=("$(curl -sS -H "$AUTH" -d "{\"name\": \"Uploader $user\"}" "$API/v1/users" | json '["id"]'):$user")
done
start=$(python3 -c 'import time; print(time.time())')
pids=()
for pair in "${ids[@]}"; do
    files=()
    for crop in "$WORK/synth/${pair#*:}"/*.jpg; do files+=(-F "photos=@$crop"); done
    curl -sS -m "$TIME_LIMIT" -o "$WORK/upload-${pair%%:*}.json" -H "$AUTH" "${files[@]}" "$API/v1/users/${pair%%:*}/photos" &
    pids+=($!)
done
for pid in "${pids[@]}"; do wait "$pid" || true; done
seconds=$(elapsed "$start")
curl -sS -H "$AUTH" "$API/v1/users" > "$WORK/users.json"
python3 - "$WORK" "$seconds" "${ids[@]}" <<'PY'
import json, sys
work, seconds, pairs = sys.argv[1], float(sys.argv[2]), sys.argv[3:]
crops = {user["id"]: user["crops"] for user in json.load(open(f"{work}/users.json"))["users"]}
answered = lost = 0
for pair in pairs:
    id = int(pair.split(":")[0])
    try:
        stored = json.load(open(f"{work}/upload-{id}.json")).get("stored")
    except (OSError, ValueError):
        stored = None
    answered += stored == 25
    lost += crops.get(id, 0) != 25
print(f"({len(pairs)} uploaders x 25 crops at once: {answered} answered stored=25, {lost} users without "
      f"exactly 25 crops on the server afterwards, {seconds:.1f} s)")
PY
echo "($(nproc) cores of $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); load average $(cut -d' ' -f1-3 /proc/loadavg))"
