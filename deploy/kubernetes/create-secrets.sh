#!/usr/bin/env bash
# Creates (or updates) the Secrets the manifests mount, from a key directory
# made by deploy/make-keys.sh:
#
#   deploy/make-keys.sh keys
#   deploy/kubernetes/create-secrets.sh -n darkroom keys
#   deploy/kubernetes/create-secrets.sh -n darkroom --print keys > secrets.yaml   # write YAML, apply nothing
#   deploy/kubernetes/create-secrets.sh -n darkroom --only allow keys             # after changing keys/allow
#
# Secrets (every one labelled app.kubernetes.io/name=darkroom):
#   darkroom-broker-key    server.key_secret, server.key   the broker's key pair
#   darkroom-store-key     server.key_secret, server.key   the storage node's key pair
#   darkroom-worker-key    worker.key_secret, worker.key   the workers' key
#   darkroom-allow         every *.key in keys/allow       the allowlist both servers read
#   darkroom-producer-key  producer.key_secret             for producer pods in the cluster
#
# The admin key stays out of the cluster: use it from an operator's machine.
# Each command is `kubectl create secret generic ... --dry-run=client -o yaml
# | kubectl apply -f -`, so running this again updates the Secrets in place.
set -euo pipefail

kubectl=${KUBECTL:-kubectl}
namespace=()
print=false
only=""
while [ $# -gt 0 ]; do
  case "$1" in
    -n|--namespace) namespace=(--namespace "${2:?-n needs a namespace}"); shift 2 ;;
    --print) print=true; shift ;;
    --only) only=${2:?--only needs a Secret: broker-key, store-key, worker-key, allow or producer-key}; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//' >&2; exit 0 ;;
    -*) echo "create-secrets: unknown option $1" >&2; exit 64 ;;
    *) break ;;
  esac
done
[ $# -eq 1 ] || { echo "usage: create-secrets.sh [-n NAMESPACE] [--print] [--only NAME] KEYDIR" >&2; exit 64; }
keys=$1

need() {
  local f
  for f in "$@"; do
    [ -f "$keys/$f" ] || { echo "create-secrets: $keys/$f is missing; make the keys with deploy/make-keys.sh $keys" >&2; exit 1; }
  done
}

secret() {
  local name=$1; shift
  [ -z "$only" ] || [ "darkroom-$only" = "$name" ] || return 0
  local yaml
  yaml=$("$kubectl" create secret generic "$name" "${namespace[@]}" "$@" --dry-run=client -o yaml \
    | "$kubectl" label --local -f - app.kubernetes.io/name=darkroom app.kubernetes.io/part-of=darkroom -o yaml)
  if $print; then
    printf '%s\n---\n' "$yaml"
  else
    printf '%s\n' "$yaml" | "$kubectl" apply "${namespace[@]}" -f -
  fi
}

need broker/server.key_secret broker/server.key store/server.key_secret store/server.key \
  worker/worker.key_secret worker/worker.key producer/producer.key_secret
compgen -G "$keys/allow/*.key" >/dev/null || { echo "create-secrets: $keys/allow holds no .key files" >&2; exit 1; }

secret darkroom-broker-key --from-file="$keys/broker/server.key_secret" --from-file="$keys/broker/server.key"
secret darkroom-store-key --from-file="$keys/store/server.key_secret" --from-file="$keys/store/server.key"
secret darkroom-worker-key --from-file="$keys/worker/worker.key_secret" --from-file="$keys/worker/worker.key"
# Only the .key files: a directory may hold other files, which must not
# become part of the allowlist.
allow=()
for f in "$keys"/allow/*.key; do allow+=(--from-file="$f"); done
secret darkroom-allow "${allow[@]}"
secret darkroom-producer-key --from-file="$keys/producer/producer.key_secret"
