#!/usr/bin/env bash
# A real kind cluster on this machine, with no container registry and no Docker:
#   e2e/kind.sh up          # cluster "rillet-kind": 1 control plane + 3 workers in zone-a/b/c
#   KUBECONFIG=$(e2e/kind.sh kubeconfig) kubectl get nodes
#   e2e/kind.sh down        # removes it all and checks the machine is as `up` found it
#   e2e/kind.sh status      # exit 0 when the cluster runs
#   e2e/kind.sh build       # only build (cached) what `up` needs; no cluster is touched
# kind is built from its Go module and runs with its podman provider; the node image is built
# here (e2e/kind/build: Debian + systemd + containerd + Kubernetes from their Go modules, every
# image preloaded). How it works and what it needs: e2e/README.md, "kind".
#
# Network plan (RFC 2544 benchmark range only; nothing here routes off this machine):
#   nodes     198.19.255.0/24, podman network "rillet-kind" (internal: no NAT, no default route),
#             bridge rillet-kind0; this machine is 198.19.255.1 on it (kubectl reaches the API
#             server at the control plane's address); fixed node addresses .10-.13
#   pods      198.19.128.0/17, a /24 per node (rillet-cni.service in each node)
#   services  198.19.0.0/20 (DNS 198.19.0.10)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cache_root=${RILLET_CACHE:-$HOME/.cache/rillet}
name=rillet-kind
state=${RILLET_KIND_STATE:-/var/tmp/rillet-kind}
kubeconfig=$state/kubeconfig
network=rillet-kind
bridge=rillet-kind0
node_subnet=198.19.255.0/24
host_address=198.19.255.1
pod_subnet=198.19.128.0/17
service_subnet=198.19.0.0/20
# kind names nodes <cluster>-control-plane, <cluster>-worker, -worker2, ...
nodes=("$name-control-plane=198.19.255.10" "$name-worker=198.19.255.11"
       "$name-worker2=198.19.255.12" "$name-worker3=198.19.255.13")
workers=$name-worker,$name-worker2,$name-worker3
api_server=https://198.19.255.10:6443
operator_changed=
operator_ns=rillet-system   # the chart's release, as `make demo` installs it
release=rillet
helm_bin=${RILLET_HELM:-$cache_root/helm/v3.19.4/bin/helm}
export CONTAINERS_CONF=${CONTAINERS_CONF:-$cache_root/containers.conf}

say() { echo "kind.sh: $*" >&2; }

# What `down` must leave exactly as `up` found it: links, addresses, routes, firewall, the kernel
# settings a privileged node could reach (all of /proc/sys but counters), and podman's objects of
# ours. Left out: links named vethN (podman makes and removes one per container, for any user of
# podman here).
machine_state() (
  set +e +o pipefail  # an empty section is fine (no ip6tables rules, say)
  noise='^veth[0-9]+|dev veth[0-9]+'
  echo "## ip link"; ip -o link show | sed -E 's/^[0-9]+: //; s/ link\/.*//' | grep -vE "$noise" | sort
  echo "## ip addr"; ip -o addr show | awk '{print $2, $3, $4}' | grep -vE "$noise" | sort
  echo "## ip route"; ip route show table all | grep -vE "$noise" | sort
  echo "## iptables"; iptables-save | grep -v '^#' | sed -E 's/\[[0-9]+:[0-9]+\]//'
  echo "## ip6tables"; ip6tables-save 2>/dev/null | grep -v '^#' | sed -E 's/\[[0-9]+:[0-9]+\]//'
  echo "## nft"; nft list ruleset 2>/dev/null
  echo "## podman objects of ours"
  podman ps -a --format '{{.Names}}' | grep rillet-kind
  podman network ls --format '{{.Name}}' | grep rillet-kind
  podman volume ls --format '{{.Name}} {{.Labels}}' | grep rillet-kind
  echo "## sysctl"
  sysctl -a 2>/dev/null | grep -vE '^(fs\.(dentry-state|inode-nr|inode-state|file-nr|aio-nr|quota\.)|kernel\.(random\.|ns_last_pid|pty\.nr|sched_domain)|net\.netfilter\.nf_conntrack_count|net\.(ipv4|ipv6)\.(conf|neigh)\.(veth|podman|k8s|cni)|vm\.(stat_refresh|drop_caches))'
)

