#!/usr/bin/env bash
# Shared probing benchmark: one and then two `certwatch run` replicas on one
# PostgreSQL state probe the same loopback TLS farm, and the leader's first
# probe run is timed.
#
# Everything runs inside a private network and mount namespace (unshare
# --net --mount) whose only interface is lo, as in bench/run.sh: the farm,
# a PostgreSQL server started here in a temporary directory (never the
# distribution's own cluster), and the replicas. The farm's hosts file is
# bind-mounted over /etc/hosts only inside it. Needs root (for unshare; the
# server then runs as the postgres user), Go, curl, GNU time and
# PostgreSQL's server binaries (initdb, postgres, createdb;
# /usr/lib/postgresql/*/bin or `pg_config --bindir`) with the
# pg_stat_statements module (contrib).
#
# Usage: bench/replicas.sh [-n 10000] [-s 100] [-c CONC] [-r 3] [-R "1 2"] [-o DIR] [-P] [-2|-3] [-N] [-S SECS] [-W] [-z]
#   -n N       endpoints in the farm (default 10000)
#   -s SIZE    daemon.shard_size, targets per shard (default 100)
#   -c CONC    probe.concurrency of every replica and of the scan
#              (default: certwatch's, 100)
#   -r REPS    runs per replica count, each on a fresh database; the table
#              shows medians (default 3), after one warm-up run (rep 0);
#              -r 0 makes the warm-up run alone, for a quick figure
#   -R COUNTS  replica counts to measure (default "1 2"); the repetitions
#              are interleaved (1, 2, 1, 2, ...) so that load from outside
#              the benchmark falls on both alike
#   -o DIR     keep binaries, farm files, configurations, logs and raw
#              figures in DIR (default: a new directory under /tmp)
#   -P         serve /debug/pprof on every replica (daemon.pprof) and save
#              each replica's heap profile every 5 s of a run
#              ($PROFILE_EVERY seconds if set) into its run's directory
#              (heap-REPLICA-SECONDS.pprof, with the replica's resident
#              memory then in rss-REPLICA.txt), and the
#              runtime's go_memstats 5 s after each run in
#              after-RUN-REPLICA.txt, where every run (with -P or not)
#              saves the replica's resident memory by kind then
#   -2         also wait for the leader's second probe run (probes every
#              4 minutes instead of 10, sweep_timeout 3m30s) and print
#              each replica's peak RSS during it alone (VmHWM reset after
#              the first): a run with the previous report and page still
#              held
#   -3         -2, and then the third run the same way: the steady state
#              (a second run still rewrites every renewal_missed alert,
#              whose message gains the name's history)
#   -N         notify on a channel (kind log, every tier from warning),
#              as a deployment does: each alert then records what the
#              channel was told, and a run's first storm goes out as a
#              summary
#   -S SECS    scrape every replica's /metrics every SECS seconds, as
#              Prometheus does, so that scrapes land on the runs' peaks
#              (without it, /metrics is read once after each run)
#   -W         after the first run, once the replicas hold what they keep
#              between runs, fetch the leader's status page (GET /) and
#              print its peak RSS while it renders the page, as a visit
#              between runs costs, and the most anonymous and file-backed
#              memory of it (sampled every 5 ms)
#   -z         find the farm as a DNS zone (farm.test, transferred from a
#              knotd started here, as bench/run.sh's scans do; needs knotd
#              and kdig) instead of as static targets resolved through its
#              hosts file, which Go's resolver keeps parsed (about 20 MB
#              for 100,000 names) where a daemon fed by zones holds none
# Every replica is `certwatch run --config FILE` with the defaults (one
# core each, probe.concurrency 100 unless -c, probe.per_address 2), the
# farm's names as static targets (or its zone, -z), notify.state on the run's own database
# and no channels. Per run: the leader's `probe run finished` duration, the wall
# time from the first replica's start to that line, shards written back by
# each replica, and, from the start to the notifier's `findings applied`,
# CPU of the replicas, of the farm and of PostgreSQL and the statements the
# run's database executed (pg_stat_statements), and each replica's peak
# RSS (VmHWM) at the end of that run, and its RSS 5 s later (printed, not
# tabled). Each repetition
# ends with a `certwatch scan` of the same targets (one process, no state)
# as the single-process reference under the same load.
# Environment: SHARED (default: ../shared beside the repository) holds
# bench/tlsfarm.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
shared=${SHARED:-$repo/../shared}
n=10000
shard_size=100
reps=3
counts="1 2"
conc=""
out=""
profile=0
scrape=0
second=0
runs=1
channel=0
zone=0
page=0
while getopts "n:s:c:r:R:o:P23NS:Wz" opt; do
	case $opt in
	n) n=$OPTARG ;;
	s) shard_size=$OPTARG ;;
	c) conc=$OPTARG ;;
	r) reps=$OPTARG ;;
	R) counts=$OPTARG ;;
	o) out=$OPTARG ;;
	P) profile=1 ;;
	S) scrape=$OPTARG ;;
	2) second=1 runs=2 ;;
	3) second=1 runs=3 ;;
	N) channel=1 ;;
	W) page=1 ;;
	z) zone=1 ;;
	*) awk 'NR > 1 && !/^#/ {exit} NR > 1' "$0" >&2; exit 2 ;;
	esac
