#!/usr/bin/env bash
# Fleet-scale benchmark of certwatch: scans of a loopback TLS farm at several
# sizes, and a zone transfer of a million records compared with kdig.
#
# Everything runs inside a private network and mount namespace (unshare
# --net --mount) whose only interface is lo: nothing can reach or be reached
# from another host, and the farm's hosts file is bind-mounted over
# /etc/hosts only inside it. Needs root (or CAP_SYS_ADMIN for unshare),
# Go, knotd, kdig, curl and GNU time (/usr/bin/time).
#
# Usage: bench/run.sh [-n "1000 10000 100000"] [-c 100] [-r 3] [-o DIR] [-x FLAGS] [-t TLSX] [-s] [-A] [-S]
#   -n SIZES   endpoint counts to scan (default "1000 10000 100000")
#   -c CONCS   --concurrency values to scan with (default 100)
#   -r REPS    scans per size; the table shows medians (default 3)
#   -o DIR     keep binaries, farm files, reports and raw figures in DIR
#              (default: a new directory under /tmp)
#   -x FLAGS   extra flags for every scan, e.g. -x --post-quantum
#   -t TLSX    also scan the farm with this tlsx binary (projectdiscovery's
#              TLS scanner, built by you; not part of certwatch): a "tlsx"
#              row per size, same addresses and concurrency, its defaults
#              otherwise (no chain verification, 5 s timeout)
#   -s         also scan the names through static targets (a --config
#              listing name:port, resolved through the farm's hosts file)
#   -A         skip the zone-transfer benchmark
#   -S         skip the scans
# Each size also gets a "floor" row: bench/floor, crypto/tls alone (dial, a
# P-256 handshake, close; no verification, nothing kept) on one core at the
# same concurrency, the least any Go prober spends per endpoint here.
# Environment: SHARED (default: ../shared beside the repository) holds
# bench/tlsfarm; AXFR_RECORDS (default 1000000) sizes the zone transfer.
# Replicas sharing the probe work on one PostgreSQL state: bench/replicas.sh.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
shared=${SHARED:-$repo/../shared}
sizes="1000 10000 100000"
concs=100
reps=3
out=""
static=0
axfr=1
scans=1
extra=""
tlsx=""
while getopts "n:c:r:o:x:t:sAS" opt; do
	case $opt in
	n) sizes=$OPTARG ;;
	c) concs=$OPTARG ;;
	r) reps=$OPTARG ;;
	o) out=$OPTARG ;;
	x) extra=$OPTARG ;;
	t) tlsx=$OPTARG ;;
	s) static=1 ;;
	A) axfr=0 ;;
	S) scans=0 ;;
	*) sed -n '2,31p' "$0" >&2; exit 2 ;;
	esac
done

if [ -z "${CERTWATCH_BENCH_NS:-}" ]; then
	for tool in go unshare ip curl kdig /usr/bin/time; do
		command -v "$tool" >/dev/null || { echo "bench: $tool not found" >&2; exit 2; }
	done
	knotd=$(command -v knotd || echo /usr/sbin/knotd)
	[ -x "$knotd" ] || { echo "bench: knotd not found (install knot)" >&2; exit 2; }
	[ -d "$shared/bench/tlsfarm" ] || { echo "bench: $shared/bench/tlsfarm not found; set SHARED" >&2; exit 2; }
	out=${out:-$(mktemp -d /tmp/certwatch-bench.XXXXXX)}
	mkdir -p "$out"
	out=$(cd "$out" && pwd)
	echo "bench: building certwatch and tlsfarm into $out" >&2
	(cd "$repo" && CGO_ENABLED=0 go build -o "$out/certwatch" ./cmd/certwatch && CGO_ENABLED=0 go build -o "$out/floor" ./bench/floor)
	(cd "$shared/bench/tlsfarm" && CGO_ENABLED=0 go build -o "$out/tlsfarm" .)
	if [ -n "$tlsx" ]; then
		cp "$tlsx" "$out/tlsx" || { echo "bench: -t $tlsx: not a file" >&2; exit 2; }
	fi
	exec env CERTWATCH_BENCH_NS=1 KNOTD="$knotd" unshare --net --mount -- \
		bash "$0" -n "$sizes" -c "$concs" -r "$reps" -o "$out" -x "$extra" -t "$tlsx" $([ $static = 1 ] && echo -s) $([ $axfr = 0 ] && echo -A) $([ $scans = 0 ] && echo -S)