ensure_containers_conf() {
  # podman here needs explicit default_ulimits (root lacks CAP_SYS_RESOURCE): e2e/localk8s/host.py
  # writes it when it is missing.
  [[ -f $CONTAINERS_CONF ]] && return 0
  (cd "$(dirname "$here")" && python3 -c 'from e2e.localk8s import host; host.write_containers_conf(host.Layout.default())')
}

# kind runs `podman` from PATH; this wrapper (first on PATH for kind only) adjusts its node
# containers to this machine:
#   - /lib/modules does not exist here; kind bind-mounts it ("some k8s things want to read it"),
#     podman refuses a missing source: an empty folder instead (nothing in a node loads modules)
#   - fixed addresses and /etc/hosts entries for every node (the network has no DNS server: a
#     podman DNS server would forward unknown names to this machine's resolver, off the machine)
#   - --dns none: the node image's loopback-only resolv.conf, not this machine's
#   - $state/shared at /var/local-path-shared in every node: the ReadWriteMany StorageClass
#     "shared" (e2e/kind/node/kind/manifests/default-storage.yaml), as NFS on a real cluster
write_podman_wrapper() {
  local dir=$state/bin
  mkdir -p "$dir" "$state/empty-lib-modules" "$state/shared"
  cat > "$dir/podman" <<EOF
#!/usr/bin/env bash
# Written by e2e/kind.sh (write_podman_wrapper): podman as kind calls it, adjusted to this machine.
if [[ \${1:-} != run ]]; then exec /usr/bin/podman "\$@"; fi
shift
args=() name=
prev=
for a in "\$@"; do
  [[ \$a == /lib/modules:/lib/modules:ro ]] && a=$state/empty-lib-modules:/lib/modules:ro
  [[ \$prev == --name ]] && name=\$a
  args+=("\$a"); prev=\$a
done
extra=(--dns none -v $state/shared:/var/local-path-shared)
for n in ${nodes[*]}; do
  extra+=(--add-host "\${n%=*}:\${n#*=}")
  [[ \${n%=*} == "\$name" ]] && extra+=(--ip "\${n#*=}")
done
exec /usr/bin/podman run "\${extra[@]}" "\${args[@]}"
EOF
  chmod +x "$dir/podman"
}

kind_cmd() {
  PATH=$state/bin:$PATH KIND_EXPERIMENTAL_PROVIDER=podman KIND_EXPERIMENTAL_PODMAN_NETWORK=$network \
    "$kind_bin" "$@"
}

ensure_network() {
  if ! podman network exists "$network"; then
    podman network create --driver bridge --subnet "$node_subnet" --gateway "$host_address" \
      --internal --disable-dns "$network" >/dev/null
    # podman 4.3 cannot name the bridge on its command line; netavark reads it from this file
    local conf=/etc/containers/networks/$network.json
    python3 - "$conf" "$bridge" <<'PY'
import json, sys
path, bridge = sys.argv[1:]
net = json.load(open(path)); net["network_interface"] = bridge
json.dump(net, open(path, "w"), indent=1)
PY
  fi
}

# This machine's side, once the nodes run: its address on the node bridge (an internal network
# gets none), and "unreachable" for the pod and service ranges, so that no answer to a pod or
# service address can ever take this machine's default route.
host_side_up() {
  # (here-strings, not pipes into grep -q: with pipefail, grep's early exit can fail the pipe)
  grep -q " $host_address/" <<<"$(ip -o addr show dev "$bridge")" ||
    ip addr add "$host_address/${node_subnet#*/}" dev "$bridge"
  local r
  for r in "$pod_subnet" "$service_subnet"; do
    grep -q "^unreachable $r" <<<"$(ip route show type unreachable)" || ip route add unreachable "$r"
  done
}

host_side_down() {
  local r
  for r in "$pod_subnet" "$service_subnet"; do
    ip route del unreachable "$r" 2>/dev/null || true
  done
  ip link show "$bridge" >/dev/null 2>&1 && ip link del "$bridge" || true
}

kubectl_() { "$k8s_bin/kubectl" --kubeconfig "$kubeconfig" "$@"; }

wait_for() {  # wait_for <what> <seconds> <command...>
  local what=$1 limit=$2 t0=$SECONDS; shift 2
  until "$@" >/dev/null 2>&1; do
    if ((SECONDS - t0 > limit)); then say "timed out after ${limit}s waiting for $what"; "$@" || true; return 1; fi
    sleep 2
  done
  say "$what after $((SECONDS - t0)) s"
}

nodes_ready() {
  [[ $(kubectl_ get nodes -o jsonpath='{range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' | grep -c True) == "${#nodes[@]}" ]]
}

