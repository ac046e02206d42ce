#!/usr/bin/env bash
# libFuzzer runs of the parsers that face attackers.
#
#   scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]
#
# Targets: token (full access-token verification), json (strict JSON reader,
# with a write/re-read oracle), base64url (canonical-encoding oracle),
# session-id (SessionID.problem), agent-frame (the agent channel's frame parser),
# request-target (the path normaliser and the query's credential filter),
# upstream-response (the data plane's framing of an upstream's answers, split two ways),
# plain-request (the data plane's front: request heads read without NIO's decoder),
# form-fields (the sign-in callback's query and the back-channel logout's form: FormEncoding),
# sign-in-redirect (a browser sign-in's rd: SignInRedirect, against Foundation's URL resolution),
# mcp-body (an MCP POST's body: MCPBody.read, against a model of Go's encoding/json name matching),
# answer-framing (mixed request sequences on one connection to a live gateway, every answer
# read strictly for its own request; the books of owed answers against a model),
# http2-frames (HTTP/2 frames on one connection to a live gateway: every frame it sends back well
# framed, and a fresh HTTP/1.1 and HTTP/2 request served after each input).
# answer-framing and http2-frames run `portcullis serve` (PORTCULLIS_BIN, default the debug build, built
# when missing) with a route to `portcullis-probes framing-upstream`, both stopped by PID.
# Each is built with `swiftc -sanitize=fuzzer,address` against the real sources,
# seeded from ../shared/vectors (PORTCULLIS_VECTORS) when present, and run for
# SECONDS (default 60). A crash stops the script with exit 1 and leaves the
# input in .build/fuzz/<target>/crash-*; turn it into a regression test.
set -euo pipefail
SECONDS_PER_TARGET=${1:-60}
shift || true
ROOT=$(cd "$(dirname "$0")/.." && pwd)
VECTORS=${PORTCULLIS_VECTORS:-$ROOT/../shared/vectors}
OUT="$ROOT/.build/fuzz"
TARGETS=("$@")
[ ${#TARGETS[@]} -eq 0 ] && TARGETS=(token json base64url session-id agent-frame request-target upstream-response plain-request form-fields sign-in-redirect mcp-body answer-framing http2-frames)
mkdir -p "$OUT/lib"
FLAGS=(-sanitize=fuzzer,address -parse-as-library -O -g -package-name portcullis -I "$ROOT/Sources/CLibCrypto" -I "$ROOT/Sources/CLibCryptoSetup/include")

# libcrypto's set-up before main (a C constructor), archived beside JOSE.
clang -c -O1 -I "$ROOT/Sources/CLibCryptoSetup/include" "$ROOT/Sources/CLibCryptoSetup/setup.c" -o "$OUT/lib/setup.o"
ar rcs "$OUT/lib/libCLibCryptoSetup.a" "$OUT/lib/setup.o"

# JOSE once, as a static library module with coverage instrumentation.
swiftc "${FLAGS[@]}" -emit-library -static -emit-module -module-name JOSE -emit-module-path "$OUT/lib/JOSE.swiftmodule" \
  $(find "$ROOT/Sources/JOSE" -name "*.swift") -o "$OUT/lib/libJOSE.a"
# RuntimeAPI (session ids, intent requests) on top of it, the same way.
swiftc "${FLAGS[@]}" -I "$OUT/lib" -emit-library -static -emit-module -module-name RuntimeAPI -emit-module-path "$OUT/lib/RuntimeAPI.swiftmodule" \
  "$ROOT"/Sources/RuntimeAPI/*.swift -o "$OUT/lib/libRuntimeAPI.a"

build() {  # target, extra sources...
  local target=$1; shift
  swiftc "${FLAGS[@]}" -I "$OUT/lib" -L "$OUT/lib" -lRuntimeAPI -lJOSE -lCLibCryptoSetup -lcrypto -module-name "Fuzz_${target//-/_}" "$@" -o "$OUT/$target/fuzz"
}

seed() {  # target
  local corpus="$OUT/$1/corpus"; mkdir -p "$corpus"
  local tokens; tokens=$( (grep -rhoE 'eyJ[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*\.[A-Za-z0-9_-]*' "$VECTORS" 2>/dev/null || true) | sort -u | head -400)
  case $1 in
    token) printf '%s\n' "$tokens" | while read -r t; do [ -z "$t" ] || printf '%s' "$t" > "$corpus/$(printf '%s' "$t" | sha1sum | cut -c1-16)"; done
           # The target's second reading: a header's number, a spoiling byte (2: none), a third byte, then the claims:
           # valid, with escaped names, with rules broken; under the first and the second header.
           printf '\000\002\000%s' '{"iss":"https://issuer.example","sub":"u","aud":"fuzz","exp":1800000600,"iat":1800000000,"nbf":1800000000,"jti":"j","client_id":"c","tenant_id":"t"}' > "$corpus/claims-valid"
           printf '\001\002\000%s' '{"iss":"https://issuer.example","s\u0075b":"u","aud":["fuzz"],"\u0065xp":1800000600,"iat":1800000000,"nbf":1800000000,"jti":"j","client_id":"c","tenant_id":"t","scope":"a b"}' > "$corpus/claims-escaped"
           printf '\000\001\007%s' '{"iss":"https://issuer.example","sub":"u","aud":"fuzz","exp":"1800000600","jti":"j","session_id":"s","nonce":"n"}' > "$corpus/claims-broken" ;;
    base64url) printf '%s\n' "$tokens" | tr '.' '\n' | sort -u | head -400 | while read -r t; do [ -z "$t" ] || printf '%s' "$t" > "$corpus/$(printf '%s' "$t" | sha1sum | cut -c1-16)"; done ;;
    json) printf '%s\n' "$tokens" | cut -d. -f1-2 | tr '.' '\n' | sort -u | head -300 | while read -r t; do
            [ -n "$t" ] && printf '%s' "$t" | tr '_-' '/+' | base64 -d 2>/dev/null > "$corpus/$(printf '%s' "$t" | sha1sum | cut -c1-16)" || true; done ;;
    session-id) for v in ses_AAAAAAAAAAAAAAAAAAAAAA ses_2w8cmNxD14TYILibe4MTmg rt_x eyJhbGciOiJub25lIn0.e30. ses_; do printf '%s' "$v" > "$corpus/$v"; done ;;
    request-target) for v in '/api/v1/../admin?x=1&access_token=T' '//api//v1/%2e%2E/x' '/a/..;b/%252e?%61ccess_token=1;b=2' '/a%2fb' '/./..' '/%7Eu/%c3%a9/.'; do
                      printf '%s' "$v" > "$corpus/$(printf '%s' "$v" | sha1sum | cut -c1-16)"; done ;;
    upstream-response) printf '\x05HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello' > "$corpus/sized"
                 printf '\x21HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;e=1\r\nhello\r\n0\r\nT: 1\r\n\r\n' > "$corpus/chunked"
                 printf '\x90HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 3\r\n\r\n' > "$corpus/head" ;;
    plain-request) printf 'GET /api/v1/x?a=1 HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer a.b.c\r\nConnection: keep-alive\r\n\r\n' > "$corpus/get"
                 printf 'POST /a HTTP/1.1\r\nContent-Length: 2\r\n\r\nhi' > "$corpus/post"
                 printf 'HEAD /a HTTP/1.1\r\nX-A:\t1\r\nX-B:\r\n\r\nGET /b HTTP/1.1\r\n\r\n' > "$corpus/pipelined"
                 printf 'GET /a HTTP/1.1\r\nConnection: Close\r\n\r\nGET /b HTTP/1.1\r\nConnection: keep-alive\r\nconnection: close\r\n\r\n' > "$corpus/close" ;;
    http2-frames) printf '\x01\x05\x00\x01\x02' > "$corpus/get-health"
                 printf '\x01\x04\x00\x01\x43\x00\x01\x00\x04\x00\x00\x00\x00\x09\x04\x00\x00' > "$corpus/post-route-continuation"
                 printf '\x01\x05\x00\x01\x42\x03\x00\x00\x04\x00\x00\x00\x08\x06\x00\x00\x08abcdefgh' > "$corpus/reset-ping" ;;
    answer-framing) printf '\x01\x00\x01\x0a\x0b\x06\x0c' > "$corpus/pipelined-mix"
                 printf '\x00\x0e\x01\x07\x0f\x03\x02\x04' > "$corpus/one-by-one-mix"
                 printf '\x03\x00\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b' > "$corpus/refused-target" ;;
    sign-in-redirect) for v in '/dashboard?x=1' '//evil.com' '/%2F/evil.com' 'https://app.example.com/x' 'https://grafana.example.com/' 'https://a@evil.com' '/a/%2e%2e/b'; do
                      printf '%s' "$v" > "$corpus/$(printf '%s' "$v" | sha1sum | cut -c1-16)"; done ;;
    mcp-body) i=0; for v in '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"get_issue","Name":"delete_repository"}}' \
                 '{"jsonrpc":"2.0","id":1,"method":"ping","Method":"tools/call"}' '{"jsonrpc":"2.0","id":1,"mEthod":"tools/call","method":"ping"}' \
                 '{"jsonrpc":"2.0","id":1,"method":"tools/call","paramſ":{"name":"x"},"params":{"name":"y"}}' \
                 '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","\u212aey":1,"key":2}}' \
                 '{"jsonrpc":"2.0","id":2,"result":{},"Method":"tools/call"}' '[{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"file:///a"}}]' \
                 '{"jsonrpc":"2.0","id":3,"method":"completion/complete","params":{"ref":{"type":"ref/prompt","name":"p"},"argument":{"name":"a","value":""}}}' \
                 '[{"jsonrpc":"2.0","id":2,"result":{},"Methvvv":"resources/read","params":{"Uri":"","id":1,"method":"resource/a"}}]'; do
                   i=$((i+1)); printf '%s' "$v" > "$corpus/seed$i"; done ;;
    form-fields) printf '%s' 'code=a%2Fb&state=s+t&iss=http%3A%2F%2F127.0.0.1' > "$corpus/callback"
                 printf '%s' 'logout_token=eyJ.eyJ.x&x=%C3%A9&=&a' > "$corpus/form" ;;
    agent-frame) printf '%s' '{"type":"ping"}' > "$corpus/ping"
                 printf '%s' '{"type":"intent","request_id":"r1","intent_type":"echo","payload":{"a":[1,2,{"b":null}]},"idempotency_key":"k"}' > "$corpus/intent" ;;
  esac
  [ -d "$VECTORS" ] || echo "fuzz.sh: no vectors at $VECTORS; seeds are minimal" >&2
}

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0}  # process-lifetime globals (the fixed key ring) are not leaks

# answer-framing's gateway: `portcullis serve` on loopback with the route /api/svc to the framing upstream.
FRAMING_WORK=
SERVE_PID=
UPSTREAM_PID=
stop_framing_gateway() {
  [ -n "$SERVE_PID" ] && kill "$SERVE_PID" 2>/dev/null && wait "$SERVE_PID" 2>/dev/null || true
  [ -n "$UPSTREAM_PID" ] && kill "$UPSTREAM_PID" 2>/dev/null && wait "$UPSTREAM_PID" 2>/dev/null || true
  SERVE_PID= UPSTREAM_PID=
  [ -n "$FRAMING_WORK" ] && rm -rf "$FRAMING_WORK"
  FRAMING_WORK=
}
trap stop_framing_gateway EXIT
start_framing_gateway() {
  BIN=${PORTCULLIS_BIN:-$ROOT/.build/debug/portcullis}
  if [ ! -x "$BIN" ] || [ ! -x "$(dirname "$BIN")/portcullis-probes" ]; then
    (cd "$ROOT" && swift build --product portcullis >/dev/null && swift build --product portcullis-probes >/dev/null)
  fi
  source "$ROOT/scripts/lib/gateway.sh"
  FRAMING_WORK=$(mktemp -d)
  local upstream_port=18611 gateway_port=18612
  "$(dirname "$BIN")/portcullis-probes" framing-upstream --port $upstream_port > "$FRAMING_WORK/upstream.log" 2>&1 & UPSTREAM_PID=$!
  start_serve "$FRAMING_WORK/gateway" $gateway_port "  routes: [\"/api/svc=http://127.0.0.1:$upstream_port\"]" "tokens:
  access_token_lifetime_seconds: 3600"
  login_bench_user "$FRAMING_WORK/gateway" $gateway_port
  export PORTCULLIS_FRAMING_PORT=$gateway_port PORTCULLIS_FRAMING_TOKEN=$TOKEN
}

status=0
for target in "${TARGETS[@]}"; do
  mkdir -p "$OUT/$target"
  case $target in
    token) build token "$ROOT/Fuzz/FuzzTokenVerify.swift" ;;
    json) build json "$ROOT/Fuzz/FuzzStrictJSON.swift" ;;
    base64url) build base64url "$ROOT/Fuzz/FuzzBase64URL.swift" ;;
    session-id) build session-id "$ROOT/Fuzz/FuzzSessionID.swift" ;;
    agent-frame) build agent-frame "$ROOT/Sources/Runtime/AgentFrame.swift" "$ROOT/Fuzz/FuzzAgentFrame.swift" ;;
    request-target) build request-target "$ROOT/Sources/TrafficCop/RequestTarget.swift" "$ROOT/Sources/TrafficCop/RequestTargetError.swift" "$ROOT/Sources/JOSE/Encoding/PercentEncoding.swift" "$ROOT/Fuzz/FuzzRequestTarget.swift" ;;
    plain-request) build plain-request "$ROOT/Sources/DataPlane/Front/PlainRequestHead.swift" "$ROOT/Fuzz/FuzzPlainRequest.swift" ;;
    form-fields) build form-fields "$ROOT/Sources/ProviderLogin/FormEncoding.swift" "$ROOT/Sources/JOSE/Encoding/PercentEncoding.swift" "$ROOT/Fuzz/FuzzFormFields.swift" ;;
    sign-in-redirect) build sign-in-redirect "$ROOT"/Sources/ProviderLogin/{SignInRedirect,ReturnTarget,FormEncoding}.swift "$ROOT/Sources/JOSE/Encoding/PercentEncoding.swift" "$ROOT/Sources/TrustedIssuers/LoopbackHost.swift" "$ROOT/Fuzz/FuzzSignInRedirect.swift" ;;
    answer-framing) build answer-framing "$ROOT/Sources/EdgeHTTP/OwedAnswers.swift" "$ROOT"/Tests/PortcullisTestSupport/{StrictAnswerReader,MixedRequests}.swift \
                      "$ROOT/Fuzz/FuzzAnswerFraming.swift"
                    start_framing_gateway ;;
    http2-frames) build http2-frames "$ROOT/Fuzz/FuzzHTTP2Frames.swift"
                  [ -n "$SERVE_PID" ] || start_framing_gateway ;;
    mcp-body) build mcp-body "$ROOT"/Sources/MCPPolicy/{MCPMessage,MCPBodyError,MCPRequestHeaders,MemberNameFold}.swift "$ROOT/Fuzz/FuzzMCPBody.swift" ;;
    upstream-response) build upstream-response "$ROOT"/Sources/DataPlane/Upstream/UpstreamResponse{Parser,Head,Error}.swift "$ROOT/Fuzz/FuzzUpstreamResponse.swift" ;;
    *) echo "fuzz.sh: unknown target $target" >&2; exit 2 ;;
  esac
  seed "$target"
  log="$OUT/$target/run.log"
  if (cd "$OUT/$target" && ./fuzz -max_total_time="$SECONDS_PER_TARGET" -max_len=8192 -detect_leaks=0 -print_final_stats=1 corpus > "$log" 2>&1); then
    execs=$(awk '/stat::number_of_executed_units/ {print $2}' "$log")
    cov=$(grep -oE 'cov: [0-9]+' "$log" | tail -1 | awk '{print $2}')
    ft=$(grep -oE 'ft: [0-9]+' "$log" | tail -1 | awk '{print $2}')
    corpus=$(ls "$OUT/$target/corpus" | wc -l)
    printf 'fuzz %-12s %10s execs in %ss, coverage %s edges (%s features), corpus %s, no crash\n' "$target" "$execs" "$SECONDS_PER_TARGET" "$cov" "$ft" "$corpus"
  else
    echo "fuzz $target: CRASH; input saved in $OUT/$target (see $log)"; tail -30 "$log"; status=1
  fi
done
exit $status