fi

# ---- inside the namespace ----
ip link set lo up
cd "$out"
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# median, json_num, farm_totals
. "$repo/bench/farm.sh"

stop_pid() {
	kill "$1" 2>/dev/null || true
	wait "$1" 2>/dev/null || true
}

results=$out/results.tsv
printf 'mode\tendpoints\tconcurrency\trep\twall_s\tuser_s\tsys_s\tmaxrss_kib\tfarm_cpu_s\thandshakes\tfailed_endpoints\tload1\n' >"$results"
load1() { cut -d' ' -f1 /proc/loadavg; }

if [ $scans = 1 ]; then
	for n in $sizes; do
		# A shard needs a file descriptor per listener plus 4096 for
		# connections; split the farm to stay under the hard limit.
		per=$(($(ulimit -Hn) - 4096 - 64))
		shards=$(((n + per - 1) / per))
		farm=$out/farm-$n
		rm -rf "$farm"
		farm_pids=()
		echo "bench: starting a farm of $n endpoints ($shards shard(s))" >&2
		for ((s = 0; s < shards; s++)); do
			"$out/tlsfarm" -n "$n" -shard "$s/$shards" -out "$farm" -max-duration 2h >"$out/farm-$n-$s.log" 2>&1 &
			farm_pids+=($!)
			pids+=($!)
			for _ in $(seq 6000); do
				[ -e "$farm/ready-$s-of-$shards" ] && break
				kill -0 "${farm_pids[$s]}" 2>/dev/null || { echo "bench: tlsfarm failed; see $out/farm-$n-$s.log" >&2; exit 1; }
				sleep 0.2
			done
		done
		mount --bind "$farm/hosts" /etc/hosts # names resolve only inside this namespace

		# The farm's names as a DNS zone (A records), transferred by
		# certwatch: its normal way to find endpoints.
		zf=$(mktemp)
		farm_zone "$farm/hosts" >"$zf"
		start_knot farm.test "$out/knot-farm" "$zf"

		modes="zone"
		if [ $static = 1 ]; then
			modes="zone static"
			{
				echo "targets:"
				sed 's/^/  - /' "$farm/targets-names.txt"
			} >"$farm/static.yaml"
		fi
		for mode in $modes; do
			for c in $concs; do
				for r in $(seq "$reps"); do
					if [ "$mode" = zone ]; then
						cmd=("$out/certwatch" scan --zone farm.test --nameserver 127.0.0.1:53)
					else
						cmd=("$out/certwatch" scan --config "$farm/static.yaml")
					fi
					cmd+=(--ca-file "$farm/ca.pem" --allow-loopback --concurrency "$c" --output json)
					# shellcheck disable=SC2206 # FLAGS split on spaces, as documented
					[ -n "$extra" ] && cmd+=($extra)
					read -r cpu0 hs0 < <(farm_totals)
					/usr/bin/time -f '%e %U %S %M' -o "$out/time.txt" "${cmd[@]}" >"$out/report-$mode-$n.json" 2>"$out/scan-$mode-$n.err" || true
					read -r cpu1 hs1 < <(farm_totals)
					read -r wall user sys rss < <(tail -n 1 "$out/time.txt")
					failed=$(grep -c '"failure": ' "$out/report-$mode-$n.json" || true)
					farm_cpu=$(awk -v a="$cpu0" -v b="$cpu1" 'BEGIN {printf "%.2f", b-a}')
					printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$mode" "$n" "$c" "$r" "$wall" "$user" "$sys" "$rss" "$farm_cpu" "$((hs1 - hs0))" "$failed" "$(load1)" >>"$results"
					echo "bench: $mode n=$n concurrency $c rep $r: wall ${wall}s cpu $(awk -v u="$user" -v s="$sys" 'BEGIN {print u+s}')s rss $((rss / 1024))MiB farm ${farm_cpu}s failed $failed" >&2
				done
			done
		done
		# The floor: crypto/tls alone (dial, P-256 handshake, close; no
		# verification, nothing kept) on one core, at the same concurrency.
		for c in $concs; do
			for r in $(seq "$reps"); do
				read -r cpu0 hs0 < <(farm_totals)
				GOMAXPROCS=1 /usr/bin/time -f '%e %U %S %M' -o "$out/time.txt" "$out/floor" -targets "$farm/targets.tsv" -concurrency "$c" >"$out/floor-$n.txt" 2>&1 || true
				read -r cpu1 hs1 < <(farm_totals)
				read -r wall user sys rss < <(tail -n 1 "$out/time.txt")
				failed=$(sed -n 's/.* failed \([0-9]*\) .*/\1/p' "$out/floor-$n.txt")
				farm_cpu=$(awk -v a="$cpu0" -v b="$cpu1" 'BEGIN {printf "%.2f", b-a}')
				printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' floor "$n" "$c" "$r" "$wall" "$user" "$sys" "$rss" "$farm_cpu" "$((hs1 - hs0))" "${failed:--}" "$(load1)" >>"$results"
				echo "bench: floor n=$n concurrency $c rep $r: wall ${wall}s cpu $(awk -v u="$user" -v s="$sys" 'BEGIN {print u+s}')s rss $((rss / 1024))MiB" >&2
			done
		done
		# tlsx, when given: the same addresses (the farm serves one leaf per
		# address whatever the SNI), the same concurrency, no update check.
		if [ -n "$tlsx" ]; then
			for c in $concs; do
				for r in $(seq "$reps"); do
					read -r cpu0 hs0 < <(farm_totals)
					/usr/bin/time -f '%e %U %S %M' -o "$out/time.txt" "$out/tlsx" -l "$farm/targets.txt" -c "$c" -json -silent -duc -o "$out/tlsx-$n.json" >/dev/null 2>"$out/tlsx-$n.err" || true
					read -r cpu1 hs1 < <(farm_totals)
					read -r wall user sys rss < <(tail -n 1 "$out/time.txt")
					failed=$(grep -c '"error"' "$out/tlsx-$n.json" || true)
					farm_cpu=$(awk -v a="$cpu0" -v b="$cpu1" 'BEGIN {printf "%.2f", b-a}')
					printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' tlsx "$n" "$c" "$r" "$wall" "$user" "$sys" "$rss" "$farm_cpu" "$((hs1 - hs0))" "$failed" "$(load1)" >>"$results"
					echo "bench: tlsx n=$n concurrency $c rep $r: wall ${wall}s cpu $(awk -v u="$user" -v s="$sys" 'BEGIN {print u+s}')s rss $((rss / 1024))MiB failed $failed" >&2
				done
			done
		fi
		stop_pid "$knot_pid"
		for p in "${farm_pids[@]}"; do stop_pid "$p"; done
		umount /etc/hosts
	done