done

# pg_bindir: the directory holding initdb, postgres and createdb.
pg_bindir() {
	local d
	for d in /usr/lib/postgresql/15/bin $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -t/ -k4 -rn) "$(pg_config --bindir 2>/dev/null || true)"; do
		[ -x "$d/initdb" ] && [ -x "$d/postgres" ] && [ -x "$d/createdb" ] && { echo "$d"; return 0; }
	done
	return 1
}

if [ -z "${CERTWATCH_BENCH_NS:-}" ]; then
	for tool in go unshare ip curl psql /usr/bin/time; do
		command -v "$tool" >/dev/null || { echo "bench: $tool not found" >&2; exit 2; }
	done
	pgbin=$(pg_bindir) || { echo "bench: PostgreSQL's initdb, postgres and createdb not found (install postgresql)" >&2; exit 2; }
	[ -e "$("$pgbin/pg_config" --pkglibdir 2>/dev/null || echo "$pgbin/../lib")/pg_stat_statements.so" ] ||
		{ echo "bench: pg_stat_statements not found beside $pgbin (PostgreSQL's contrib modules)" >&2; exit 2; }
	[ -d "$shared/bench/tlsfarm" ] || { echo "bench: $shared/bench/tlsfarm not found; set SHARED" >&2; exit 2; }
	out=${out:-$(mktemp -d /tmp/certwatch-replicas.XXXXXX)}
	mkdir -p "$out"
	out=$(cd "$out" && pwd)
	echo "bench: building certwatch and tlsfarm into $out" >&2
	(cd "$repo" && CGO_ENABLED=0 go build -o "$out/certwatch" ./cmd/certwatch)
	(cd "$shared/bench/tlsfarm" && CGO_ENABLED=0 go build -o "$out/tlsfarm" .)
	knotd=""
	if [ $zone = 1 ]; then
		knotd=$(command -v knotd || echo /usr/sbin/knotd)
		[ -x "$knotd" ] && command -v kdig >/dev/null || { echo "bench: -z needs knotd and kdig (install knot and knot-dnsutils)" >&2; exit 2; }
	fi
	exec env CERTWATCH_BENCH_NS=1 PGBIN="$pgbin" KNOTD="$knotd" GOVERSION="$(go version | awk '{print $3}')" unshare --net --mount -- \
		bash "$0" -n "$n" -s "$shard_size" ${conc:+-c "$conc"} -r "$reps" -R "$counts" -o "$out" $([ $profile = 1 ] && echo -P) $([ $runs -gt 1 ] && echo -$runs) $([ $channel = 1 ] && echo -N) $([ "$scrape" != 0 ] && echo -S "$scrape") $([ $page = 1 ] && echo -W) $([ $zone = 1 ] && echo -z)
fi

# ---- inside the namespace ----
ip link set lo up
cd "$out"
pids=()
replica_pids=()
pgdir=""
cleanup() {
	for p in "${replica_pids[@]}" "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	[ -n "$pgdir" ] && rm -rf "$pgdir"
	return 0
}
trap cleanup EXIT
trap 'exit 130' INT TERM
trap 'echo "bench: failed (exit $?) at line $LINENO: $BASH_COMMAND" >&2' ERR

# median, json_num, farm_totals
. "$repo/bench/farm.sh"

tick=$(getconf CLK_TCK)
# cpu_s PID: user + system CPU seconds of a live process
cpu_s() { awk -v t="$tick" '{sub(/^.*\) /, ""); print ($12 + $13) / t}' "/proc/$1/stat"; }
# pg_cpu_s: CPU seconds of the PostgreSQL server: the postmaster, its
# exited children (cutime, cstime) and its live ones.
pg_cpu_s() {
	# Processes come and go while /proc is read: one that vanished is
	# no loss, its CPU went to its parent's cutime.
	{ cat /proc/[0-9]*/stat 2>/dev/null || true; } | awk -v p="$pg_pid" -v t="$tick" '{
		pid = $1
		sub(/^.*\) /, "")
		if (pid == p) a += ($12 + $13 + $14 + $15) / t
		else if ($2 == p) a += ($12 + $13) / t
	} END {print a + 0}'
}

