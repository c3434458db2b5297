#!/bin/bash
# Builds etcd, kube-apiserver and kube-controller-manager (Kubernetes
# v1.37.2) from the Go module proxy into $KUBE_DIR/bin (default
# /tmp/infermatrix-kube): about 15 minutes and 6 GB of module cache on two
# cores. k8s.io/kubernetes names its staging modules as v0.0.0 with
# replace directives that only hold inside its own repository, so this
# module replaces each with its published v0.37.2.
set -euo pipefail
KUBE_DIR=${KUBE_DIR:-/tmp/infermatrix-kube}
mkdir -p "$KUBE_DIR/cmd/etcd" && cd "$KUBE_DIR"
cat > cmd/etcd/main.go <<'GO'
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
GO
printf 'module kubeplay\n\ngo 1.26.0\n\nrequire k8s.io/kubernetes v1.37.2\n' > go.mod
GOFLAGS=-mod=mod go mod download k8s.io/kubernetes@v1.37.2
modfile=$(go env GOMODCACHE)/cache/download/k8s.io/kubernetes/@v/v1.37.2.mod
{ echo; echo 'replace ('; grep -E '^\s+k8s.io/[a-z-]+ v0.0.0$' "$modfile" | awk '{print "\t" $1 " => " $1 " v0.37.2"}'; echo ')'; } >> go.mod
GOFLAGS=-mod=mod go mod tidy
GOFLAGS=-mod=mod go build -o bin/etcd ./cmd/etcd
GOFLAGS=-mod=mod go build -o bin/kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver
GOFLAGS=-mod=mod go build -o bin/kube-controller-manager k8s.io/kubernetes/cmd/kube-controller-manager
echo "built into $KUBE_DIR/bin"