fi

if [ $axfr = 1 ]; then
	records=${AXFR_RECORDS:-1000000}
	echo "bench: zone transfer of $records records" >&2
	zf=$(mktemp)
	# A realistic mix: 70% A, 10% AAAA, 10% CNAME, 5% TXT, 5% SRV.
	awk -v n="$records" 'BEGIN {
		printf "$ORIGIN big.test.\n$TTL 300\n@ SOA ns hostmaster 1 3600 600 86400 300\n@ NS ns\nns A 127.0.0.1\n"
		for (i = 0; i < n; i++) {
			r = i % 20
			if (r < 14) printf "h%07d A 10.%d.%d.%d\n", i, int(i / 65536) % 256, int(i / 256) % 256, i % 256
			else if (r < 16) printf "h%07d AAAA 2001:db8::%x:%x\n", i, int(i / 65536), i % 65536
			else if (r < 18) printf "c%07d CNAME h%07d\n", i, i - 3
			else if (r < 19) printf "h%07d TXT \"v=spf1 -all\"\n", i
			else printf "_https._tcp.s%07d SRV 0 0 8443 h%07d\n", i, i - 1
		}
	}' >"$zf"
	start_knot big.test "$out/knot-big" "$zf"
	for r in $(seq "$reps"); do
		/usr/bin/time -f '%e %U %S %M' -o "$out/time.txt" kdig @127.0.0.1 AXFR big.test. >"$out/kdig-axfr.txt"
		read -r wall user sys rss < <(tail -n 1 "$out/time.txt")
		printf 'kdig-axfr\t%s\t-\t%s\t%s\t%s\t%s\t%s\t-\t-\t-\t%s\n' "$records" "$r" "$wall" "$user" "$sys" "$rss" "$(load1)" >>"$results"
		/usr/bin/time -f '%e %U %S %M' -o "$out/time.txt" "$out/certwatch" inventory --zone big.test --nameserver 127.0.0.1:53 --output json >"$out/inventory-big.json" || true
		read -r wall2 user sys rss2 < <(tail -n 1 "$out/time.txt")
		printf 'inventory\t%s\t-\t%s\t%s\t%s\t%s\t%s\t-\t-\t-\t%s\n' "$records" "$r" "$wall2" "$user" "$sys" "$rss2" "$(load1)" >>"$results"
		echo "bench: axfr rep $r: kdig ${wall}s, certwatch inventory ${wall2}s $((rss2 / 1024))MiB" >&2
	done
	stop_pid "$knot_pid"