# cpu_ticks: "busy total" jiffies of the whole machine (/proc/stat), every
# process's included, the kernel's network processing too
cpu_ticks() { awk '$1 == "cpu" {t = 0; for (i = 2; i <= 9; i++) t += $i; print t - $5 - $6, t; exit}' /proc/stat; }

# dur_s DURATION: a Go duration string ("1m2.5s", "950ms") in seconds
dur_s() {
	awk -v d="$1" 'BEGIN {
		s = 0
		while (match(d, /^[0-9.]+(h|ms|µs|us|ns|m|s)/)) {
			t = substr(d, 1, RLENGTH); d = substr(d, RLENGTH + 1)
			match(t, /[0-9.]+/); v = substr(t, 1, RLENGTH); u = substr(t, RLENGTH + 1)
			if (u == "h") s += v * 3600; else if (u == "m") s += v * 60; else if (u == "s") s += v
			else if (u == "ms") s += v / 1000; else if (u == "µs" || u == "us") s += v / 1e6; else s += v / 1e9
		}
		printf "%.3f", s
	}'
}

# log_t FILES MSG first|last: the time (Unix seconds) of the first or last
# log line with message MSG in FILES, "" when there is none
log_t() {
	local which=$3 t
	t=$(cat $1 | grep "\"msg\":\"$2\"" | sed -n 's/.*"time":"\([^"]*\)".*/\1/p' | sort | { if [ "$which" = first ]; then head -n 1; else tail -n 1; fi; })
	[ -n "$t" ] && date -d "$t" +%s.%N
	return 0
}

# since A B: B - A in seconds, "-" when either is missing
since() { if [ -n "$1" ] && [ -n "$2" ]; then awk -v a="$1" -v b="$2" 'BEGIN {printf "%.3f", b - a}'; else echo -; fi; }

# field LINE KEY: a field of a JSON log line (string or number)
field() { sed -n "s/.*\"$2\":\"\{0,1\}\([^\",}]*\).*/\1/p" <<<"$1"; }

# ---- PostgreSQL, in a directory of its own ----
# initdb and postgres refuse root: as root they run as the postgres user
# (or nobody), in a directory under /tmp that user owns.
as_pg=()
pguser=$(id -un)
if [ "$(id -u)" = 0 ]; then
	pguser=$(id -u postgres >/dev/null 2>&1 && echo postgres || echo nobody)
	as_pg=(setpriv --reuid "$pguser" --regid "$(id -g "$pguser")" --clear-groups --)
fi
pgdir=$(mktemp -d /tmp/certwatch-replicas-pg.XXXXXX)
chmod 0755 "$pgdir"
[ "$(id -u)" = 0 ] && chown "$pguser:$(id -g "$pguser")" "$pgdir"
pgport=5432 # the namespace is private: nothing else listens in it
echo "bench: initdb in $pgdir (as $pguser)" >&2
env -i PATH="$PGBIN:/usr/bin:/bin" HOME="$pgdir" LC_ALL=C TZ=UTC "${as_pg[@]}" "$PGBIN/initdb" -D "$pgdir/data" -U certwatch -E UTF8 --locale=C \
	--no-sync --auth-local=trust --auth-host=trust >"$out/initdb.log" 2>&1 ||
	{ echo "bench: initdb failed; see $out/initdb.log" >&2; exit 1; }
# Durability is not what is measured; the rest is PostgreSQL's defaults.
env -i PATH="$PGBIN:/usr/bin:/bin" HOME="$pgdir" LC_ALL=C TZ=UTC "${as_pg[@]}" "$PGBIN/postgres" -D "$pgdir/data" -p "$pgport" \
	-c listen_addresses=127.0.0.1 -c unix_socket_directories="$pgdir" \
	-c fsync=off -c synchronous_commit=off -c full_page_writes=off \
	-c max_connections=200 -c dynamic_shared_memory_type=mmap -c logging_collector=off \
	-c log_min_messages=warning -c log_timezone=UTC \
	-c shared_preload_libraries=pg_stat_statements -c pg_stat_statements.track=top \
	-c pg_stat_statements.max=10000 >"$out/postgres.log" 2>&1 &
pg_pid=$!
pids+=("$pg_pid")
export PGHOST=127.0.0.1 PGPORT=$pgport PGUSER=certwatch PGDATABASE=postgres
for _ in $(seq 300); do
	psql -qAtc 'SELECT 1' >/dev/null 2>&1 && break
	kill -0 "$pg_pid" 2>/dev/null || { echo "bench: postgres exited; see $out/postgres.log" >&2; exit 1; }
	sleep 0.1
done
psql -qAtc 'CREATE EXTENSION pg_stat_statements' >/dev/null

