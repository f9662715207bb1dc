#!/usr/bin/env bash
# 4k randread / randwrite QD32 through rdmablk-target (NVMe/TCP on 127.0.0.1, `rdmablk bench`) against an
# rbd namespace (librbd's cache on, its default), an rbd namespace with `rbd cache = false` (what
# docs/ceph-and-ana.md#ceph-gateway-a-group-of-targets-in-front-of-rbd-images recommends for multipath) and a
# file namespace of the same target in the same run, then `rbd bench` (librbd alone) on the same image; prints
# IOPS, rbd/file and rbd-namespace/librbd ratios (figures:
# docs/benchmarking.md#rbd-against-file).
#
#   bench/rbd_vs_file.sh BUILD_DIR [RUNTIME_S=10] [TARGET_CPU=1] [CLIENT_CPU=0]
#
# One target, `reactors: 1`, pinned (taskset) like bench/target_matrix.py; the bench pinned to CLIENT_CPU.
# nsid 1: file backend, O_DIRECT, 256 MiB in /var/tmp; nsid 2: rbd, a 256 MiB image on a throw-away
# cluster (tests/ceph/ceph-cluster: one memstore OSD, pool size 1) whose mon and OSD are NOT pinned: they
# share the machine's cores with the target and the bench, so the rbd figures include the whole Ceph
# write/read path on the same 2 cores. Both namespaces are filled first (sequential 128k writes), so the
# reads hit data (RBD reads of never-written objects short-circuit).
set -euo pipefail
BUILD=${1:?usage: $0 BUILD_DIR [RUNTIME_S] [TARGET_CPU] [CLIENT_CPU]}
RUNTIME=${2:-10}
TCPU=${3:-1}
CCPU=${4:-0}
SRC=$(cd "$(dirname "$0")/.." && pwd)
TARGET=$BUILD/target/rdmablk-target
CLI=$BUILD/initiator/rdmablk
W=$(mktemp -d /var/tmp/rdmablk-rbd-bench.XXXXXX)
NQN=nqn.2024-11.io.rdmablk:rbdbench
TPID=
cleanup() {
  [ -n "$TPID" ] && kill "$TPID" 2>/dev/null && wait "$TPID" 2>/dev/null || true
  "$SRC/tests/ceph/ceph-cluster" stop "$W/ceph" >/dev/null 2>&1 || true
  rm -rf "$W"
}
trap cleanup EXIT

t0=$(date +%s.%N)
CONF=$("$SRC/tests/ceph/ceph-cluster" start "$W/ceph" 2>/dev/null) || { rc=$?; [ $rc = 77 ] && echo "SKIP: no ceph" && exit 77; exit $rc; }
echo "cluster started in $(awk -v a="$(date +%s.%N)" -v b="$t0" 'BEGIN{printf "%.1f", a-b}') s"
rbd -c "$CONF" -n client.admin create --size 256M rbd/bench
rbd -c "$CONF" -n client.admin create --size 256M --image-feature layering rbd/bench-nocache
# The same cluster through a conf with the cache off (its own cluster connection in the target).
sed 's/^\[global\]$/[global]\nrbd cache = false/' "$CONF" > "$W/nocache.conf"
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
cat > "$W/target.yaml" <<EOF
listeners: [{transport: tcp, address: 127.0.0.1, port: $PORT}]
reactors: 1
subsystems:
  - nqn: $NQN
    allow_any_host: true
    namespaces:
      - {nsid: 1, backend: file, path: $W/file.img, size: 256MiB, direct: true}
      - {nsid: 2, backend: rbd, pool: rbd, image: bench, ceph_conf: $CONF, client: rdmablk}
      - {nsid: 3, backend: rbd, pool: rbd, image: bench-nocache, ceph_conf: $W/nocache.conf, client: rdmablk}
EOF
taskset -c "$TCPU" "$TARGET" --config "$W/target.yaml" > "$W/target.log" 2>&1 &
TPID=$!
for _ in $(seq 200); do grep -qs "rdmablk-target ready" "$W/target.log" && break; sleep 0.05; done
grep -q "rdmablk-target ready" "$W/target.log" || { cat "$W/target.log"; exit 1; }

# bench NSID RW BS QD [extra job lines] -> IOPS
bench() {
  local ns=$1 rw=$2 bs=$3 qd=$4 extra=${5:-}
  printf "[global]\nnamespace=%s\n\n[j]\nrw=%s\nbs=%s\niodepth=%s\n%b" "$ns" "$rw" "$bs" "$qd" "$extra" > "$W/job.fio"
  taskset -c "$CCPU" "$CLI" bench "$W/job.fio" -t tcp -a 127.0.0.1 -s "$PORT" -n "$NQN" --kato 30 \
    --output-format=json > "$W/out.json"
  python3 -c 'import json,sys; j=json.load(open(sys.argv[1]))["jobs"][0]; print(round(j["read"]["iops"]+j["write"]["iops"]))' "$W/out.json"
}
for ns in 1 2 3; do bench $ns write 128k 16 "size=256m\n" > /dev/null; done
declare -A iops
for rw in randread randwrite; do
  for ns in 1 2 3; do
    iops[$rw.$ns]=$(bench $ns $rw 4k 32 "runtime=$RUNTIME\nramp_time=2\ntime_based=1\n")
  done
done
ratio() { awk -v a="$1" -v b="$2" 'BEGIN{printf "%.2f", a/b}'; }
# librbd's own rate on the same image and cluster, in the same run (issue 27's yardstick for the rbd
# namespace): `rbd bench`, 32 ios in flight like the jobs above, sized to last about RUNTIME seconds at the
# rbd namespace's rate. Unpinned, like the cluster: it stands in for target and bench client together.
rbd_bench() {
  local rw=$1 total
  total=$(( ${iops[$rw.2]} * RUNTIME * 4096 ))
  rbd -c "$CONF" -n client.admin bench --io-type "${rw#rand}" --io-pattern rand --io-size 4K --io-threads 32 \
    --io-total "$total" rbd/bench 2>/dev/null | awk '/^elapsed:/ { for (i = 1; i < NF; i++) if ($i == "ops/sec:") print int($(i + 1)) }'
}
for rw in randread randwrite; do iops[$rw.librbd]=$(rbd_bench $rw); done
printf "%-22s %10s %10s %8s %14s %8s\n" case file rbd rbd/file "rbd cache off" ratio
for rw in randread randwrite; do
  printf "%-22s %10s %10s %8s %14s %8s\n" "4k $rw QD32" "${iops[$rw.1]}" "${iops[$rw.2]}" \
    "$(ratio "${iops[$rw.2]}" "${iops[$rw.1]}")" "${iops[$rw.3]}" "$(ratio "${iops[$rw.3]}" "${iops[$rw.1]}")"
done
printf "\n%-22s %10s %10s %14s\n" case "rbd ns" "librbd" "rbd ns/librbd"
for rw in randread randwrite; do
  printf "%-22s %10s %10s %14s\n" "4k $rw QD32" "${iops[$rw.2]}" "${iops[$rw.librbd]}" \
    "$(ratio "${iops[$rw.2]}" "${iops[$rw.librbd]}")"
done