fi

# ---- the table: medians per mode and size ----
echo
echo "certwatch bench ($(nproc) CPUs, $(go version 2>/dev/null | awk '{print $3}'), $(date -u +%Y-%m-%d); medians of $reps; load average after each run (1 min, the benchmark itself adds about 2) $(awk -F'\t' 'NR > 1 {print $12}' "$results" | sort -g | sed -n '1p;$p' | paste -sd- -); raw figures in $results)"
echo
printf '| %-6s | %9s | %11s | %6s | %22s | %12s | %12s | %10s | %6s |\n' mode endpoints concurrency "wall s" "client CPU ms/endpoint" "peak RSS MiB" "handshakes/s" "farm CPU s" failed
printf '|%s|%s|%s|%s|%s|%s|%s|%s|%s|\n' -------- ----------: ------------: -------: -----------------------: -------------: -------------: -----------: -------:
for mode in zone static tlsx floor; do
	for n in $(awk -F'\t' -v m="$mode" '$1 == m {print $2}' "$results" | sort -nu); do
		for c in $(awk -F'\t' -v m="$mode" -v n="$n" '$1 == m && $2 == n {print $3}' "$results" | sort -nu); do
			col() { awk -F'\t' -v m="$mode" -v n="$n" -v c="$c" "\$1 == m && \$2 == n && \$3 == c {print $1}" "$results" | median; }
			wall=$(col '$5')
			cpu=$(col "(\$6+\$7)*1000/\$2")
			rss=$(col '$8/1024')
			hs=$(col '$10/$5')
			farm=$(col '$9')
			failed=$(col '$11')
			printf '| %-6s | %9s | %11s | %6.2f | %22.3f | %12.1f | %12.0f | %10.2f | %6s |\n' "$mode" "$n" "$c" "$wall" "$cpu" "$rss" "$hs" "$farm" "$failed"
		done
	done
done
if awk -F'\t' '$1 == "inventory"' "$results" | grep -q .; then
	kw=$(awk -F'\t' '$1 == "kdig-axfr" {print $5}' "$results" | median)
	iw=$(awk -F'\t' '$1 == "inventory" {print $5}' "$results" | median)
	ir=$(awk -F'\t' '$1 == "inventory" {print $8/1024}' "$results" | median)
	n=$(awk -F'\t' '$1 == "inventory" {print $2; exit}' "$results")
	echo
	printf 'Zone transfer of %s records from knotd: kdig AXFR %.2f s; certwatch inventory --output json %.2f s (%.2fx kdig), peak RSS %.0f MiB\n' \
		"$n" "$kw" "$iw" "$(awk -v a="$iw" -v b="$kw" 'BEGIN {print a/b}')" "$ir"
fi
