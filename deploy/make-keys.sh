#!/usr/bin/env bash
# Makes the CURVE keys a Darkroom deployment needs, laid out the way the
# Kubernetes Secrets, the Compose bind mounts and the systemd units read them.
#
#   deploy/make-keys.sh DIR                      # the whole set (refuses to overwrite)
#   deploy/make-keys.sh --add NAME ROLE DIR      # one more client key (producer, worker or admin)
#
# Options (before DIR):
#   --group GID      make the broker, store and worker secrets readable by this
#                    group (files 0440 root:GID, directories 0750 root:GID), as
#                    containers running as GID need them; needs root.
#                    Compose: sudo deploy/make-keys.sh --group 10001 deploy/compose/keys
#   --darkroom PATH  the darkroom executable (default: darkroom on PATH).
#
# The layout (every secret file is mode 0600, or 0440 with --group):
#
#   DIR/broker/server.key_secret  server.key   the broker's key pair
#   DIR/store/server.key_secret   server.key   the storage node's key pair
#   DIR/servers/broker.key  store.key          the two public keys, for clients and workers
#   DIR/allow/*.key                            the allowlist: every client's public key, with its role
#   DIR/worker/worker.key_secret               the workers' key (role worker)
#   DIR/producer/producer.key_secret           a producer key (submit, watch, status, job, cancel one job, ls, get)
#   DIR/admin/admin.key_secret                 an admin key (dead retry|discard, rm, everything)
#
# Only files ending in .key_secret are secret. Give each client its own
# directory and DIR/servers; give the servers their own directory and DIR/allow.
set -euo pipefail

usage() { sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//' >&2; exit 64; }

darkroom=${DARKROOM:-darkroom}
group=""
add_name=""
add_role=""
while [ $# -gt 0 ]; do
  case "$1" in
    --group) group=${2:?--group needs a group id}; shift 2 ;;
    --darkroom) darkroom=${2:?--darkroom needs a path}; shift 2 ;;
    --add) add_name=${2:?--add needs NAME ROLE}; add_role=${3:?--add needs NAME ROLE}; shift 3 ;;
    -h|--help) usage ;;
    -*) echo "make-keys: unknown option $1" >&2; usage ;;
    *) break ;;
  esac
done
[ $# -eq 1 ] || usage
dir=$1

command -v "$darkroom" >/dev/null || { echo "make-keys: no darkroom executable ($darkroom); pass --darkroom PATH" >&2; exit 1; }
if [ -n "$group" ] && [ "$(id -u)" -ne 0 ]; then
  echo "make-keys: --group $group changes file ownership and needs root (sudo)" >&2
  exit 1
fi
umask 077

# keygen NAME ROLE|"" DEST_DIR BASENAME: NAME.key(_secret) made by darkroom
# keygen, stored as DEST_DIR/BASENAME.key(_secret).
keygen() {
  local name=$1 role=$2 dest=$3 base=$4 tmp
  if [ -e "$dest/$base.key_secret" ] || [ -e "$dest/$base.key" ]; then
    echo "make-keys: $dest/$base.key_secret already exists; not replacing a key (remove it first to make a new one)" >&2
    exit 1
  fi
  tmp=$(mktemp -d)
  if [ -n "$role" ]; then
    "$darkroom" keygen "$name" --role "$role" --dir "$tmp" >/dev/null
  else
    "$darkroom" keygen "$name" --dir "$tmp" >/dev/null
  fi
  mkdir -p "$dest"
  chmod 0700 "$dest"
  mv "$tmp/$name.key_secret" "$dest/$base.key_secret"
  mv "$tmp/$name.key" "$dest/$base.key"
  rmdir "$tmp"
  chmod 0600 "$dest/$base.key_secret"
  chmod 0644 "$dest/$base.key"
}

public_dir() { mkdir -p "$1"; chmod 0755 "$1"; }

# A client key: DIR/NAME/NAME.key_secret, its public key in DIR/allow.
client() {
  local name=$1 role=$2
  case "$name" in broker|store|servers|allow) echo "make-keys: '$name' names a directory of the layout; pick another name" >&2; exit 1 ;; esac
  if [ -e "$dir/allow/$name.key" ]; then
    echo "make-keys: $dir/allow/$name.key already exists; not replacing a key" >&2
    exit 1
  fi
  keygen "$name" "$role" "$dir/$name" "$name"
  public_dir "$dir/allow"
  cp "$dir/$name/$name.key" "$dir/allow/$name.key"
  chmod 0644 "$dir/allow/$name.key"
}

# Containers read their secrets through a group (the image's user 10001);
# clients used from the host stay with the user who ran sudo.
finish() {
  local d
  if [ -n "$group" ]; then
    for d in broker store worker; do
      [ -d "$dir/$d" ] || continue
      chown -R "0:$group" "$dir/$d"
      chmod 0750 "$dir/$d"
      chmod 0440 "$dir/$d"/*.key_secret
      chmod 0444 "$dir/$d"/*.key
    done
  fi
  if [ -n "${SUDO_UID:-}" ]; then
    for d in "$dir"/*/; do
      d=${d%/}
      case "$(basename "$d")" in broker|store|worker|allow|servers) ;; *) chown -R "$SUDO_UID:${SUDO_GID:-$SUDO_UID}" "$d" ;; esac
    done
  fi
}

public_dir "$dir"

if [ -n "$add_name" ]; then
  case "$add_role" in producer|worker|admin) ;; *) echo "make-keys: ROLE must be producer, worker or admin, not '$add_role'" >&2; exit 64 ;; esac
  client "$add_name" "$add_role"
  finish
  echo "made $dir/$add_name/$add_name.key_secret ($add_role) and added $dir/allow/$add_name.key"
  echo "now give the servers the new allowlist (deploy/README.md, \"Adding and revoking keys\")"
  exit 0
fi

# The servers' own key pairs: no role, so an allowlist that holds one admits
# nothing with it. One pair each, so neither server can pose as the other.
keygen broker "" "$dir/broker" server
keygen store "" "$dir/store" server
public_dir "$dir/servers"
cp "$dir/broker/server.key" "$dir/servers/broker.key"
cp "$dir/store/server.key" "$dir/servers/store.key"
chmod 0644 "$dir/servers"/*.key

client worker worker
client producer producer
client admin admin
finish

echo "made the keys in $dir:"
( cd "$dir" && find . -type f | sort | sed 's|^\./|  |' )