# statements DB: "total claim write_back renew progress" statements the
# clients sent to the database so far, as pg_stat_statements counts them
# (top-level only, not those of triggers and foreign-key checks; BEGIN
# and COMMIT included; a pipelined batch is one round trip but several
# statements).
statements() {
	psql -qAt -F' ' -c "SELECT COALESCE(sum(calls), 0),
		COALESCE(sum(calls) FILTER (WHERE query LIKE 'UPDATE shards h SET holder%'), 0),
		COALESCE(sum(calls) FILTER (WHERE query LIKE '%UPDATE shards h SET result%'), 0),
		COALESCE(sum(calls) FILTER (WHERE query LIKE '%UPDATE shards h SET claim_until%'), 0),
		COALESCE(sum(calls) FILTER (WHERE query LIKE '%FILTER (WHERE h.done)%'), 0)
		FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid WHERE d.datname = '$1'"
}

# ---- the farm ----
per=$(($(ulimit -Hn) - 4096 - 64))
shards=$(((n + per - 1) / per))
farm=$out/farm
rm -rf "$farm"
echo "bench: starting a farm of $n endpoints ($shards shard(s))" >&2
for ((s = 0; s < shards; s++)); do
	"$out/tlsfarm" -n "$n" -shard "$s/$shards" -out "$farm" -max-duration 2h >"$out/farm-$s.log" 2>&1 &
	fp=$!
	pids+=("$fp")
	for _ in $(seq 6000); do
		[ -e "$farm/ready-$s-of-$shards" ] && break
		kill -0 "$fp" 2>/dev/null || { echo "bench: tlsfarm failed; see $out/farm-$s.log" >&2; exit 1; }
		sleep 0.2
	done
done
# The farm's names, resolved through its hosts file (only inside this
# namespace), so that every probe checks the certificate's name too; its
# addresses when the farm wrote no names. With -z, its zone instead.
if [ $zone = 1 ]; then
	[ -s "$farm/hosts" ] || { echo "bench: -z: the farm wrote no hosts file to make its zone of" >&2; exit 1; }
	zf=$(mktemp)
	farm_zone "$farm/hosts" >"$zf"
	start_knot farm.test "$out/knot-farm" "$zf"
	printf 'zones:\n  - {name: farm.test, nameserver: "127.0.0.1:53"}\n' >"$out/targets.yaml"
else
	if [ -s "$farm/targets-names.txt" ] && [ -s "$farm/hosts" ]; then
		mount --bind "$farm/hosts" /etc/hosts
		targets=$farm/targets-names.txt
	else
		targets=$farm/targets.txt
	fi
	{
		echo "targets:"
		sed 's/^/  - /' "$targets"
	} >"$out/targets.yaml"
fi
# The zone's addresses are loopback ones: probed only when allowed.
probe_keys=""
[ $zone = 0 ] || probe_keys="allow_loopback: true"
[ -z "$conc" ] || probe_keys="${probe_keys:+$probe_keys, }concurrency: $conc"
probe_conf=${probe_keys:+"probe: {$probe_keys}"}

# config DB: a replica's configuration on database DB
config() {
	cat <<-EOF
		# bench/replicas.sh: $n farm endpoints, shards of $shard_size
		ca_files: [$farm/ca.pem]
		$probe_conf
		notify:
		  state: postgres://certwatch@127.0.0.1:$pgport/$1?sslmode=disable
		$([ $channel = 1 ] && printf '  channels: [{name: certs, kind: log}]\n  routes: [{tiers: [warning, page, critical], channels: [certs]}]')
		daemon:
		  listen: 127.0.0.1:0
		  pprof: $([ $profile = 1 ] && echo true || echo false)
		  schedules:
		    discovery: "@every 1h"
		    probe: "@every $([ $second = 1 ] && echo 4m || echo 10m)"
		  jitter: 1s
		  sweep_timeout: $([ $second = 1 ] && echo 3m30s || echo 9m)
		  grace_period: 5s
		  leader_lease: 10s
		  shard_size: $shard_size
	EOF
	cat "$out/targets.yaml"
}

results=$out/results.tsv
printf 'replicas\trep\tduration_s\twall_s\tendpoints\tfailed\tcut_short\tshards_total\tshards_per_replica\treplica_cpu_s\tfarm_cpu_s\tpg_cpu_s\thandshakes\tstatements\tclaims\twrite_backs\trenewals\tprogress_polls\tload1\tfirst_claim_s\tprobing_s\tafter_s\tcpus_busy\n' >"$results"
load1() { cut -d' ' -f1 /proc/loadavg; }

