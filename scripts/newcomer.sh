#!/usr/bin/env bash
# The response layer as a newcomer meets it (not part of CI: a minute of real servers): packs the
# tarball, installs it into an empty temp project, links the peers a user would install (graphql,
# @apollo/server, graphql-yoga, ioredis) from this checkout's node_modules, starts a throwaway
# redis-server on a free port of 127.0.0.1 (or uses REDIS_URL), and runs scripts/newcomer.mjs
# there: cold identical queries → 1 execution (Apollo, Yoga, and two servers on one Redis),
# read-after-write through a mutation, PRIVATE answers never crossing sessions.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
tmp="$(mktemp -d)"
redis_pid=""
cleanup() {
  if [ -n "$redis_pid" ]; then kill "$redis_pid" 2>/dev/null || true; fi
  rm -rf "$tmp"
}
trap cleanup EXIT

tarball="$(cd "$root" && npm pack --silent --pack-destination "$tmp" | tail -n 1)"
echo "packed $tarball"
mkdir "$tmp/app" && cd "$tmp/app"
npm init -y >/dev/null
npm pkg set type=module >/dev/null
npm install --no-audit --no-fund --silent --prefer-offline "$tmp/$tarball"
for peer in graphql @apollo/server graphql-yoga ioredis; do
  mkdir -p "$(dirname "node_modules/$peer")"
  ln -s "$root/node_modules/$peer" "node_modules/$peer"
done
cp "$root/scripts/newcomer.mjs" .

if [ -z "${REDIS_URL:-}" ]; then
  port="$(node -e "const s=require('net').createServer().listen(0,'127.0.0.1',()=>{console.log(s.address().port);s.close()})")"
  redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --daemonize no >"$tmp/redis.log" 2>&1 &
  redis_pid=$!
  for _ in $(seq 50); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
  export REDIS_URL="redis://127.0.0.1:$port"
fi
NODE_ENV=production node newcomer.mjs