# The project's images (broker, operator, Spark, the Spark operator, test images), built by
# podman and saved as archives (e2e/localk8s/kind_images.py: podman only holds them under a
# private name), then `kind load image-archive`ed into every worker. $state/loaded lists the
# archives this cluster has: an unchanged image is neither rebuilt nor loaded again. A new
# operator image is noted in $operator_changed: its tag stays rillet/operator:dev, so the running
# Deployment would keep the old one.
load_project_images() {
  local t0=$SECONDS tag archive built
  built=$(cd "$(dirname "$here")" && PYTHONPATH=e2e python3 -m localk8s.kind_images)
  touch "$state/loaded"
  while IFS=$'\t' read -r tag archive; do
    grep -qxF "$archive" "$state/loaded" && continue
    say "kind load image-archive $tag ($(du -m "$archive" | cut -f1) MB)"
    # the workers only: the control plane keeps its NoSchedule taint and never runs our pods
    kind_cmd load image-archive --name "$name" --nodes "$workers" "$archive"
    echo "$archive" >> "$state/loaded"
    [[ $tag == rillet/operator:dev ]] && operator_changed=1
  done <<<"$built"
  say "project images ready in the nodes after $((SECONDS - t0)) s"
}

# The operator, as a user installs it: the CRDs (server-side apply: helm never upgrades a
# chart's CRDs), a namespace enforcing the restricted Pod Security Standard, then the chart.
# `helm upgrade --install` with the chart's defaults: a re-run changes nothing but the revision
# (and resets values a test upgraded the release to).
install_chart() {
  local t0=$SECONDS repo; repo=$(dirname "$here")
  [[ -x $helm_bin ]] || helm_bin=$("$here/build-k8s" helm | tail -1)/helm   # from its Go module
  kubectl_ apply --server-side --force-conflicts -f "$repo/crds" >/dev/null
  kubectl_ apply -f - >/dev/null <<YAML
apiVersion: v1
kind: Namespace
metadata:
  name: $operator_ns
  labels:
    pod-security.kubernetes.io/enforce: restricted
    pod-security.kubernetes.io/warn: restricted
YAML
  local installed=; KUBECONFIG=$kubeconfig "$helm_bin" status "$release" --namespace "$operator_ns" \
    >/dev/null 2>&1 && installed=1
  KUBECONFIG=$kubeconfig "$helm_bin" upgrade --install "$release" "$repo/helm/rillet" \
    --namespace "$operator_ns" --wait --timeout 300s >/dev/null
  # the same tag, a new image: a running release's pods must be replaced (a new one has it)
  if [[ -n $installed && -n $operator_changed ]]; then
    kubectl_ -n "$operator_ns" rollout restart deployment -l app.kubernetes.io/instance="$release" >/dev/null
    kubectl_ -n "$operator_ns" rollout status deployment -l app.kubernetes.io/instance="$release" --timeout=300s >/dev/null
  fi
  say "chart $release installed in $operator_ns after $((SECONDS - t0)) s"
}

up() {
  local t0=$SECONDS
  mkdir -p "$state"
  [[ -f $state/machine-before ]] || machine_state > "$state/machine-before"
  # netavark turns on this machine's IPv4 forwarding when it sets up the node bridge (even an
  # internal one); `down` puts back the value found here (writing it also resets every
  # interface's `forwarding` and all.accept_redirects, which the kernel ties to it)
  [[ -f $state/ip_forward-before ]] || sysctl -n net.ipv4.ip_forward > "$state/ip_forward-before"
  ensure_containers_conf
  local built; built=$("$here/kind/build")
  kind_bin=$(sed -n 1p <<<"$built"); node_image=$(sed -n 2p <<<"$built")
  k8s_bin=$(sed -n 3p <<<"$built")
  local tb=$SECONDS
  write_podman_wrapper
  ensure_network
  if ! grep -qx "$name" <<<"$(kind_cmd get clusters 2>/dev/null)"; then
    rm -f "$state/loaded"   # a new cluster has none of the project's images
    say "kind create cluster $name (image $node_image)"
    kind_cmd create cluster --name "$name" --image "$node_image" --kubeconfig "$state/kind-kubeconfig" \
      --retain --config - <<YAML
kind: Cluster
apiVersion: kind.x-k8s.io/v1alpha4
networking:
  disableDefaultCNI: true      # rillet-cni.service in each node (e2e/kind/node)
  podSubnet: $pod_subnet
  serviceSubnet: $service_subnet
  kubeProxyMode: iptables
nodes:
- role: control-plane
- role: worker
  labels: {topology.kubernetes.io/zone: zone-a}
- role: worker
  labels: {topology.kubernetes.io/zone: zone-b}
- role: worker
  labels: {topology.kubernetes.io/zone: zone-c}
kubeadmConfigPatches:
- |
  kind: InitConfiguration
  # CoreDNS is ours (e2e/kind/coredns.yaml): kubeadm's Corefile forwards to resolv.conf
  skipPhases: [preflight, addon/coredns]
- |
  kind: KubeletConfiguration
  # root here lacks CAP_SYS_RESOURCE: the kubelet keeps its own oom_score_adj
  oomScoreAdj: 0
- |
  kind: KubeProxyConfiguration
  # conntrack sysctls are this machine's: kube-proxy leaves them alone (0 = do not set)
  conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s, udpTimeout: 0s, udpStreamTimeout: 0s}