# measure R REP: one run of R replicas on a fresh database
# save_after DIR N: what each replica (of rp) holds 5 s after its run N,
# into DIR/after-N-REPLICA.txt: its resident memory by kind
# (/proc/PID/status: anonymous, and pages of files, its binary's) and,
# with -P, the Go runtime's account of it (the go_memstats series of its
# /metrics: heap in use against allocated, stacks, the runtime's own).
save_after() {
	local i=0 a p
	for p in "${rp[@]}"; do
		i=$((i + 1))
		a=$(grep -om1 '"listen":"127.0.0.1:[0-9]*"' "$1/replica-$i.log" 2>/dev/null | cut -d'"' -f4) || true
		{
			grep -E '^(VmHWM|VmRSS|RssAnon|RssFile|RssShmem):' "/proc/$p/status"
			[ $profile = 1 ] && [ -n "$a" ] && curl -sf "http://$a/metrics" | grep -E '^go_(memstats|goroutines)'
		} >"$1/after-$2-$i.txt" 2>/dev/null || true
	done
}

# fetch_page DIR LEADER PID: the leader's status page, fetched between
# runs into DIR/page.html; prints the leader's peak RSS while it renders
# it (VmHWM reset before) and how long it took.
fetch_page() {
	local a t0 t1
	a=$(grep -om1 '"listen":"127.0.0.1:[0-9]*"' "$1/replica-$2.log" 2>/dev/null | cut -d'"' -f4) || return 0
	echo 5 >"/proc/$3/clear_refs"
	rm -f "$1/page.done"
	# The most anonymous memory (the heap, the runtime's) and the most
	# of the binary's pages resident as it renders, sampled every 5 ms:
	# VmHWM says only their sum.
	(
		anon=0 file=0
		while [ ! -e "$1/page.done" ]; do
			read -r an fi < <(awk '/^RssAnon:/ {a = $2} /^RssFile:/ {f = $2} END {print a + 0, f + 0}' "/proc/$3/status" 2>/dev/null)
			((an > anon)) && anon=$an
			((fi > file)) && file=$fi
			sleep 0.005
		done
		echo "$anon $file" >"$1/page.rss"
	) &
	local sampler=$!
	t0=$(date +%s.%N)
	curl -sf -o "$1/page.html" "http://$a/" || echo "bench: GET / of replica $2 failed" >&2
	t1=$(date +%s.%N)
	touch "$1/page.done"
	wait "$sampler"
	local split
	split=$(awk '{printf "%.1f MiB anonymous, %.1f MiB of files (the binary)", $1 / 1024, $2 / 1024}' "$1/page.rss")
	# The documents the replica keeps in its temporary directory
	# (unlinked files it holds open): the report, the page's rows, what
	# the next run carries forward.
	local kept="" fd
	for fd in /proc/"$3"/fd/*; do
		case "$(readlink "$fd")" in
		*/certwatch-*.json.gz*) kept="$kept $(stat -L -c %s "$fd")" ;;
		esac
	done
	echo "bench: kept in temporary files between runs (bytes):${kept:- none}" >&2
	echo "bench: status page between runs: $(wc -c <"$1/page.html") bytes in $(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.2f", b - a}') s, peak RSS while rendering $(awk '/^VmHWM:/ {printf "%.1f", $2 / 1024}' "/proc/$3/status") MiB (at most $split), RSS after $(awk '/^VmRSS:/ {printf "%.1f", $2 / 1024}' "/proc/$3/status") MiB" >&2
}

