# Helpers the bench scripts share for reading the farm (bench/tlsfarm) and
# their figures. Sourced by bench/run.sh and bench/replicas.sh; they set
# shards (how many farm processes, on ports 9990 and up) before calling
# farm_totals.

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