YAML
  fi
  host_side_up
  # kubectl on this machine reaches the control plane's own address (no port publishing: the
  # node network is internal, without NAT)
  sed -E "s#server: https://.*#server: $api_server#" "$state/kind-kubeconfig" > "$kubeconfig"
  kubectl_ apply -f "$here/kind/network.yaml" -f "$here/kind/coredns.yaml" >/dev/null
  wait_for "4 nodes Ready" 300 nodes_ready
  wait_for "CoreDNS available" 180 kubectl_ -n kube-system rollout status deploy/coredns --timeout=5s
  load_project_images
  install_chart
  say "up in $((SECONDS - t0)) s (cluster $((SECONDS - tb)) s); KUBECONFIG=$kubeconfig"
  echo "$kubeconfig"
}

down() {
  local t0=$SECONDS
  kind_bin=$(ls "$cache_root"/kind/tools/*/bin/kind 2>/dev/null | head -1 || true)
  if [[ -n $kind_bin ]]; then
    write_podman_wrapper
    kind_cmd delete cluster --name "$name" || true
  fi
  podman network exists "$network" && podman network rm "$network" >/dev/null || true
  host_side_down
  if [[ -f $state/ip_forward-before ]]; then
    sysctl -qw net.ipv4.ip_forward="$(cat "$state/ip_forward-before")"
  fi
  rm -rf "$state/bin" "$state/empty-lib-modules" "$state/kubeconfig" "$state/kind-kubeconfig" "$state/loaded" "$state/shared" \
    "$state/prebuild.log" "$state/ip_forward-before"
  say "down in $((SECONDS - t0)) s"
  if [[ -f $state/machine-before ]]; then
    if diff <(cat "$state/machine-before") <(machine_state) > "$state/machine-diff"; then
      say "machine as before up: links, addresses, routes, iptables, nft, sysctl identical"
      rm -f "$state/machine-before" "$state/machine-diff"
      rmdir "$state" 2>/dev/null || true
    else
      say "the machine differs from before up (kept in $state/machine-diff):"
      cat "$state/machine-diff" >&2
      return 1
    fi
  fi
}

# Everything `up` builds, and nothing else: kind, the node image, helm and the project's images,
# each skipped when its cached stamp matches. The e2e fixture runs this in the background, at the
# lowest CPU priority, while the unit and integration tests run (e2e/localk8s/kind.py):
# a cold build then overlaps them and the first e2e test's `up` finds it done.
build() {
  local t0=$SECONDS
  mkdir -p "$state"
  ensure_containers_conf
  "$here/kind/build" >/dev/null
  [[ -x $helm_bin ]] || "$here/build-k8s" helm >/dev/null
  (cd "$(dirname "$here")" && PYTHONPATH=e2e python3 -m localk8s.kind_images) >/dev/null
  say "built in $((SECONDS - t0)) s"
}

# Exit 0 when the cluster runs (its kubeconfig written by `up`), 1 otherwise.
status() {
  kind_bin=$(ls "$cache_root"/kind/tools/*/bin/kind 2>/dev/null | head -1 || true)
  [[ -n $kind_bin && -f $kubeconfig ]] || return 1
  write_podman_wrapper
  grep -qx "$name" <<<"$(kind_cmd get clusters 2>/dev/null)"
}

case ${1:-} in
  up) up ;;
  down) down ;;
  status) status ;;
  build) build ;;
  kubeconfig) echo "$kubeconfig" ;;
  *) echo "usage: $0 up|down|status|build|kubeconfig" >&2; exit 2 ;;
esac