measure() {
	local r=$1 rep=$2 db="bench_r$1_$2" dir="$out/r$1-$2" i p line leader="" t0 t1
	rm -rf "$dir" && mkdir -p "$dir"
	"$PGBIN/createdb" "$db"
	config "$db" >"$dir/config.yaml"
	replica_pids=()
	local -n rp=replica_pids
	read -r fcpu0 hs0 < <(farm_totals)
	pcpu0=$(pg_cpu_s)
	local busy0="" ticks0 busy1 ticks1
	t0=$(date +%s.%N)
	for ((i = 1; i <= r; i++)); do
		"$out/certwatch" run --config "$dir/config.yaml" >"$dir/replica-$i.out" 2>"$dir/replica-$i.log" &
		rp+=($!)
	done
	local profiler="" every="${PROFILE_EVERY:-5}"
	if [ $profile = 1 ]; then
		(
			for ((s = 0; ; s += every)); do
				sleep "$every"
				for ((i = 1; i <= r; i++)); do
					a=$(grep -om1 '"listen":"127.0.0.1:[0-9]*"' "$dir/replica-$i.log" 2>/dev/null | cut -d'"' -f4) || continue
					curl -sf -o "$dir/heap-$i-$s.pprof" "http://$a/debug/pprof/heap" || true
					grep -E '^(VmRSS|RssAnon|RssFile)' "/proc/${rp[$((i - 1))]}/status" 2>/dev/null | tr -s ' \t' ' ' | paste -sd' ' |
						sed "s/^/$s /" >>"$dir/rss-$i.txt" || true
				done
			done
		) &
		profiler=$!
	fi
	local scraper=""
	if [ "$scrape" != 0 ]; then
		(
			while sleep "$scrape"; do
				for ((i = 1; i <= r; i++)); do
					a=$(grep -om1 '"listen":"127.0.0.1:[0-9]*"' "$dir/replica-$i.log" 2>/dev/null | cut -d'"' -f4) || continue
					curl -sf --compressed -o /dev/null "http://$a/metrics" || true
				done
			done
		) &
		scraper=$!
	fi
	# The leader's first probe run: at start, after discovery.
	for _ in $(seq 6000); do
		for ((i = 1; i <= r; i++)); do
			# The machine's CPU is read from the sweep's opening on.
			[ -z "$busy0" ] && grep -q '"msg":"probe run shared"' "$dir/replica-$i.log" && read -r busy0 ticks0 < <(cpu_ticks)
			if grep -q '"msg":"probe run finished"' "$dir/replica-$i.log"; then
				read -r busy1 ticks1 < <(cpu_ticks)
				leader=$i
				break 2
			fi
			kill -0 "${rp[$((i - 1))]}" 2>/dev/null || { echo "bench: replica $i exited; see $dir/replica-$i.log:" >&2; tail -n 20 "$dir/replica-$i.log" >&2; exit 1; }
		done
		sleep 0.1
	done
	[ -n "$leader" ] || { echo "bench: no probe run finished within 10 minutes; see $dir" >&2; exit 1; }
	line=$(grep -m1 '"msg":"probe run finished"' "$dir/replica-$leader.log")
	t1=$(date -d "$(field "$line" time)" +%s.%N)
	# The run ends with the notifier applying its findings; CPU and
	# statements are read after that, so each run counts the same work.
	for _ in $(seq 300); do
		grep -q '"msg":"findings applied"' "$dir/replica-$leader.log" && break
		sleep 0.1
	done
	local cpu=0 per_replica=()
	for ((i = 1; i <= r; i++)); do
		cpu=$(awk -v a="$cpu" -v b="$(cpu_s "${rp[$((i - 1))]}")" 'BEGIN {print a + b}')
		per_replica+=("$(grep -c '"msg":"probe shard written back"' "$dir/replica-$i.log" || true)")
	done
	pcpu1=$(pg_cpu_s)
	[ -n "$busy0" ] || read -r busy0 ticks0 < <(echo "$busy1 $ticks1")
	read -r stmts claims backs renews polls < <(statements "$db")
	psql -qAt -F' ' -c "SELECT calls, left(regexp_replace(query, '\s+', ' ', 'g'), 140) FROM pg_stat_statements s
		JOIN pg_database d ON d.oid = s.dbid WHERE d.datname = '$db' ORDER BY calls DESC" >"$dir/statements.txt"
	# Each replica's peak resident memory so far (VmHWM), read before it
	# is stopped: the daemon's start, discovery, its first shared probe
	# run and the notifier's apply.
	local hwm=()
	for p in "${rp[@]}"; do
		hwm+=("$(awk '/^VmHWM:/ {printf "%.1f", $2 / 1024}' "/proc/$p/status" 2>/dev/null || echo -)")
	done
	# And what each holds between runs: its resident memory (VmRSS) 5 s
	# after the run was notified, once it gave back what the run freed.
	sleep 5
	local after=()
	for p in "${rp[@]}"; do
		after+=("$(awk '/^VmRSS:/ {printf "%.1f", $2 / 1024}' "/proc/$p/status" 2>/dev/null || echo -)")
	done
	save_after "$dir" 1
	[ $page = 1 ] && fetch_page "$dir" "$leader" "${rp[$((leader - 1))]}"
	local shared total
	shared=$(grep -m1 '"msg":"probe run shared"' "$dir/replica-$leader.log" || true)
	total=$(field "$shared" shards)
	# Where the run's time goes: from the sweep's opening to the first
	# claim of any replica, to the last shard written back, and from that
	# to the leader's end of the run (closing the sweep, evaluating).
	local topen tclaim tback
	topen=$(log_t "$dir/replica-$leader.log" "probe run shared" first)
	tclaim=$(log_t "$dir/replica-*.log" "probe shard claimed" first)
	tback=$(log_t "$dir/replica-*.log" "probe shard written back" last)
	read -r fcpu1 hs1 < <(farm_totals)
	local k
	for ((k = 2; k <= runs; k++)); do
		# Run k: each replica's peak from its start alone.
		for p in "${rp[@]}"; do echo 5 >"/proc/$p/clear_refs"; done
		for _ in $(seq 6000); do
			[ "$(grep -c '"msg":"findings applied"' "$dir/replica-$leader.log")" -ge $k ] && break
			sleep 0.1
		done
		local hwmk=() afterk=() linek
		for p in "${rp[@]}"; do
			hwmk+=("$(awk '/^VmHWM:/ {printf "%.1f", $2 / 1024}' "/proc/$p/status" 2>/dev/null || echo -)")
		done
		sleep 5
		for p in "${rp[@]}"; do
			afterk+=("$(awk '/^VmRSS:/ {printf "%.1f", $2 / 1024}' "/proc/$p/status" 2>/dev/null || echo -)")
		done
		save_after "$dir" $k
		linek=$(grep '"msg":"probe run finished"' "$dir/replica-$leader.log" | sed -n ${k}p)
		echo "bench: $r replica(s) rep $rep, run $k: run $(field "$linek" duration), peak RSS during it $(IFS=+; echo "${hwmk[*]}") MiB, RSS after it $(IFS=+; echo "${afterk[*]}") MiB" >&2
	done
	# Profiles go on through the later runs (-2, -3), until the replicas stop.
	[ -n "$profiler" ] && { kill "$profiler" 2>/dev/null || true; wait "$profiler" 2>/dev/null || true; }
	[ -n "$scraper" ] && { kill "$scraper" 2>/dev/null || true; wait "$scraper" 2>/dev/null || true; }
	for p in "${rp[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
	for p in "${rp[@]}"; do wait "$p" 2>/dev/null || true; done
	replica_pids=()
	local dur wall joined
	dur=$(dur_s "$(field "$line" duration)")
	wall=$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.3f", b - a}')
	joined=$(IFS=+; echo "${per_replica[*]}")
	printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%.2f\t%.2f\t%.2f\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$r" "$rep" "$dur" "$wall" \
		"$(field "$line" endpoints)" "$(field "$line" failed)" "$(field "$line" cut_short)" "${total:--}" "$joined" \
		"$cpu" "$(awk -v a="$fcpu0" -v b="$fcpu1" 'BEGIN {print b - a}')" "$(awk -v a="$pcpu0" -v b="$pcpu1" 'BEGIN {print b - a}')" \
		"$((hs1 - hs0))" "$stmts" "$claims" "$backs" "$renews" "$polls" "$(load1)" \
		"$(since "$topen" "$tclaim")" "$(since "$topen" "$tback")" "$(since "$tback" "$t1")" \
		"$(awk -v b="$((busy1 - busy0))" -v t="$((ticks1 - ticks0))" -v c="$(nproc)" 'BEGIN {printf "%.2f", t ? b / t * c : 0}')" >>"$results"
	echo "bench: $r replica(s) rep $rep: run ${dur}s (wall ${wall}s from start), endpoints $(field "$line" endpoints), failed $(field "$line" failed), shards ${total:--} written back $joined, replica CPU ${cpu}s, $((hs1 - hs0)) handshakes, peak RSS $(IFS=+; echo "${hwm[*]}") MiB, RSS after the run $(IFS=+; echo "${after[*]}") MiB" >&2
	# A leadership lost during the run (a lease not renewed in time) makes
	# the figures of a failover, not of a run: say so.
	local lost
	lost=$(cat "$dir"/replica-*.log | grep -c '"msg":"leadership lost' || true)
	[ "$lost" = 0 ] || echo "bench: WARNING: $lost leadership(s) lost during $r replica(s) rep $rep (see $dir/replica-*.log)" >&2
}

