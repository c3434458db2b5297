#!/bin/bash
# Starts a Kubernetes control plane on loopback from build.sh's binaries:
# etcd, kube-apiserver (strict validation, RBAC, a static admin token) and
# kube-controller-manager with the Job controller. There are no nodes:
# kubelet.py plays the kubelet. Writes $KUBE_DIR/kubeconfig.
set -euo pipefail
KUBE_DIR=${KUBE_DIR:-/tmp/infermatrix-kube}
cd "$KUBE_DIR" && mkdir -p logs
[ -f sa.key ] || { openssl genrsa -out sa.key 2048 && openssl rsa -in sa.key -pubout -out sa.pub; } 2>/dev/null
echo 'admin-token-infermatrix,admin,admin,"system:masters"' > tokens.csv
cat > kubeconfig <<KC
apiVersion: v1
kind: Config
clusters: [{name: local, cluster: {server: "https://127.0.0.1:6443", insecure-skip-tls-verify: true}}]
users: [{name: admin, user: {token: admin-token-infermatrix}}]
contexts: [{name: local, context: {cluster: local, user: admin, namespace: default}}]
current-context: local
KC
rm -rf etcd-data
bin/etcd --data-dir etcd-data --listen-client-urls http://127.0.0.1:2379 --advertise-client-urls http://127.0.0.1:2379 \
  --listen-peer-urls http://127.0.0.1:2380 > logs/etcd.log 2>&1 &
sleep 2
bin/kube-apiserver --etcd-servers=http://127.0.0.1:2379 --bind-address=127.0.0.1 --advertise-address=127.0.0.1 \
  --endpoint-reconciler-type=none --secure-port=6443 --cert-dir=certs --token-auth-file=tokens.csv --authorization-mode=RBAC \
  --service-account-issuer=https://kubernetes.default.svc --service-account-key-file=sa.pub --service-account-signing-key-file=sa.key \
  --service-cluster-ip-range=10.0.0.0/24 --disable-admission-plugins=ServiceAccount > logs/apiserver.log 2>&1 &
for _ in $(seq 90); do kubectl --kubeconfig kubeconfig get --raw /readyz >/dev/null 2>&1 && break; sleep 1; done
bin/kube-controller-manager --kubeconfig=kubeconfig --controllers=job-controller,ttl-after-finished-controller,garbage-collector-controller \
  --leader-elect=false --bind-address=127.0.0.1 --secure-port=10257 > logs/controller-manager.log 2>&1 &
sleep 5
echo "control plane up: export KUBECONFIG=$KUBE_DIR/kubeconfig"
