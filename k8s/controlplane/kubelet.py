#!/usr/bin/env python3
"""kubelet.py ROOT NAME BINARY [CONTAINER-INDEX=DELAY_S ...]

A stand-in kubelet for a control plane without nodes: it takes the pods
of one run (label app.kubernetes.io/instance=NAME) that the Job controller
created, runs each pod's container command line as a local process with the
pod's environment (fieldRefs from the pod's annotations and labels, secretKeyRefs
from the Secret), its volumes mapped to local folders (ConfigMap items
materialized, a claim to one shared folder, emptyDirs per pod), and reports
the container's exit code and termination message back as the pod's status,
so the Job controller applies the pod failure policy to it."""
import json, os, re, subprocess, sys, time, threading, datetime

KUBECTL = ["kubectl", "--kubeconfig", os.environ.get("KUBECONFIG", "/tmp/infermatrix-kube/kubeconfig")]
ROOT = sys.argv[1]          # local folder for volumes
INSTANCE = sys.argv[2]      # the run's name
BINARY = sys.argv[3]        # infermatrix binary
DELAY = {}                  # pod index -> seconds to hold it before starting (a late pod)
for a in sys.argv[4:]:
    k, v = a.split("=")
    DELAY[k] = float(v)


def kubectl(*args, input=None):
    r = subprocess.run(KUBECTL + list(args), capture_output=True, text=True, input=input)
    if r.returncode != 0:
        print("kubectl", args, r.stderr, file=sys.stderr)
    return r.stdout


def now():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def run_pod(pod):
    name = pod["metadata"]["name"]
    spec = pod["spec"]
    c = spec["containers"][0]
    poddir = os.path.join(ROOT, "pods", name)
    mounts = {}
    for v in spec.get("volumes", []):
        if "persistentVolumeClaim" in v:
            host = os.path.join(ROOT, "claims", v["persistentVolumeClaim"]["claimName"])
        elif "configMap" in v:
            host = os.path.join(poddir, "cm-" + v["name"])
            cm = json.loads(kubectl("get", "configmap", v["configMap"]["name"], "-o", "json"))
            for it in v["configMap"].get("items", []):
                data = cm.get("data", {}).get(it["key"])
                p = os.path.join(host, it["path"])
                os.makedirs(os.path.dirname(p), exist_ok=True)
                if data is None:
                    import base64
                    open(p, "wb").write(base64.b64decode(cm["binaryData"][it["key"]]))
                else:
                    open(p, "w").write(data)
        elif "emptyDir" in v:
            host = os.path.join(poddir, "empty-" + v["name"])
        else:
            host = None
        if host:
            os.makedirs(host, exist_ok=True)
            mounts[v["name"]] = host
    env = {"PATH": os.environ["PATH"]}
    for e in c.get("env", []):
        vf = e.get("valueFrom")
        if vf and "fieldRef" in vf:
            path = vf["fieldRef"]["fieldPath"]
            m = re.match(r"metadata\.(annotations|labels)\['(.+)'\]", path)
            env[e["name"]] = pod["metadata"][m.group(1)][m.group(2)]
        elif vf and "secretKeyRef" in vf:
            sec = json.loads(kubectl("get", "secret", vf["secretKeyRef"]["name"], "-o", "json"))
            import base64
            env[e["name"]] = base64.b64decode(sec["data"][vf["secretKeyRef"]["key"]]).decode()
        else:
            env[e["name"]] = e.get("value", "")
    termlog = os.path.join(poddir, "termination-log")
    args = []
    for a in c["args"]:
        a = re.sub(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", lambda m: env.get(m.group(1), m.group(0)), a)
        if a == c.get("terminationMessagePath", "/dev/termination-log"):
            args.append(termlog)
            continue
        for m in c.get("volumeMounts", []):
            mp = m["mountPath"]
            if a == mp or a.startswith(mp + "/"):
                a = mounts[m["name"]] + a[len(mp):]
                break
        args.append(a)
    env["HOME"] = mounts.get("home", poddir)
    env["TMPDIR"] = mounts.get("tmp", "/tmp")
    idx = pod["metadata"].get("annotations", {}).get("batch.kubernetes.io/job-completion-index", "")
    delay = DELAY.get(c["name"] + "-" + idx, 0)
    if delay:
        time.sleep(delay)
    started = now()
    kubectl("patch", "pod", name, "--subresource=status", "--type=merge", "-p", json.dumps({"status": {
        "phase": "Running", "startTime": started,
        "containerStatuses": [{"name": c["name"], "image": c["image"], "imageID": "", "ready": True, "restartCount": 0,
                               "started": True, "state": {"running": {"startedAt": started}}}]}}))
    print(f"[kubelet] {name}: running {' '.join(args)}", flush=True)
    with open(os.path.join(poddir, "log"), "w") as log:
        rc = subprocess.run([BINARY] + args, env=env, stdout=log, stderr=subprocess.STDOUT).returncode
    msg = open(termlog).read() if os.path.exists(termlog) else ""
    if not msg and c.get("terminationMessagePolicy") == "FallbackToLogsOnError" and rc != 0:
        msg = "".join(open(os.path.join(poddir, "log")).readlines()[-80:])[-2048:]
    phase = "Succeeded" if rc == 0 else "Failed"
    print(f"[kubelet] {name}: exit {rc}: {msg.strip()[:300]}", flush=True)
    kubectl("patch", "pod", name, "--subresource=status", "--type=merge", "-p", json.dumps({"status": {
        "phase": phase,
        "conditions": [{"type": "Ready", "status": "False", "lastTransitionTime": now(), "reason": "PodCompleted"}],
        "containerStatuses": [{"name": c["name"], "image": c["image"], "imageID": "", "ready": False, "restartCount": 0,
                               "started": False, "state": {"terminated": {"exitCode": rc, "reason": "Completed" if rc == 0 else "Error",
                                                                            "message": msg, "startedAt": started, "finishedAt": now()}}}]}}))


seen = set()
threads = []
deadline = time.time() + float(os.environ.get("KUBELET_SECONDS", "600"))
while time.time() < deadline:
    pods = json.loads(kubectl("get", "pods", "-l", f"app.kubernetes.io/instance={INSTANCE}", "-o", "json") or '{"items":[]}')
    for p in pods["items"]:
        n = p["metadata"]["name"]
        if n in seen or p["status"].get("phase") != "Pending":
            continue
        seen.add(n)
        t = threading.Thread(target=run_pod, args=(p,))
        t.start()
        threads.append(t)
    jobs = json.loads(kubectl("get", "jobs", "-l", f"app.kubernetes.io/instance={INSTANCE}", "-o", "json") or '{"items":[]}')
    done = [j for j in jobs["items"] if any(c["type"] in ("Complete", "Failed") and c["status"] == "True" for c in j["status"].get("conditions", []))]
    if jobs["items"] and len(done) == len(jobs["items"]) and all(not t.is_alive() for t in threads):
        break
    time.sleep(1)
for t in threads:
    t.join()