# scan_ref REP: the same targets through `certwatch scan` (no state, no
# replicas), the single-process reference on the same machine and load.
scan_ref() {
	local rep=$1 dir="$out/scan-$1" wall user sys failed
	rm -rf "$dir" && mkdir -p "$dir"
	{
		echo "ca_files: [$farm/ca.pem]"
		echo "$probe_conf"
		cat "$out/targets.yaml"
	} >"$dir/scan.yaml"
	read -r fcpu0 hs0 < <(farm_totals)
	read -r busy0 ticks0 < <(cpu_ticks)
	/usr/bin/time -f '%e %U %S' -o "$dir/time.txt" "$out/certwatch" scan --config "$dir/scan.yaml" --output json >"$dir/report.json" 2>"$dir/scan.log" || true
	read -r busy1 ticks1 < <(cpu_ticks)
	read -r fcpu1 hs1 < <(farm_totals)
	read -r wall user sys < <(tail -n 1 "$dir/time.txt")
	failed=$(grep -c '"failure": ' "$dir/report.json" || true)
	printf 'scan\t%s\t%s\t%s\t%s\t%s\t-\t-\t-\t%.2f\t%.2f\t0\t%s\t0\t0\t0\t0\t0\t%s\t-\t-\t-\t%s\n' "$rep" "$wall" "$wall" "$n" "$failed" \
		"$(awk -v u="$user" -v s="$sys" 'BEGIN {print u + s}')" "$(awk -v a="$fcpu0" -v b="$fcpu1" 'BEGIN {print b - a}')" "$((hs1 - hs0))" "$(load1)" \
		"$(awk -v b="$((busy1 - busy0))" -v t="$((ticks1 - ticks0))" -v c="$(nproc)" 'BEGIN {printf "%.2f", t ? b / t * c : 0}')" >>"$results"
	echo "bench: scan rep $rep: ${wall}s, CPU $(awk -v u="$user" -v s="$sys" 'BEGIN {print u + s}')s, $((hs1 - hs0)) handshakes" >&2
}

