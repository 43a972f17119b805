#!/usr/bin/env bash
# The e2e suite on kind (needs Docker, kind, kubectl, helm and image pulls; NOT exercised on the
# machine this project is developed on, which has neither Docker nor pulls: there the suite uses
# e2e/local-cluster). Usage:
#   e2e/kind.sh up      # cluster "rillet-e2e": 1 control plane + 3 workers in zone-a/b/c,
#                       # project images built with docker and loaded, chart installed
#   KUBECONFIG=$(e2e/kind.sh kubeconfig) make e2e
#   e2e/kind.sh down
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(dirname "$here")
name=${RILLET_KIND_CLUSTER:-rillet-e2e}
kubeconfig=${RILLET_KIND_KUBECONFIG:-$HOME/.kube/rillet-e2e-kind}

images() {  # tag dockerfile context; the same list as e2e/localk8s/images.py
  [[ -f $repo/broker_image/Dockerfile ]] && echo "rillet/broker:dev $repo/broker_image/Dockerfile $repo"
  [[ -f $repo/operator/Dockerfile ]] && echo "rillet/operator:dev $repo/operator/Dockerfile $repo"
  [[ -f $repo/spark/Dockerfile ]] && echo "rillet/spark:dev $repo/spark/Dockerfile $repo"
  for df in "$here"/test-images/*/Dockerfile; do
    [[ -f $df ]] && echo "rillet/e2e-$(basename "$(dirname "$df")"):dev $df $(dirname "$df")"
  done
  return 0
}

up() {
  if ! kind get clusters | grep -qx "$name"; then
    kind create cluster --name "$name" --kubeconfig "$kubeconfig" --wait 180s --config - <<YAML
kind: Cluster
apiVersion: kind.x-k8s.io/v1alpha4
nodes:
- role: control-plane
- role: worker
  labels: {topology.kubernetes.io/zone: zone-a}
- role: worker
  labels: {topology.kubernetes.io/zone: zone-b}
- role: worker
  labels: {topology.kubernetes.io/zone: zone-c}
YAML
  fi
  images | while read -r tag df ctx; do
    docker build -f "$df" -t "$tag" "$ctx"
    kind load docker-image --name "$name" "$tag"
  done
  if docker image inspect rillet/spark:dev >/dev/null 2>&1; then
    docker tag rillet/spark:dev rillet-spark:dev && kind load docker-image --name "$name" rillet-spark:dev
  fi
  if [[ -d $repo/helm/rillet ]]; then
    KUBECONFIG=$kubeconfig helm upgrade --install rillet "$repo/helm/rillet" \
      --namespace rillet-system --create-namespace --wait --timeout 5m
  fi
  echo "$kubeconfig"
}

case ${1:-} in
  up) up ;;
  down) kind delete cluster --name "$name" ;;
  kubeconfig) echo "$kubeconfig" ;;
  *) echo "usage: $0 up|down|kubeconfig" >&2; exit 2 ;;
esac
