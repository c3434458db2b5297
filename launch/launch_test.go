package launch

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// childEnv makes the test binary act as a server process: the tests start
// themselves, as a launch block would start vllm.
const childEnv = "LAUNCH_TEST_CHILD"

func TestMain(m *testing.M) {
	if mode := os.Getenv(childEnv); mode != "" {
		os.Exit(child(mode))
	}
	os.Exit(m.Run())
}

// child plays a server: serve (answer 200 on addr until SIGTERM), exit
// (fail at once), deaf (run, never listen), stubborn (serve and ignore
// SIGTERM), parent (start a deaf grandchild, write its pid, serve).
func child(mode string) int {
	addr := os.Getenv("LAUNCH_TEST_ADDR")
	serve := func() {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			fmt.Println(err)
			os.Exit(1)
		}
		fmt.Println("serving", addr)
		go func() { _ = http.Serve(ln, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})) }()
	}
	switch mode {
	case "exit":
		fmt.Println("no model here")
		return 3
	case "deaf":
		time.Sleep(time.Minute)
		return 0
	case "stubborn":
		signal.Ignore(syscall.SIGTERM)
		serve()
		time.Sleep(time.Minute)
		return 0
	case "parent":
		self, _ := os.Executable()
		p, err := os.StartProcess(self, []string{self}, &os.ProcAttr{Env: append(os.Environ(), childEnv+"=deaf")})
		if err != nil {
			fmt.Println(err)
			return 1
		}
		_ = os.WriteFile(os.Getenv("LAUNCH_TEST_PIDFILE"), []byte(strconv.Itoa(p.Pid)), 0o644)
	}
	serve()
	time.Sleep(time.Minute) // SIGTERM ends it
	return 0
}

func spec(t *testing.T, mode string, extra ...string) (Spec, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(t.TempDir(), "server.log")
	return Spec{
		Command: []string{self}, Env: append([]string{childEnv + "=" + mode, "LAUNCH_TEST_ADDR=" + addr}, extra...),
		Log: log, ReadyURL: "http://" + addr + "/health", ReadyTimeout: 30 * time.Second,
		StopSignal: "SIGTERM", StopGrace: 10 * time.Second,
	}, log
}

func TestServerStartsAnswersAndStops(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "pid")
	s, log := spec(t, "parent", "LAUNCH_TEST_PIDFILE="+pidFile)
	p, err := Start(s)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.WaitReady(context.Background(), http.DefaultClient); err != nil {
		t.Fatal(err)
	}
	if p.Ready.Before(p.Started) {
		t.Errorf("ready %v before started %v", p.Ready, p.Started)
	}
	if err := p.Stop(); err != nil {
		t.Errorf("Stop: %v; a server ending of SIGTERM stopped as asked", err)
	}
	if !p.Exited() {
		t.Error("the process is still running after Stop")
	}
	b, _ := os.ReadFile(log)
	if !strings.Contains(string(b), "serving") {
		t.Errorf("log = %q; want the server's output", b)
	}
	// The grandchild was in the process group and went with it; wait for
	// init to reap it (bounded: it was killed, not asked).
	b, err = os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(string(b))
	for deadline := time.Now().Add(10 * time.Second); ; {
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("grandchild %d outlived the stop", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestServerThatExitsBeforeReady(t *testing.T) {
	s, _ := spec(t, "exit")
	p, err := Start(s)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop()
	err = p.WaitReady(context.Background(), http.DefaultClient)
	if !errors.Is(err, ErrExited) || !strings.Contains(err.Error(), "exit status 3") || !strings.Contains(err.Error(), "no model here") {
		t.Errorf("err = %v; want ErrExited with the status and the log's end", err)
	}
}

func TestServerThatNeverGetsReady(t *testing.T) {
	s, _ := spec(t, "deaf")
	s.ReadyTimeout = 300 * time.Millisecond
	p, err := Start(s)
	if err != nil {
		t.Fatal(err)
	}
	err = p.WaitReady(context.Background(), http.DefaultClient)
	if !errors.Is(err, ErrNotReady) || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("err = %v; want ErrNotReady with the last answer", err)
	}
	if err := p.Stop(); err != nil {
		t.Errorf("Stop: %v", err)
	}
}

func TestServerIgnoringTheSignalIsKilled(t *testing.T) {
	s, _ := spec(t, "stubborn")
	s.StopGrace = 200 * time.Millisecond
	p, err := Start(s)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.WaitReady(context.Background(), http.DefaultClient); err != nil {
		t.Fatal(err)
	}
	if err := p.Stop(); err == nil || !strings.Contains(err.Error(), "was killed") {
		t.Errorf("Stop: %v; want killed after the grace period", err)
	}
	if !p.Exited() {
		t.Error("still running")
	}
}

func TestEnvAndCommandKeepCredentialsOut(t *testing.T) {
	t.Setenv("HF_TOKEN", "hf_secret_value")
	t.Setenv("PLAIN", "/opt/models")
	kv, secrets := Env(map[string]string{"HF_TOKEN": "${HF_TOKEN}", "MODELS": "${PLAIN}/llama"})
	joined := strings.Join(kv, " ")
	if !strings.Contains(joined, "HF_TOKEN=hf_secret_value") || !strings.Contains(joined, "MODELS=/opt/models/llama") {
		t.Errorf("env = %q", kv)
	}
	if len(secrets) != 1 || secrets[0] != "hf_secret_value" {
		t.Errorf("secrets = %q; want the token only", secrets)
	}
	t.Setenv("VLLM_KEY", "sk-live-1")
	args, secrets := Args([]string{"vllm", "serve", "${PLAIN}/m", "--api-key", "${VLLM_KEY}", "--port", "8000"})
	if got := strings.Join(args, " "); got != "vllm serve /opt/models/m --api-key sk-live-1 --port 8000" {
		t.Errorf("args = %q", got)
	}
	if len(secrets) != 1 || secrets[0] != "sk-live-1" {
		t.Errorf("secrets = %q; want the flag's value only", secrets)
	}
}
