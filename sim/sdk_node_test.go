package sim

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// openAINodeEnv names the node_modules folder that holds the official
// OpenAI Node SDK (`npm install --prefix DIR openai`), for
// TestOpenAINodeSDK.
const openAINodeEnv = "OPENAI_NODE_MODULES"

// TestOpenAINodeSDK runs the official OpenAI Node SDK against the built-in
// server (testdata/openai_sdk.cjs): streams, its accumulator, completions
// and its error classes, which read vLLM's nested error body. The SDK is
// an independent client: it was written against OpenAI's API, not against
// this simulator. It skips, saying why, where node or the SDK is missing.
func TestOpenAINodeSDK(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed: the official OpenAI Node SDK test needs it")
	}
	modules := os.Getenv(openAINodeEnv)
	if modules == "" {
		t.Skipf("%s is not set: install the SDK with `npm install --prefix DIR openai` and set %s=DIR/node_modules", openAINodeEnv, openAINodeEnv)
	}
	if _, err := os.Stat(filepath.Join(modules, "openai", "package.json")); err != nil {
		t.Skipf("%s=%s holds no openai package: %v", openAINodeEnv, modules, err)
	}
	script, err := filepath.Abs(filepath.Join("testdata", "openai_sdk.cjs"))
	if err != nil {
		t.Fatal(err)
	}
	inst := startSim(t, Config{MaxModelLen: 4096, TTFT: time.Millisecond, ITL: 100 * time.Microsecond})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, script, inst.BaseURL, inst.Server.Config().Model)
	cmd.Env = append(os.Environ(), openAINodeEnv+"="+modules)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the OpenAI Node SDK failed against the simulator: %v\n%s", err, out)
	}
	t.Logf("%s", out)
}
