# Helpers the bench scripts share for reading the farm (bench/tlsfarm) and
# their figures, and for serving it as a DNS zone. Sourced by bench/run.sh
# and bench/replicas.sh; they set shards (how many farm processes, on ports
# 9990 and up) before calling farm_totals, and KNOTD (knotd's path) and a
# pids array (what to stop at exit) before calling start_knot.

# median of the numbers on stdin
median() { sort -g | awk '{v[NR]=$1} END {if (NR==0) print "-"; else if (NR%2) print v[(NR+1)/2]; else print (v[NR/2]+v[NR/2+1])/2}'; }

# json_num FILE KEY: a number field of the farm's /status document
json_num() { sed -n "s/.*\"$2\":\([0-9.eE+-]*\).*/\1/p" "$1"; }

# farm_totals: "cpu_seconds handshakes" summed over the farm's shards
farm_totals() {
	local cpu=0 hs=0 port st
	for ((s = 0; s < shards; s++)); do
		port=$((9990 + s))
		st=$(mktemp)
		curl -sf "127.0.0.1:$port/status" >"$st"
		cpu=$(awk -v a="$cpu" -v u="$(json_num "$st" cpu_user_s)" -v y="$(json_num "$st" cpu_sys_s)" 'BEGIN {print a+u+y}')
		hs=$((hs + $(json_num "$st" handshakes_ok) + $(json_num "$st" handshakes_failed)))
		rm -f "$st"
	done
	echo "$cpu $hs"
}

# start_knot NAME DIR ZONEFILE: serve zone NAME from ZONEFILE on 127.0.0.1:53
start_knot() {
	local zone=$1 dir=$2 file=$3
	rm -rf "$dir" && mkdir -p "$dir/run" "$dir/storage" "$dir/zones"
	mv "$file" "$dir/zones/$zone.zone"
	cat >"$dir/knot.conf" <<-EOF
		server:
		    rundir: "$dir/run"
		    listen: 127.0.0.1@53
		log:
		  - target: stderr
		    any: warning
		database:
		    storage: "$dir/storage"
		acl:
		  - id: loopback
		    address: 127.0.0.0/8
		    action: transfer
		template:
		  - id: default
		    storage: "$dir/zones"
		    file: "%s.zone"
		    zonefile-sync: -1
		    journal-content: none
		zone:
		  - domain: $zone.
		    acl: loopback
	EOF
	"$KNOTD" -c "$dir/knot.conf" >"$dir/knotd.log" 2>&1 &
	knot_pid=$!
	pids+=("$knot_pid")
	for _ in $(seq 1200); do
		kdig @127.0.0.1 +short +timeout=1 SOA "$zone." 2>/dev/null | grep -q . && return 0
		sleep 0.1
	done
	echo "bench: knotd did not serve $zone; see $dir/knotd.log" >&2
	exit 1
}

# farm_zone HOSTS: the farm's names in HOSTS (its hosts file) as the zone
# farm.test (A records), the way certwatch normally finds endpoints
farm_zone() {
	printf '$ORIGIN farm.test.\n$TTL 300\n@ SOA ns.invalid. hostmaster.invalid. 1 3600 600 86400 300\n@ NS ns.invalid.\n'
	awk '$2 ~ /\.farm\.test$/ {sub(/\.farm\.test$/, "", $2); print $2, "A", $1}' "$1"
}
