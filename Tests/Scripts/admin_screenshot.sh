#!/usr/bin/env bash
# `make admin-screenshot`: the admin page (GET /) of a throwaway server on synthetic users, as headless
# Chromium renders it after logging in through the page's form. Writes $SCREENSHOT (.build/admin.png).
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${BIN:-.build/release/facetrain}
SCREENSHOT=${SCREENSHOT:-.build/admin.png}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/facetrain-admin-XXXXXX")
server=""
cleanup() { [ -n "$server" ] && kill "$server" 2>/dev/null; rm -rf "$WORK"; }
trap cleanup EXIT
command -v chromium > /dev/null || { echo "chromium is missing: make deps installs it" >&2; exit 1; }

"$BIN" synth --out "$WORK/synth" --users 6 --per-user 8 --seed 5 --negatives 30 --unknown-identities 8 --per-unknown 3 > /dev/null
mkdir "$WORK/data" && cp -r "$WORK/synth/1" "$WORK/synth/2" "$WORK/data/"
openssl rand -hex 24 > "$WORK/token"
TOKEN=$(cat "$WORK/token")
"$BIN" serve --data "$WORK/data" --models "$WORK/models" --listen 127.0.0.1:0 --token-file "$WORK/token" \
    --train-after off 2> "$WORK/serve.log" &
server=$!
for _ in $(seq 100); do grep -q "listening on" "$WORK/serve.log" && break; sleep 0.1; done
API=$(grep -o 'http://127.0.0.1:[0-9]*' "$WORK/serve.log" | head -n 1)
[ -n "$API" ] || { cat "$WORK/serve.log" >&2; exit 1; }

# Names as people have them: the synthetic ones from users.json.
python3 - "$WORK/synth/users.json" > "$WORK/users.tsv" <<'PY'
import json, sys
for user in json.load(open(sys.argv[1])):
    print(f"{user['id']}\t{json.dumps({'name': user['name'], 'position': user.get('position')})}")
PY
while IFS=$'\t' read -r user body; do
    id=$(curl -sS -H "Authorization: Bearer $TOKEN" -H "Content-Type: application/json" --data-binary "$body" \
        "$API/v1/users" | python3 -c 'import json, sys; print(json.load(sys.stdin)["id"])')
    files=()
    for crop in "$WORK/synth/$user"/*.jpg; do files+=(-F "photos=@$crop"); done
    curl -sS -o /dev/null -H "Authorization: Bearer $TOKEN" "${files[@]}" "$API/v1/users/$id/photos"
done < "$WORK/users.tsv"
for _ in 1 2; do
    job=$(curl -sS -H "Authorization: Bearer $TOKEN" -X POST "$API/v1/training" | python3 -c 'import json, sys; print(json.load(sys.stdin)["job"])')
    for _ in $(seq 600); do
        state=$(curl -sS -H "Authorization: Bearer $TOKEN" "$API/v1/training/$job" | python3 -c 'import json, sys; print(json.load(sys.stdin)["record"]["state"])')
        case "$state" in queued|running) sleep 0.5 ;; *) break ;; esac
    done
done

cat > "$WORK/login.html" <<HTML
<!DOCTYPE html><html><body><form method="post" action="$API/login"><input name="token" value="$TOKEN"></form>
<script>document.forms[0].submit()</script></body></html>
HTML
chrome=(chromium --headless --no-sandbox --disable-gpu --no-first-run --user-data-dir="$WORK/profile" --virtual-time-budget=5000)
"${chrome[@]}" --dump-dom "file://$WORK/login.html" > /dev/null 2>&1
mkdir -p "$(dirname "$SCREENSHOT")"
"${chrome[@]}" --hide-scrollbars --window-size=1280,1100 --screenshot="$(realpath -m "$SCREENSHOT")" "$API/" 2> /dev/null
echo "wrote $SCREENSHOT"