# A warm-up run first (rep 0, left out of the medians): the farm's and the
# page cache's first touch would otherwise fall on the first count only.
measure "${counts%% *}" 0
for rep in $(seq "$reps"); do
	for r in $counts; do
		measure "$r" "$rep"
	done
	scan_ref "$rep"
done

# ---- the table ----
echo
echo "certwatch replicas bench ($(nproc) CPUs shared by the farm, PostgreSQL and the replicas; $GOVERSION; $(date -u +%Y-%m-%d); $n endpoints, shard_size $shard_size, probe.concurrency ${conc:-default}; load average after each run (1 min) $(awk -F'\t' 'NR > 1 {print $19}' "$results" | sort -g | sed -n '1p;$p' | paste -sd- -); raw figures in $results)"
echo
echo "run: the leader's probe run duration; of it, from the sweep's opening to the first shard claimed (first claim), to the last one written back (probing), and from that to the end of the run (after: closing the sweep, evaluating, publishing). CPUs busy: the whole machine's, every process's included, from the sweep's opening to the end of the run, in CPUs (of $(nproc))"
echo
printf '| %8s | %3s | %6s | %11s | %7s | %7s | %9s | %6s | %6s | %17s | %13s | %10s | %8s | %9s | %10s | %10s |\n' replicas rep "run s" "first claim" probing after endpoints failed shards "written back each" "replica CPU s" "farm CPU s" "pg CPU s" "CPUs busy" handshakes statements
printf '|%s|%s|%s|%s|%s|%s|%s|%s|%s|%s|%s|%s|%s|%s|%s|%s|\n' ---------: ----: -------: ------------: --------: --------: ----------: -------: -------: ------------------: --------------: -----------: ---------: ----------: -----------: -----------:
awk -F'\t' 'NR > 1 {printf "| %8s | %3s | %6.2f | %11s | %7s | %7s | %9s | %6s | %6s | %17s | %13.2f | %10.2f | %8.2f | %9s | %10s | %10s |\n", $1, $2, $3, $20, $21, $22, $5, $6, $8, $9, $10, $11, $12, $23, $13, $14}' "$results"
echo
for r in $counts scan; do
	[ "$reps" -gt 0 ] || break # -r 0: the warm-up run alone, no medians
	col() { awk -F'\t' -v r="$r" "NR > 1 && \$1 == r && \$2 > 0 {print $1}" "$results" | median; }
	[ "$r" = scan ] && { printf 'Medians of %s, certwatch scan of the same targets (one process, no state): %.2f s, CPU %.2f s, farm CPU %.2f s\n' "$reps" "$(col '$3')" "$(col '$10')" "$(col '$11')"; continue; }
	printf 'Medians of %s, %s replica(s): run %.2f s (first claim %.2f s, probing %.2f s, after %.2f s), wall from start %.2f s, replica CPU %.2f s, farm CPU %.2f s, PostgreSQL CPU %.2f s; %s statements, of them %s claims (%s of them finding no shard), %s write-backs, %s renewals, %s progress polls\n' \
		"$reps" "$r" "$(col '$3')" "$(col '$20')" "$(col '$21')" "$(col '$22')" "$(col '$4')" "$(col '$10')" "$(col '$11')" "$(col '$12')" "$(col '$14')" "$(col '$15')" "$(col '$15 - $8')" "$(col '$16')" "$(col '$17')" "$(col '$18')"
done
first=${counts%% *}
last=${counts##* }
if [ "$first" != "$last" ]; then
	a=$(awk -F'\t' -v r="$first" 'NR > 1 && $1 == r && $2 > 0 {print $3}' "$results" | median)
	b=$(awk -F'\t' -v r="$last" 'NR > 1 && $1 == r && $2 > 0 {print $3}' "$results" | median)
	printf '%s replicas against %s: %.2fx the run duration (below 1: faster)\n' "$last" "$first" "$(awk -v a="$a" -v b="$b" 'BEGIN {print b / a}')"
fi
echo "Statements per database, most called first: $out/r*-*/statements.txt"
